"""``run.json``: what a sweep encoded, evaluated and reused, one entry per (model, task) with the settings it ran.

Each entry carries its resolved settings (:meth:`~layer_mteb.common.settings.RunSettings.record`), so the log
names the attention that ran, as ``scores.csv`` does. A later sweep into the same folder replaces the entries of
the units it ran again and keeps the others; a rerun that only read a unit's results back keeps the computing
run's counts and times under ``computed``. Folders written before entries had their own settings stay readable:
their entries take the file's top-level ``settings`` (where ``attention`` may be ``null``, the model's own).
Once a sweep has changed the scores, :func:`warn_stale_side_files` names the files computed from the earlier ones.
"""

from __future__ import annotations

import json
import logging
from pathlib import Path

from layer_mteb.common.files import write_json
from layer_mteb.common.run_files import SCORES_FILE, SIDE_FILES
from layer_mteb.common.timing import peak_rss_bytes
from layer_mteb.evaluation.workers import usable_cpus

logger = logging.getLogger(__name__)


def write_run_log(path: Path, kept: list[dict], new: list[dict]) -> None:
    """``kept`` (the entries already in the folder) updated with ``new``: an entry of the same unit is replaced.

    A new entry that only read stored results back keeps, under ``computed``, the record of the run that computed
    them (its counts and time breakdown): a resumed sweep must not erase how long the scores took to make."""
    earlier = {_unit(entry): entry for entry in kept}
    new = [_with_computed(entry, earlier.get(_unit(entry))) for entry in new]
    redone = {_unit(entry) for entry in new}
    write_json(path, {"tasks": [entry for entry in kept if _unit(entry) not in redone] + new})


#: What ``computed`` keeps of the run that computed a unit's scores
COMPUTED_FIELDS = (
    "units_evaluated",
    "texts_encoded",
    "eval_workers_used",
    "seconds",
    "forward_texts_per_second",
    "overhead_ratio",
    "peak_rss_bytes",
)


def _with_computed(entry: dict, before: dict | None) -> dict:
    """``entry``, with the computing run's record from ``before`` when ``entry`` evaluated and encoded nothing."""
    if before is None or entry.get("units_evaluated") or entry.get("texts_encoded"):
        return entry
    if "computed" in before:
        computed = before["computed"]
    elif before.get("units_evaluated"):
        computed = {name: before[name] for name in COMPUTED_FIELDS if name in before}
    else:
        return entry
    return {**entry, "computed": computed}


def time_record(phases: dict[str, float], wall: float, eval_workers: int, texts_encoded: int) -> dict[str, object]:
    """A task's time breakdown for its ``run.json`` entry.

    ``seconds``: the task's wall time and each phase (``evaluators`` summed over layers, whichever process ran
    them). ``forward_texts_per_second``: texts encoded per second in the model. ``overhead_ratio``: wall time over
    the time the two unavoidable parts would take back to back, the model's forward and the evaluators spread over
    the cores that ran them (1.0 = nothing else costs time); None when nothing was encoded or evaluated.
    ``peak_rss_bytes``: the process's peak so far (and of its finished evaluation workers), not this task's alone.
    """
    seconds = {"wall": wall, **phases}
    forward, evaluators = phases.get("forward", 0.0), phases.get("evaluators", 0.0)
    bare = forward + evaluators / max(1, min(eval_workers, usable_cpus()))
    return {
        "seconds": {phase: round(value, 3) for phase, value in seconds.items()},
        "forward_texts_per_second": round(texts_encoded / forward, 1) if forward > 0 and texts_encoded else None,
        "overhead_ratio": round(wall / bare, 3) if bare > 0 else None,
        "peak_rss_bytes": peak_rss_bytes(),
    }


def _unit(entry: dict) -> tuple[object, ...]:
    settings = json.dumps(entry.get("settings"), sort_keys=True)
    return entry.get("model"), entry.get("revision"), entry.get("task"), settings


def warn_stale_side_files(output: Path) -> None:
    """Name every side file older than the scores it was computed from, with the command that refreshes it."""
    scores = output / SCORES_FILE
    if not scores.is_file():
        return
    for name, command in SIDE_FILES.values():
        side = output / name
        if command is not None and side.is_file() and side.stat().st_mtime < scores.stat().st_mtime:
            logger.warning("%s was computed from earlier scores; refresh it: %s --run %s", side, command, output)
