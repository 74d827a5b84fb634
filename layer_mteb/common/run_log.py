"""A run's ``run.json`` read back: its entries, the task file of each custom task and the data folder its local
tasks came from, for every command that reloads a run's tasks later (``select --labels``, ``cost``). The sweep writes
the file (:mod:`layer_mteb.evaluation.runlog`)."""

from __future__ import annotations

import json
import logging
from pathlib import Path

from layer_mteb.common.run_files import RUN_LOG

logger = logging.getLogger(__name__)


def read_run_log(path: Path) -> list[dict]:
    """The entries of an existing ``run.json`` (none when there is none; an unreadable one is named and left)."""
    if not path.is_file():
        return []
    try:
        log = json.loads(path.read_text())
        entries = [dict(entry) for entry in log["tasks"]]
    except (OSError, ValueError, KeyError, TypeError) as err:
        logger.warning(
            "%s is unreadable (%s: %s); it is rewritten with this run's tasks only", path, type(err).__name__, err
        )
        return []
    shared = log.get("settings")  # the old layout: one settings object for the whole file
    for entry in entries:
        entry.setdefault("settings", shared)
    return entries


def declared_tasks(folder: Path) -> dict[str, str]:
    """{task: ``FILE.yaml:TASK``} for the custom tasks of a run folder's ``run.json``: the ``--tasks`` selection that
    builds each again (mteb tasks are found by name and need none)."""
    entries = read_run_log(folder / RUN_LOG)
    return {str(e["task"]): f"{e['task_file']}:{e['task']}" for e in entries if e.get("task_file") and e.get("task")}


def recorded_data_dir(folder: Path) -> Path | None:
    """The data folder a run read its local tasks from (``run.json``'s ``data_dir``), when it still exists: what a
    later ``select --labels`` on the run reads the labels from unless told otherwise."""
    found = [Path(e["data_dir"]) for e in read_run_log(folder / RUN_LOG) if e.get("data_dir")]
    return next((path for path in found if path.is_dir()), None)
