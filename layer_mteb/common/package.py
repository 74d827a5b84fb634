"""The package itself: its version, read from its installed metadata (pyproject.toml is the one place it is
written), and its public names, which load on first use (PEP 562) so importing the package imports none of its heavy
dependencies (torch, mteb, transformers' models, seaborn) until a name that needs them is used."""

from __future__ import annotations

import sys
from collections.abc import Callable, Mapping
from importlib import import_module, metadata
from typing import Any

try:
    VERSION = metadata.version("layer_mteb")
except metadata.PackageNotFoundError:  # a source tree on sys.path that was never installed
    VERSION = "0+unknown"


def lazy_names(package: str, homes: Mapping[str, str]) -> tuple[Callable[[str], Any], Callable[[], list[str]]]:
    """``__getattr__`` and ``__dir__`` for ``package``, whose public name -> submodule defining it is ``homes``.

    A public name must not also be the name of one of the package's submodules: importing that submodule would
    bind the module over the name (tests/project/test_layout.py checks this)."""
    module = sys.modules[package]

    def __getattr__(name: str) -> Any:
        if name not in homes:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        value = getattr(import_module(f"{package}.{homes[name]}"), name)
        setattr(module, name, value)  # later look-ups skip this function
        return value

    def __dir__() -> list[str]:
        return sorted({*vars(module), *homes})

    return __getattr__, __dir__
