"""What happens to a run after mteb scored it, one sub-package per job, imported one way (``lint-imports``):

- :mod:`.runs`: read run folders and import others' results (the authors' release, mteb result JSONs);
- :mod:`.selection`: the label-free selection engine (rules, per-layer curves, selectors, ``auto``, correlations);
- :mod:`.labels`: layers picked from K labelled examples (loads models, runs worker pools);
- :mod:`.report`: Table 1, figures, markdown and the report folder (reads results; computes nothing new);
- :mod:`.study`: the selector studies (leave one model out, leave one family out) and the shipped ``auto`` policy.
"""
