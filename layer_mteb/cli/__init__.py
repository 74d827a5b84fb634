"""The ``layer-mteb`` command line: one module per command (its options, checks, settings and execution), the
parser and dispatch (:mod:`.main`), shared option groups (:mod:`.options`) and what it prints (:mod:`.console`)."""

from layer_mteb.cli.main import main

__all__ = ["main"]
