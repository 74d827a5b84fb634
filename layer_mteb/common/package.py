"""The package itself: its version (from its installed metadata; pyproject.toml writes it) and its public names,
loaded on first use (PEP 562) so importing the package imports no heavy dependency."""

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
    """``__getattr__`` and ``__dir__`` for ``package``, ``homes`` mapping each public name to its submodule (never a
    submodule's own name: importing it would bind the module over the name; tests/project/test_layout.py checks)."""
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
