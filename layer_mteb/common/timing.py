"""Where a run's time goes: seconds per phase (tokenise, forward, pooling, evaluators, ...), added up as it runs.

A sweep records these per task in ``run.json`` so a user can see whether the forward pass or mteb's evaluators
dominate and estimate a run elsewhere (a GPU shortens the forward, not the evaluators). A GPU runs the queued work
of a phase while the host goes on, so its time is billed to the phase that waits for it (the next batch's copy of
its inputs to the device, or a copy of results to the host). Phases do not synchronise the device by themselves:
a synchronisation at every phase of every batch would stall the forward loop (the host could not queue the next
batch while the device works). A phase that ends a stretch of device work (an encoding pass) asks for one with
``sync=True``, so what it queued is not billed to whatever runs next (the evaluators).
"""

from __future__ import annotations

import resource
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field

import torch


@dataclass
class PhaseTimes:
    """Seconds spent per phase; a phase with ``sync=True`` waits for ``device`` (when a CUDA device) at its end."""

    device: torch.device | str | None = None
    seconds: dict[str, float] = field(default_factory=dict)

    @contextmanager
    def phase(self, name: str, *, sync: bool = False) -> Iterator[None]:
        start = time.perf_counter()
        try:
            yield
        finally:
            if sync:
                self._sync()
            self.add(name, time.perf_counter() - start)

    def add(self, name: str, seconds: float) -> None:
        self.seconds[name] = self.seconds.get(name, 0.0) + seconds

    def _sync(self) -> None:
        if self.device is not None and torch.device(self.device).type == "cuda":
            torch.cuda.synchronize(self.device)


def peak_rss_bytes() -> int:
    """Peak resident memory of this process and of its finished child processes (evaluation workers), the larger.

    Linux reports kilobytes; macOS bytes.
    """
    unit = 1 if sys.platform == "darwin" else 1024
    own = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    children = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
    return max(own, children) * unit
