"""A run folder as one object: every file ``layer-mteb`` writes into one or reads from one, read by one checked
reader and written by one atomic writer (:class:`RunFolder`); a table's columns, row order and key are its feature's.
One :class:`RunFolder` object is handed from a command to every stage that reads the folder: it reads each table once
and keeps it for its life (a table it writes is read again), so ``select`` or ``report`` read ``scores.csv`` once.
pandas loads where a table is read, not on import: ``layer-mteb --help`` and the CLI's checks of file names stay quick.

```
<run>/
  scores.csv               one row per (task, subset, layer): mteb's main score          (layer-mteb run, import)
                           (an aggregate task's subtasks too, each naming it under `aggregate`)
  scores.shard-I-of-N.csv  one shard's rows, until `layer-mteb merge` joins them          (run --shard I/N)
  run.json                 per (model, task): settings, what was encoded, evaluated, reused (run; run.shard-I-of-N.json)
  mteb/                    mteb's own result JSONs, one experiment per layer (its ResultCache folder)
  metrics.csv              label-free metrics per layer, and where their texts came from  (metrics, run --task-metrics)
  agreement.csv            agreement and intrinsic-dimension curves per layer             (select --by agreement)
  cost.csv                 seconds and FLOPs of the model cut at each layer               (cost)
  stress.csv[.gz]          per-prompt entropy of the stress tests                         (stress)
  dip.csv                  Hartigan's dip test of those entropies per layer               (stress)
  stress.json              each stress run's settings, texts' origin and wall time        (stress)
  selection.csv            every label-free selector's pick                               (select)
  selection.<by>.csv       the picks of a narrower `select --by`                          (select --by)
  selection.labels-K.csv   the picks of K labelled examples                               (select --labels K)
  correlation.csv          each metric against the score across layers                    (correlate)
  .layer-mteb.lock         the writers' lock; .layer-mteb.lock.holder names the process holding it
```

One writer at a time: every read-modify-write of a table (and every whole-table write) holds the folder's writers'
lock (:meth:`RunFolder.locked`, :mod:`layer_mteb.common.folder_lock`), so two commands writing one folder at once keep
every row of both.

The tables:

- ``scores.csv``: one row per (task, layer, subset) with mteb's main score, declared, made and read as
  :mod:`layer_mteb.common.scores` says; :meth:`RunFolder.scores` leaves an aggregate task's subtask rows out
  (:func:`~layer_mteb.common.scores.task_rows`), so every mean over a run's tasks counts the aggregate once.
- a feature's own table (``metrics.csv``, ``agreement.csv``, ``stress.csv``, ``dip.csv``, ``selection.csv``,
  ``correlation.csv``, ``cost.csv``: ``METRICS_TABLE`` in :mod:`layer_mteb.metrics`, ...) is declared beside the code
  that makes its rows, as a :class:`~layer_mteb.common.table.Table` naming its file (named here) and key, and read and
  updated through :meth:`RunFolder.read` and :meth:`RunFolder.update`.

``run.json`` has one entry per (model, task) with the settings it ran; the sweep says how a later one merges into it
(:func:`layer_mteb.evaluation.sweep.merged_log`).
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable, Mapping
from contextlib import AbstractContextManager
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, Any

from layer_mteb.common.config import SETTINGS_COLUMNS
from layer_mteb.common.errors import UserError, first_line
from layer_mteb.common.files import atomic_write, write_json
from layer_mteb.common.folder_lock import locked
from layer_mteb.common.scores import SCORE_COLUMNS, ScoredSetting, combine_scores, one_setting, read_scores, task_rows
from layer_mteb.common.table import Table, read_table, replace_rows

if TYPE_CHECKING:
    import pandas as pd

logger = logging.getLogger(__name__)

SCORES_FILE = "scores.csv"
RUN_LOG = "run.json"
MTEB_FOLDER = "mteb"
COST_FILE = "cost.csv"
SELECTION_FILE = "selection.csv"
CORRELATION_FILE = "correlation.csv"

#: The tables computed from the scores, with the command that recomputes them: a sweep that changed the scores makes
#: them stale.
REFRESHED_BY = {SELECTION_FILE: "layer-mteb select", CORRELATION_FILE: "layer-mteb correlate"}


def sharded(name: str, shard: tuple[int, int] | tuple[str, str] | None) -> str:
    """``name`` for a whole run, ``<stem>.shard-I-of-N.<suffix>`` for shard I of N (``scores.shard-1-of-4.csv``);
    ``("*", "*")`` gives the glob matching every shard file of ``name`` (``scores.shard-*-of-*.csv``)."""
    if shard is None or shard[1] == 1:
        return name
    stem, _, suffix = name.partition(".")
    return f"{stem}.shard-{shard[0]}-of-{shard[1]}.{suffix}"


@dataclass(frozen=True)
class RecordedTasks:
    """How a later command (``metrics --run``, ``cost``, ``select --labels``, the agreement curves) finds a run's
    tasks again, as ``run.json`` recorded them: ``task_files``, {task: ``FILE.yaml:TASK``} for its custom tasks (mteb
    tasks are found by name and need none), and ``data_dir``, the data folder the run read its local tasks from when
    it still exists (else None)."""

    task_files: Mapping[str, str]
    data_dir: Path | None

    def tasks_value(self, task: str) -> str:
        """The ``--tasks`` value that builds ``task`` again: its ``FILE.yaml:TASK``, or its name."""
        return self.task_files.get(task, task)


class RunFolder:
    """One run folder (``shard``: the files of shard I of N of a sharded run, until they are merged).

    Each file has one reader that checks it (a missing, torn or column-short file is one :class:`UserError` line
    naming the command that writes it) and one atomic writer; the side tables share one update, in which the new
    rows replace the stored rows of their keys and every other stored row stays.

    Each table is read once and kept for the object's life: a command builds one and hands it to every stage. A table
    the object writes is read again after; a read-modify-write reads the file under the lock, never the kept copy, so
    another process's rows stay. A RunFolder is a path (``os.PathLike``), so code taking a folder's path takes it, and
    one built from another shares its tables."""

    def __init__(self, path: str | Path | RunFolder, shard: tuple[int, int] | None = None) -> None:
        self.path = Path(path)
        self.shard = shard
        #: each table as read, by file name (a shard's table by its own name)
        self._tables: dict[object, Any] = path._tables if isinstance(path, RunFolder) else {}

    @classmethod
    def of(cls, run: str | Path | RunFolder) -> RunFolder:
        """The command's folder as it is (so each of its tables is read once per command), or one for a path."""
        return run if isinstance(run, RunFolder) else cls(run)

    def __repr__(self) -> str:
        return f"RunFolder({str(self.path)!r})"

    def __fspath__(self) -> str:
        return str(self.path)

    __str__ = __fspath__

    def _kept(self, key: object, read: Callable[[], Any]) -> Any:
        """The table ``read`` gives, read on the first call only (a copy each time: a caller may change its frame)."""
        if key not in self._tables:
            self._tables[key] = read()
        kept = self._tables[key]
        if isinstance(kept, list):
            return [dict(entry) for entry in kept]
        return None if kept is None else kept.copy()

    def _forget(self, name: str) -> None:
        """Drop the kept copies of ``name``: it is about to be read under the lock, or was just written."""
        for key in (name, ("side", name)):
            self._tables.pop(key, None)

    def file(self, name: str) -> Path:
        return self.path / name

    def locked(self) -> AbstractContextManager[None]:
        """Hold the folder's writers' lock for the block (:func:`~layer_mteb.common.folder_lock.locked`)."""
        return locked(self.path)

    # --- scores.csv ---

    @property
    def scores_file(self) -> Path:
        return self.file(sharded(SCORES_FILE, self.shard))

    def has_scores(self) -> bool:
        return self.scores_file.is_file()

    def scores(self, *, missing_ok: bool = False, subtasks: bool = False) -> pd.DataFrame:
        """The folder's scores (integer layers) of the run's tasks as mteb counts them (:func:`task_rows`: an
        aggregate task's subtask rows left out), the table every analysis reads; with ``subtasks``, every row the
        file holds (what a writer updates). With ``missing_ok``, a folder or file not there yet, or one without rows,
        reads as an empty table."""
        if not self.has_scores():
            if missing_ok:
                import pandas as pd

                return pd.DataFrame(columns=SCORE_COLUMNS)
            if not self.path.is_dir():
                raise UserError(
                    f"run folder {str(self.path)!r} does not exist: pass a folder written by `layer-mteb run`"
                )
            raise UserError(
                f"no {self.scores_file.name} in {self.path}: run "
                f"`layer-mteb run --model MODEL --tasks TASKS --output {self.path}` first"
            )
        frame = self._kept(self.scores_file.name, partial(read_scores, self.scores_file))
        if frame.empty and not missing_ok:
            raise UserError(f"{self.scores_file} has no scores yet: let `layer-mteb run` finish at least one layer")
        return frame if subtasks else task_rows(frame)

    def write_scores(self, frame: pd.DataFrame) -> Path:
        return self.write_table(self.scores_file.name, frame)

    def update_scores(self, rows: list[dict]) -> pd.DataFrame:
        """The scores the folder holds now updated with ``rows`` (:func:`combine_scores`), read and written under the
        folder's lock, so the rows another writer added since this run began stay; the table written."""
        with self.locked():
            self._forget(self.scores_file.name)
            frame = combine_scores(self.scores(missing_ok=True, subtasks=True), rows)
            self.write_scores(frame)
        return frame

    def shard_score_files(self) -> list[Path]:
        """The shard tables of a sharded run not merged yet, in name order."""
        return sorted(self.path.glob(sharded(SCORES_FILE, ("*", "*"))))

    def held_scores(self) -> pd.DataFrame | None:
        """Every score row the folder holds: ``scores.csv`` and the shard tables not merged yet; None when it holds
        none (pandas loads only when there is a table, so ``run``'s checks stay light for a new folder)."""
        paths = [p for p in [self.file(SCORES_FILE), *self.shard_score_files()] if p.is_file()]
        if not paths:
            return None
        import pandas as pd

        parts = [RunFolder(self, _shard_of(p)).scores(missing_ok=True, subtasks=True) for p in paths]
        parts = [p for p in parts if not p.empty]
        return pd.concat(parts, ignore_index=True) if parts else None

    def held_setting(self) -> tuple[frozenset[tuple[str, str]], dict[str, str]] | None:
        """The (model, revision) runs the folder holds (:meth:`held_scores`) and their one setting; None for a folder
        holding no score. Scores of several settings, or a table that does not say its revision and settings, are one
        line: a run folder holds one setting."""
        held = self.held_scores()
        if held is None:
            return None
        lacking = [c for c in ("revision", *SETTINGS_COLUMNS) if c not in held.columns]
        if lacking:
            raise UserError(
                f"{self.path} holds scores that do not say their {', '.join(lacking)} (not written by `layer-mteb "
                "run`): give a new --output"
            )
        settings = held[list(SETTINGS_COLUMNS)].astype(str).drop_duplicates()
        if len(settings) > 1:
            raise UserError(
                f"{self.path} already holds scores of several settings: give a new --output (a run folder holds one "
                "setting)"
            )
        setting = settings.iloc[0].to_dict()
        return frozenset(zip(held["model"].astype(str), held["revision"].astype(str), strict=True)), setting

    def one_setting(self) -> pd.DataFrame:
        """The scores of the folder's one model at one setting (:func:`one_setting`: several models or settings are
        refused in one line), as every command that loads the run's model reads them."""
        return one_setting(self.scores())

    def setting(self, scores: pd.DataFrame | None = None, **placement: Any) -> ScoredSetting:
        """The folder's one model, revision, depth and encode settings (read off ``scores``, its :meth:`one_setting`
        rows, where the caller holds them); ``placement`` (device, batch size, ...) is not recorded in the folder and
        comes from the caller (default device: cuda if available)."""
        return ScoredSetting.of(self.one_setting() if scores is None else scores, **placement)

    # --- run.json ---

    @property
    def log_file(self) -> Path:
        return self.file(sharded(RUN_LOG, self.shard))

    def log(self) -> list[dict]:
        """The entries of ``run.json`` (none when there is none; an unreadable one is named and left)."""
        return self._kept(self.log_file.name, self._read_log)

    def _read_log(self) -> list[dict]:
        path = self.log_file
        if not path.is_file():
            return []
        try:
            return [dict(entry) for entry in json.loads(path.read_text())["tasks"]]
        except (OSError, ValueError, KeyError, TypeError) as err:
            logger.warning(
                "%s is unreadable (%s: %s); it is rewritten with this run's tasks only", path, type(err).__name__, err
            )
            return []

    def update_log(self, merge: Callable[[list[dict]], list[dict]]) -> None:
        """``run.json``'s entries replaced by ``merge`` of the entries it holds now, read and written under the
        folder's lock, so the entries another writer added since this run began stay."""
        with self.locked():
            self._forget(self.log_file.name)
            write_json(self.log_file, {"tasks": merge(self.log())})
            self._forget(self.log_file.name)

    def recorded_tasks(self) -> RecordedTasks:
        """What ``run.json`` says builds the run's tasks again (:class:`RecordedTasks`), from one read of it."""
        entries = self.log()
        task_files = {
            str(e["task"]): f"{e['task_file']}:{e['task']}" for e in entries if e.get("task_file") and e.get("task")
        }
        found = [Path(e["data_dir"]) for e in entries if e.get("data_dir")]
        return RecordedTasks(task_files, next((path for path in found if path.is_dir()), None))

    def stale_side_files(self) -> list[tuple[Path, str]]:
        """(file, the command that refreshes it) for every side file older than the scores it was computed from."""
        scores = self.file(SCORES_FILE)
        if not scores.is_file():
            return []
        made = scores.stat().st_mtime
        sides = [(self.file(name), command) for name, command in REFRESHED_BY.items()]
        return [(side, command) for side, command in sides if side.is_file() and side.stat().st_mtime < made]

    def warn_stale_side_files(self) -> None:
        """Name every side file the new scores made stale, with the command that refreshes it."""
        for side, command in self.stale_side_files():
            logger.warning("%s was computed from earlier scores; refresh it: %s --run %s", side, command, self.path)

    # --- the side tables ---

    def write_table(self, name: str, frame: pd.DataFrame, **to_csv: Any) -> Path:
        """``frame`` written to ``name`` in one atomic step (a killed write leaves the old file or the new one), under
        the folder's lock."""
        path = self.file(name)
        with self.locked():
            self._forget(name)  # the next read, after this write, reads the new file
            atomic_write(path, lambda tmp: frame.to_csv(tmp, index=False, **to_csv))
        return path

    def side_table(self, name: str) -> pd.DataFrame | None:
        """An optional table a report reads (``selection.csv``, ``metrics.csv``, ...); absent or without rows means
        "not there". One that cannot be read or lacks a ``model`` column is left out with a warning naming it: the
        report then lacks what it holds, which a user must be told."""
        path = self.file(name)
        if not path.is_file():
            return None
        frame = self._kept(("side", name), partial(_side_table, path))
        return frame if frame is not None and not frame.empty else None

    def read(self, table: Table, *, missing_ok: bool = False) -> pd.DataFrame:
        """The table a feature declares (:class:`Table` with its ``file``, held plain or as ``FILE.gz``), checked as
        every table is: a missing one is one line naming what makes it (an empty table with ``missing_ok``), a column
        added since it was written reads as the value rows written before it read as."""
        name = next((n for n in (table.file, f"{table.file}.gz") if self.file(n).is_file()), table.file)
        path, fix = self.file(name), table.fix.format(folder=self.path)
        if not path.is_file():
            if missing_ok:
                import pandas as pd

                return pd.DataFrame(columns=table.columns)
            raise UserError(f"no {name} in {self.path}: {fix} first")
        required = [column for column in table.columns if column not in dict(table.added)]
        return self._kept(name, lambda: table.with_added(read_table(path, required, fix, **dict(table.reading))))

    def update(self, table: Table, frame: pd.DataFrame, *, gzip: bool = False) -> Path:
        """Merge ``frame`` into the table a feature declares, the one update of every side table: under the folder's
        lock, the stored rows (read by :meth:`read`, so a torn table is refused, never dropped) with the rows of
        ``frame``'s keys replaced, tidied and written atomically. ``gzip`` writes ``FILE.gz`` (no timestamp: a rerun
        gives the same bytes) and removes a plain ``FILE``, whose rows it took, or the other way round."""
        names = (table.file, f"{table.file}.gz")
        with self.locked():
            for name in names:
                self._forget(name)
            # the new rows as the table holds them first: a setting they lack is its default, as in a file read back
            merged = table.tidy(replace_rows(self.read(table, missing_ok=True), table.tidy(frame), table.key))
            compression = {"method": "gzip", "mtime": 0} if gzip else None
            path = self.write_table(names[int(gzip)], merged, float_format=table.floats, compression=compression)
            self.file(names[1 - int(gzip)]).unlink(missing_ok=True)  # its rows were merged into the one just written
        return path


def _shard_of(path: Path) -> tuple[int, int] | None:
    """(I, N) of a shard table's name, None for the whole run's."""
    if path.name == SCORES_FILE:
        return None
    i, n = path.name.split(".")[1].removeprefix("shard-").split("-of-")
    return int(i), int(n)


def _side_table(path: Path) -> pd.DataFrame | None:
    import pandas as pd

    try:
        frame = pd.read_csv(path)
    except (pd.errors.ParserError, pd.errors.EmptyDataError, UnicodeDecodeError) as err:
        logger.warning("%s is unreadable (%s: %s); left out", path, type(err).__name__, first_line(err))
        return None
    if "model" not in frame.columns:
        logger.warning("%s has no model column; left out (rewrite it with the command that made it)", path)
        return None
    return frame
