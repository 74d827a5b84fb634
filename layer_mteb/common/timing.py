"""Where a run's time goes: seconds per phase (tokenise, forward, pooling, evaluators, ...), added up as it runs.

A sweep records these per task in ``run.json`` so a user can see whether the forward pass or mteb's evaluators
dominate and estimate a run elsewhere (a GPU shortens the forward, not the evaluators). On CUDA the device is
synchronised at each phase boundary, else its queued kernels would be billed to whichever phase waits first.
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
    """Seconds spent per phase; ``device`` is synchronised around each timed phase when it is a CUDA device."""

    device: torch.device | str | None = None
    seconds: dict[str, float] = field(default_factory=dict)

    @contextmanager
    def phase(self, name: str) -> Iterator[None]:
        self._sync()
        start = time.perf_counter()
        try:
            yield
        finally:
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
