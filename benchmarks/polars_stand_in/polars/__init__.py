"""A stand-in for polars on a GPU host that lacks it, used by ``gpu_smoke.sh`` only.

mteb imports polars at import time for its leaderboard and benchmark tables (``mteb.benchmarks``, ``mteb.results``),
which evaluation never builds; polars' runtime is 55 MB, too much to carry to an offline host for a smoke test.
Every name resolves so that those imports and annotations succeed, and any use fails loudly: a smoke run that
passes never touched polars.
"""


class _NotInstalled:
    def __init__(self, *args: object, **kwargs: object) -> None:
        raise ImportError("polars is not installed on this host (gpu_smoke.sh put a stand-in in its place)")


def __getattr__(name: str) -> type:
    if name.startswith("__"):
        raise AttributeError(name)
    return _NotInstalled
