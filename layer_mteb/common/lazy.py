"""Public names of a package that load on first use (PEP 562): importing the package imports none of its heavy
dependencies (torch, mteb, transformers' models, seaborn) until a name that needs them is used."""

from __future__ import annotations

import sys
from collections.abc import Callable, Mapping
from importlib import import_module
from types import ModuleType
from typing import Any


class _LazyPackage(ModuleType):
    """A package whose public function shares its name with a submodule (``layer_mteb.evaluation.sweep``): importing the
    submodule binds the module on the package, which would hide the function; the function is kept instead."""

    _public_functions: frozenset[str] = frozenset()

    def __setattr__(self, name: str, value: Any) -> None:
        if name in self._public_functions and isinstance(value, ModuleType):
            value = getattr(value, name)
        super().__setattr__(name, value)


def lazy_names(package: str, homes: Mapping[str, str]) -> tuple[Callable[[str], Any], Callable[[], list[str]]]:
    """``__getattr__`` and ``__dir__`` for ``package``, whose public name -> submodule defining it is ``homes``."""
    module = sys.modules[package]
    module.__class__ = _LazyPackage
    module._public_functions = frozenset(name for name, home in homes.items() if home == name)

    def __getattr__(name: str) -> Any:
        if name not in homes:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        value = getattr(import_module(f"{package}.{homes[name]}"), name)
        setattr(module, name, value)  # later look-ups skip this function
        return value

    def __dir__() -> list[str]:
        return sorted({*vars(module), *homes})

    return __getattr__, __dir__
