"""A stand-in for polars on a GPU host that lacks it, used by ``gpu_smoke.sh`` only.

mteb imports polars at import time (``mteb.benchmarks``, ``mteb.results``: leaderboard and benchmark tables), and
its data loaders use it too: the retrieval loader (``mteb/abstasks/retrieval_dataset_loaders.py``) turns qrels and
reranking's ``top_ranked`` into polars frames, and a multilingual task read from one ``default`` config
(``AbsTask.fast_load``, as STS22.v2) groups its rows with polars. So with this stand-in every real Retrieval and
Reranking task (from the hub or a folder in the hub's layout) and STS22.v2 fail on loading their data
(``tests/evaluation/test_hub_layouts.py`` fails 4 of its 6 cases), while the smoke's own tasks (a task file, read by
the project's loader) and local data folders of STS, Classification and Clustering never reach polars. polars'
runtime is 55 MB, too much to carry to an offline host for the smoke test. Every name resolves so that those imports
and annotations succeed, and any use fails loudly with an ImportError: a run that passes never touched polars.
"""


class _NotInstalled:
    def __init__(self, *args: object, **kwargs: object) -> None:
        raise ImportError("polars is not installed on this host (gpu_smoke.sh put a stand-in in its place)")


def __getattr__(name: str) -> type:
    if name.startswith("__"):
        raise AttributeError(name)
    return _NotInstalled
