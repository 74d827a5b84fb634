"""Where a run's time goes: seconds per phase (tokenise, forward, pooling, evaluators, ...), added up as it runs.

A GPU's queued work is billed to the phase that waits for it; phases do not synchronise by themselves (that would
stall the forward loop), but one that ends a stretch of device work asks with ``sync=True``, so its work is not
billed to what runs next (the evaluators).
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
        """Add the block's seconds to phase ``name``."""
        start = time.perf_counter()
        try:
            yield
        finally:
            if sync and self.device is not None and torch.device(self.device).type == "cuda":
                torch.cuda.synchronize(self.device)
            self.add(name, time.perf_counter() - start)

    def add(self, name: str, seconds: float) -> None:
        """Add ``seconds`` to phase ``name``."""
        self.seconds[name] = self.seconds.get(name, 0.0) + seconds


def peak_rss_bytes() -> int:
    """Peak resident memory of this process or its finished children (evaluation workers), the larger."""
    unit = 1 if sys.platform == "darwin" else 1024  # Linux reports kilobytes
    own = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    children = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
    return max(own, children) * unit
