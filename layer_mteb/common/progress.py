"""Progress that reaches the user wherever stderr goes: a tqdm bar on a terminal, else (SLURM logs, CI, where tqdm
left jobs silent for hours) an INFO line at most every ``LAYER_MTEB_PROGRESS_SECONDS`` (default 30) and at the end.
"""

from __future__ import annotations

import logging
import os
import sys
import time

from tqdm.auto import tqdm

logger = logging.getLogger("layer_mteb.common.progress")

DEFAULT_INTERVAL_S = 30.0


class LogProgress:
    """tqdm's ``update``/``close`` as log lines "desc: n/total unit (elapsed s)", at a bounded rate."""

    def __init__(self, total: int, desc: str, unit: str, interval: float):
        self.total, self.desc, self.unit, self.interval = total, desc, unit, interval
        self.n = 0
        self.start = self.last = time.monotonic()
        self.logged_n = -1

    def update(self, n: int = 1) -> None:
        """Count ``n`` more done; log when the interval passed or all are done."""
        self.n += n
        now = time.monotonic()
        if now - self.last >= self.interval or self.n >= self.total:
            self._log(now)

    def close(self) -> None:
        """Log the final count unless it was just logged."""
        if self.n and self.logged_n != self.n:
            self._log(time.monotonic())

    def _log(self, now: float) -> None:
        self.last, self.logged_n = now, self.n
        logger.info("%s: %d/%d %s (%.0f s)", self.desc, self.n, self.total, self.unit, now - self.start)


def progress(total: int, desc: str, unit: str, enabled: bool = True) -> tqdm | LogProgress:
    """A bar on a terminal, log lines off one, or a silent counter when ``enabled`` is False."""
    if enabled and not _stderr_is_terminal():
        return LogProgress(total, desc, unit, _interval())
    return tqdm(total=total, desc=desc, unit=f" {unit}", disable=not enabled, leave=False)


def _stderr_is_terminal() -> bool:
    try:
        return sys.stderr.isatty()
    except (AttributeError, ValueError):  # replaced or closed stream
        return False


def _interval() -> float:
    raw = os.environ.get("LAYER_MTEB_PROGRESS_SECONDS", "")
    try:
        return max(float(raw), 0.0) if raw else DEFAULT_INTERVAL_S
    except ValueError:
        logger.warning("LAYER_MTEB_PROGRESS_SECONDS=%r is not a number; using %g s", raw, DEFAULT_INTERVAL_S)
        return DEFAULT_INTERVAL_S
