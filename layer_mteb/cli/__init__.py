"""The ``layer-mteb`` command line: parsing and routing only (:mod:`.main`), and what it prints (:mod:`.console`)."""

from layer_mteb.cli.main import main

__all__ = ["main"]
