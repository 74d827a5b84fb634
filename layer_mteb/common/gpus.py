"""What torch's GPU checks say while mteb evaluates: no GPU, so every score is computed on the CPU.

mteb looks ``torch.cuda.is_available()`` up at call time and, when it says yes, moves similarity work to ``cuda``
(compiled there): in an evaluation worker forked after CUDA was used, that call fails ("Cannot re-initialize CUDA
in forked subprocess"); in the sweep itself, the numbers would differ in their last bits from a worker's. So an
evaluation sees no GPU (:func:`gpus_hidden`; a worker for its whole life, :func:`hide_gpus`), and the model's forward
pass, which may run inside an evaluation (texts mteb asks for that the cache lacks), sees them again
(:func:`gpus_shown`).
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


def _no_gpu() -> bool:
    return False


def _no_devices() -> int:
    return 0


_NONE: _Checks = (_no_gpu, _no_devices, _no_gpu)


def hide_gpus() -> None:
    """No GPU for anything this process runs from now on (a forked evaluation worker): the CUDA runtime is told so,
    should it start here, and torch's checks say so too."""
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
