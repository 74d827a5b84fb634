"""What torch's GPU checks say while mteb evaluates: no GPU, so every score is computed on the CPU.

mteb moves similarity work to ``cuda`` whenever ``torch.cuda.is_available()``: in a forked worker that fails, and in
the sweep the last bits would differ from a worker's. So an evaluation sees no GPU (:func:`gpus_hidden`, a worker
for life: :func:`hide_gpus`), and a forward pass inside one sees them again (:func:`gpus_shown`).
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from contextlib import contextmanager

_Checks = tuple[Callable[[], bool], Callable[[], int], Callable[[], bool]]

#: The checks each open :func:`gpus_hidden` replaced, innermost last.
_HIDDEN: list[_Checks] = []


def _checks() -> _Checks:
    import torch

    return torch.cuda.is_available, torch.cuda.device_count, torch.backends.mps.is_available


def _set(checks: _Checks) -> None:
    import torch

    torch.cuda.is_available, torch.cuda.device_count, torch.backends.mps.is_available = checks


_NONE: _Checks = (lambda: False, lambda: 0, lambda: False)


def hide_gpus() -> None:
    """No GPU for anything this process runs from now on (a forked worker): for the CUDA runtime and torch's checks."""
    os.environ["CUDA_VISIBLE_DEVICES"] = ""
    _set(_NONE)


@contextmanager
def gpus_hidden() -> Iterator[None]:
    """torch's checks say there is no GPU inside the block (mteb's evaluation), and what they said after it."""
    _HIDDEN.append(_checks())
    _set(_NONE)
    try:
        yield
    finally:
        _set(_HIDDEN.pop())


@contextmanager
def gpus_shown() -> Iterator[None]:
    """Inside an evaluation, torch's checks as they were before it (the model's forward pass needs the truth)."""
    if not _HIDDEN:
        yield
        return
    hidden = _checks()
    _set(_HIDDEN[-1])
    try:
        yield
    finally:
        _set(hidden)
