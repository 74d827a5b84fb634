"""The label-free selection engine: one rule per fact (:mod:`.rules`), per-layer curves, selectors, ``auto``,
picks and their leaderboard, and metric–score correlations."""
