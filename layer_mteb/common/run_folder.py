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

One writer at a time: every read-modify-write of a table (and every whole-table write) holds an exclusive lock on
the folder (:meth:`RunFolder.locked`, a ``filelock`` OS lock on ``.layer-mteb.lock``), so two commands writing one
folder at once (two array jobs of a sweep, a ``metrics`` beside a ``run``) serialise and every row of both stays. The
OS releases the lock when its process dies, killed or not, so a crashed writer never blocks the next one; its stale
``.holder`` note is overwritten by the next holder. A writer that waits longer than ``$LAYER_MTEB_LOCK_TIMEOUT``
seconds (default 300) stops with one line naming the process that holds the lock. Where the file system refuses
``flock`` (Lustre without ``-o flock``) filelock (>= 4.1.0) takes turns through a marker file instead, taking over
the marker of a holder dead on this host; the project says so once per folder (:func:`lacks_flock`).

The tables:

- ``scores.csv``: one row per (task, layer, subset) with mteb's main score, keyed by integer layer, and the run's
  one model and setting read back from it (:func:`one_setting`). An aggregate task's subtasks have rows of their own
  beside the aggregate's, with the aggregate's name under ``aggregate`` (empty on every other row): the file holds
  them for a reader, and :meth:`RunFolder.scores` leaves them out (:func:`task_rows`), so every mean over a run's tasks
  and every per-task pick counts the aggregate once, as mteb's benchmarks do.
- a feature's own table (``metrics.csv``, ``agreement.csv``, ``stress.csv``, ``dip.csv``, ``selection.csv``,
  ``correlation.csv``, ``cost.csv``: ``METRICS_TABLE`` in :mod:`layer_mteb.metrics`, ...) is declared beside the code
  that makes its rows, as a :class:`Table` naming its file (named here) and key, and read and updated through
  :meth:`RunFolder.read` and :meth:`RunFolder.update`.

``run.json`` has one entry per (model, task) with the settings it ran; the sweep says how a later one merges into it
(:func:`layer_mteb.evaluation.sweep.merged_log`).
"""

from __future__ import annotations

import json
import logging
import os
import socket
import threading
import time
from collections.abc import Callable, Collection, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, Any, NamedTuple, TypedDict

from layer_mteb.common.config import METRIC_SETTINGS, SETTINGS, SETTINGS_COLUMNS, EncodeConfig, default_device
from layer_mteb.common.errors import UserError, first_line
from layer_mteb.common.files import atomic_write, write_json

if TYPE_CHECKING:
    import pandas as pd

logger = logging.getLogger(__name__)

SCORES_FILE = "scores.csv"
RUN_LOG = "run.json"
MTEB_FOLDER = "mteb"
COST_FILE = "cost.csv"
SELECTION_FILE = "selection.csv"
CORRELATION_FILE = "correlation.csv"
LOCK_FILE = ".layer-mteb.lock"
#: who holds the lock: pid, host, command and since when (written by the holder, for a writer that waits too long)
LOCK_HOLDER_FILE = ".layer-mteb.lock.holder"
LOCK_TIMEOUT_ENV = "LAYER_MTEB_LOCK_TIMEOUT"
DEFAULT_LOCK_TIMEOUT = 300.0


class LayerId(TypedDict):
    """Which layer of which model a row is about: the first columns of scores and metrics alike."""

    model: str
    revision: str
    layer: int
    n_layers: int
    relative_depth: float


class Table(NamedTuple):
    """A table of the folder: the columns it must hold, what makes it (said where it is missing or torn, ``{folder}``
    the folder), and for a table that commands update, the row order that makes a rewrite give the same file, the key
    (rows of equal key are one measurement: a newer row replaces the stored one, every other stored row stays) and how
    its floats are written."""

    columns: list[str]
    fix: str
    order: Sequence[str] = ()
    key: Sequence[str] = ()
    floats: str | None = "%.8g"  # 8 significant digits keep distinct values distinct (mutual k-NN: steps >= 1e-5)
    file: str = ""  # its file, for a table its feature declares (read with RunFolder.read, updated with .update)
    reading: tuple[tuple[str, Any], ...] = ()  # pandas' read_csv arguments beside the columns
    #: columns added since the table's first files were written, with the value a row written before reads as
    added: tuple[tuple[str, Any], ...] = ()

    @property
    def row_key(self) -> tuple[str, ...]:
        """The columns naming one row: its key and its order (a row repeated by merged runs is one row)."""
        return tuple(dict.fromkeys([*self.key, *self.order]))

    def tidy(self, rows: list[dict] | pd.DataFrame) -> pd.DataFrame:
        """Rows -> the table's frame: its columns in order, rows sorted so reruns write identical files."""
        import pandas as pd

        frame = pd.DataFrame(self.with_added(_with_settings(pd.DataFrame(rows), self.columns)), columns=self.columns)
        return frame.sort_values(list(self.order), kind="stable").reset_index(drop=True)

    def with_added(self, frame: pd.DataFrame) -> pd.DataFrame:
        """``frame`` with each :attr:`added` column it lacks, at the value rows written before it read as."""
        return frame.assign(**{column: value for column, value in self.added if column not in frame.columns})


LAYER_COLUMNS = tuple(LayerId.__annotations__)
#: the ``scores.csv`` column naming the aggregate task a subtask's row belongs to (empty on every other row)
AGGREGATE_COLUMN = "aggregate"
SCORE_COLUMNS = [
    *LAYER_COLUMNS,
    "task",
    "task_type",
    "split",
    "subset",
    "main_score",
    *SETTINGS_COLUMNS,
    "data",
    AGGREGATE_COLUMN,
]
SCORES_TABLE = Table(
    SCORE_COLUMNS,
    "re-run `layer-mteb run` to rewrite it",
    ["model", "revision", "task", "subset", "layer"],
    ["model", "revision", "layer", "task", "split", "subset", *SETTINGS_COLUMNS],
)
#: what a ``scores.csv`` must hold to be read at all
REQUIRED_SCORE_COLUMNS = ["model", "layer", "n_layers", "task", "main_score"]
#: mteb's ``TaskResult.to_disk`` stores scores rounded to 6 decimals; the table uses the same value whether a unit
#: was just computed or read back from mteb's result JSON, so a resumed run equals an uninterrupted one exactly.
MTEB_DECIMALS = 6

tidy_scores = SCORES_TABLE.tidy


#: The tables computed from the scores, with the command that recomputes them: a sweep that changed the scores makes
#: them stale.
REFRESHED_BY = {SELECTION_FILE: "layer-mteb select", CORRELATION_FILE: "layer-mteb correlate"}


def sharded(name: str, shard: tuple[int, int] | None) -> str:
    """``name`` for a whole run, ``<stem>.shard-I-of-N.<suffix>`` for shard I of N (``scores.shard-1-of-4.csv``)."""
    if shard is None or shard[1] == 1:
        return name
    stem, _, suffix = name.partition(".")
    return f"{stem}.shard-{shard[0]}-of-{shard[1]}.{suffix}"


def shard_pattern(name: str) -> str:
    """The glob matching every shard file of ``name`` (``scores.shard-*-of-*.csv``)."""
    stem, _, suffix = name.partition(".")
    return f"{stem}.shard-*-of-*.{suffix}"


@dataclass(frozen=True)
class ScoredSetting:
    """What a run folder's ``scores.csv`` says made its scores: its one model, revision, depth and settings."""

    model: str
    revision: str
    n_layers: int
    config: EncodeConfig


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


def lock_timeout() -> float:
    """Seconds a writer waits for a run folder's lock (``$LAYER_MTEB_LOCK_TIMEOUT``, default 300)."""
    raw = os.environ.get(LOCK_TIMEOUT_ENV, "").strip()
    try:
        return float(raw) if raw else DEFAULT_LOCK_TIMEOUT
    except ValueError:
        raise UserError(f"${LOCK_TIMEOUT_ENV} must be a number of seconds, not {raw!r}") from None


#: one lock object per folder and process, so a writer may nest (an update inside a locked merge) without waiting
#: on itself; ``filelock`` keeps a count per thread, so threads of one process serialise too
_LOCKS: dict[Path, Any] = {}
_LOCKS_GUARD = threading.Lock()


def _folder_lock(folder: Path):
    from filelock import FileLock

    key = folder.resolve()
    with _LOCKS_GUARD:
        if key not in _LOCKS:
            if lacks_flock(key):
                _say_flockless(key)
            _LOCKS[key] = FileLock(key / LOCK_FILE)
        return _LOCKS[key]


#: the start of filelock's own warning where ``flock`` is refused: the project says it in its words instead
FILELOCK_FALLBACK_WARNING = "flock not supported on this filesystem"


def lacks_flock(folder: Path) -> bool:
    """Whether ``folder``'s file system refuses ``flock`` (``ENOSYS``, as Lustre mounted without ``-o flock``), where
    filelock falls back to a marker file. Probed on an unnamed scratch file in the folder, never on the lock file:
    where ``flock`` is missing, that file's existence is the lock."""
    import errno
    import tempfile

    try:
        import fcntl
    except ImportError:  # Windows: filelock locks with msvcrt, which every local and SMB disk honours
        return False
    try:
        with tempfile.TemporaryFile(dir=folder) as probe:
            fcntl.flock(probe.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError as err:
        return err.errno == errno.ENOSYS
    return False


def _say_flockless(folder: Path) -> None:
    """One line of the project's own, once per folder and process, in place of filelock's warning."""
    import warnings

    warnings.filterwarnings("ignore", message=FILELOCK_FALLBACK_WARNING, category=UserWarning)
    logger.warning(
        "run folder %s: its file system has no flock (as Lustre mounted without -o flock), so writers take turns "
        "through a marker file: every row stays, and a writer killed on this host is taken over at once, but one "
        "killed on another host holds the folder until $%s (docs/scale.md)",
        folder,
        LOCK_TIMEOUT_ENV,
    )


def _holder(folder: Path) -> str:
    """Who holds ``folder``'s lock, as its holder wrote it (``another process`` where it wrote nothing)."""
    try:
        note = json.loads((folder / LOCK_HOLDER_FILE).read_text())
        return f"pid {note['pid']} on {note['host']} ({note['command']}, since {note['since']})"
    except (OSError, ValueError, KeyError, TypeError):
        return "another process"


def _command() -> str:
    import sys

    name = Path(sys.argv[0]).name if sys.argv and sys.argv[0] else "python"
    return " ".join([name, *sys.argv[1:2]])


def _with_settings(frame: pd.DataFrame, columns: Sequence[str] = ()) -> pd.DataFrame:
    """``frame`` with every setting, where it records some: one added since its rows were made is its default, the
    behaviour they were made with (a new setting defaults to what the package did before it). A metric setting
    (:data:`~.config.METRIC_SETTINGS`) is added only to a table whose ``columns`` hold it."""
    if not any(name in frame.columns for name in SETTINGS_COLUMNS):
        return frame
    wanted = [*SETTINGS, *(s for s in METRIC_SETTINGS if s.name in columns)]
    return frame.assign(**{s.name: s.default for s in wanted if s.name not in frame.columns})


def read_table(path: Path, columns: Sequence[str], fix: str, **read: Any) -> pd.DataFrame:
    """``path`` read as a table with ``columns``: a torn or undecodable file, or one lacking a column, is one
    :class:`UserError` line naming the file and ``fix``, never a traceback or a table silently taken as empty; a
    setting added since it was written reads as its default (:func:`_with_settings`)."""
    import pandas as pd

    try:
        frame = pd.read_csv(path, **read)
    except (pd.errors.ParserError, pd.errors.EmptyDataError, UnicodeDecodeError, EOFError, OSError) as err:
        raise UserError(f"cannot read {path}: {first_line(err)}; {fix}") from None
    frame = _with_settings(frame, columns)
    missing = sorted(set(columns) - set(frame.columns))
    if missing:
        raise UserError(f"{path} is missing column(s) {missing}; {fix}")
    return frame


def replace_rows(old: pd.DataFrame, new: pd.DataFrame, key: Sequence[str]) -> pd.DataFrame:
    """``old`` updated with ``new``: a stored row whose ``key`` a new row holds is replaced, every other stays (what
    every table of a run folder does on writing, so a run of one part never drops another part's rows)."""
    import pandas as pd

    if old.empty:
        return new.reset_index(drop=True)
    held = set(new[list(key)].astype(str).apply(tuple, axis=1))
    replaced = old[list(key)].astype(str).apply(tuple, axis=1).isin(held)
    return pd.concat([old[~replaced], new], ignore_index=True)


# --- scores.csv ---


def layer_columns(model, layer: int) -> LayerId:
    """The :class:`LayerId` of a row about ``layer`` of ``model``."""
    return LayerId(
        model=model.name,
        revision=model.revision,
        layer=layer,
        n_layers=model.n_layers,
        relative_depth=layer / model.n_layers,
    )


def main_scores(
    task_result, splits: Collection[str] | None = None, subsets: Collection[str] | None = None
) -> list[dict]:
    """mteb's ``TaskResult`` -> one row (task, split, subset, main_score rounded to :data:`MTEB_DECIMALS`) per split
    and subset, only ``splits`` and ``subsets`` where given: what a computed result and one read back from its JSON
    give alike."""
    return [
        {
            "task": task_result.task_name,
            "split": split,
            "subset": scores["hf_subset"],
            "main_score": round(float(scores["main_score"]), MTEB_DECIMALS),
        }
        for split, per_subset in task_result.scores.items()
        if splits is None or split in splits
        for scores in per_subset
        if not subsets or scores["hf_subset"] in subsets
    ]


def combine_scores(kept: pd.DataFrame, new_rows: list[dict]) -> pd.DataFrame:
    """``kept`` (a table already in the run folder) updated with ``new_rows`` (:func:`replace_rows` by
    the table's key), so a run of a few tasks never drops the others' scores."""
    new = tidy_scores(new_rows)
    if kept.empty:
        return new
    return tidy_scores(replace_rows(kept, new, SCORES_TABLE.key).to_dict("records"))


def task_rows(scores: pd.DataFrame) -> pd.DataFrame:
    """The rows of the run's tasks as mteb counts them: an aggregate task's subtask rows left out (the aggregate's own
    rows are the task, as in mteb's benchmarks), so a mean over tasks or a pick per task reads each task once. A table
    written before the ``aggregate`` column holds no subtask row it can tell apart: all of it is read."""
    if AGGREGATE_COLUMN not in scores.columns:
        return scores
    named = scores[AGGREGATE_COLUMN]
    subtask = named.notna() & (named.astype(str) != "")
    return scores[~subtask].reset_index(drop=True) if subtask.any() else scores


def one_setting(scores: pd.DataFrame) -> pd.DataFrame:
    """The rows of the run's one model and settings. Every command that loads a run's model again
    (``select --labels``, ``cost``, ``export``, the agreement curves) reads the run through this, so they refuse the
    same mixed tables."""
    if scores["model"].nunique() > 1 or scores["revision"].nunique() > 1:
        runs = scores[["model", "revision"]].astype(str).drop_duplicates()
        named = ", ".join(f"{m} @ {r}" for m, r in zip(runs["model"], runs["revision"], strict=True))
        raise UserError(
            f"scores.csv holds several models or revisions ({named}): this command reads one; give a run folder of "
            "one model (`layer-mteb run --model MODEL --tasks TASKS --output RUN`, one folder per model)"
        )
    settings = [c for c in SETTINGS_COLUMNS if c in scores.columns]
    if len(scores[settings].astype(str).drop_duplicates()) > 1:
        differ = [c for c in settings if scores[c].astype(str).nunique() > 1]
        raise UserError(
            f"scores.csv holds several settings of {scores['model'].iloc[0]} ({', '.join(differ)} differ): give a "
            "run of one setting (one --output per setting)"
        )
    return scores.drop_duplicates(["task", "subset", "split", "layer"], keep="last")


def one_setting_per_model(scores: pd.DataFrame) -> pd.DataFrame:
    """:func:`one_setting` for each model of a table that may hold several (a ``run`` of several ``--model``): the
    readers that group by model (``select``, ``correlate``, the cost tradeoff) refuse a model scored at several
    revisions or settings, which they would otherwise average."""
    import pandas as pd

    return pd.concat([one_setting(part) for _, part in scores.groupby("model", sort=False)], ignore_index=True)


def scores_config(scores: pd.DataFrame, **placement: Any) -> EncodeConfig:
    """The :class:`EncodeConfig` a (:func:`one_setting`) run table was scored with; ``placement`` (batch size,
    device, ...) is not recorded in the table and comes from the caller (default device: cuda if available)."""
    return EncodeConfig.from_key(scores.iloc[-1], **{"device": default_device(), **placement})


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

    def __str__(self) -> str:
        return str(self.path)

    def __fspath__(self) -> str:
        return str(self.path)

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

    @contextmanager
    def locked(self) -> Iterator[None]:
        """Hold the folder's writers' lock for the block (made with the folder where it is new; nested holds in one
        thread reuse the outer one). A writer that cannot take it within :func:`lock_timeout` seconds stops with one
        line naming the holder."""
        from filelock import Timeout

        self.path.mkdir(parents=True, exist_ok=True)
        lock = _folder_lock(self.path)
        outermost = not lock.is_locked
        timeout = lock_timeout()
        try:
            lock.acquire(timeout=timeout)
        except Timeout:
            raise UserError(
                f"run folder {self.path} is being written by {_holder(self.path)}: waited {timeout:.0f} s for it; "
                f"let it finish, or wait longer with ${LOCK_TIMEOUT_ENV}"
            ) from None
        note = self.file(LOCK_HOLDER_FILE)
        try:
            if outermost:
                since = time.strftime("%Y-%m-%d %H:%M:%S")
                holder = {"pid": os.getpid(), "host": socket.gethostname(), "command": _command(), "since": since}
                note.write_text(json.dumps(holder) + "\n")
            yield
        finally:
            if outermost:
                note.unlink(missing_ok=True)
            lock.release()

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
        frame = self._kept(self.scores_file.name, self._read_scores)
        if frame.empty and not missing_ok:
            raise UserError(f"{self.scores_file} has no scores yet: let `layer-mteb run` finish at least one layer")
        return frame if subtasks else task_rows(frame)

    def _read_scores(self) -> pd.DataFrame:
        frame = read_table(self.scores_file, REQUIRED_SCORE_COLUMNS, SCORES_TABLE.fix)
        return frame.astype({"layer": int, "n_layers": int})

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
        return sorted(self.path.glob(shard_pattern(SCORES_FILE)))

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
        rows = self.one_setting() if scores is None else scores
        return ScoredSetting(
            str(rows["model"].iloc[-1]),
            str(rows["revision"].iloc[-1]),
            int(rows["n_layers"].max()),
            scores_config(rows, **placement),
        )

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
            log = json.loads(path.read_text())
            entries = [dict(entry) for entry in log["tasks"]]
        except (OSError, ValueError, KeyError, TypeError) as err:
            logger.warning(
                "%s is unreadable (%s: %s); it is rewritten with this run's tasks only", path, type(err).__name__, err
            )
            return []
        return entries

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
        stale = []
        for name, command in REFRESHED_BY.items():
            side = self.file(name)
            if side.is_file() and side.stat().st_mtime < scores.stat().st_mtime:
                stale.append((side, command))
        return stale

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

    def _update(
        self, name: str, table: Table, new: pd.DataFrame, read_old: Callable[[], pd.DataFrame], **to_csv
    ) -> Path:
        """The one update of a side table, under the folder's lock: the stored rows (``read_old``, its checked reader,
        so a torn table is refused, never dropped) with the rows of ``new``'s keys replaced, tidied and written
        atomically."""
        with self.locked():
            self._forget(name)
            # the new rows as the table holds them first: a setting they lack is its default, as in a file read back
            frame = table.tidy(replace_rows(read_old(), table.tidy(new), table.key))
            return self.write_table(name, frame, float_format=table.floats, **to_csv)

    def _read(self, name: str, table: Table, *, missing_ok: bool, **read: Any) -> pd.DataFrame:
        path, fix = self.file(name), table.fix.format(folder=self.path)
        if not path.is_file():
            if missing_ok:
                import pandas as pd

                return pd.DataFrame(columns=table.columns)
            raise UserError(f"no {name} in {self.path}: {fix} first")
        added = {column for column, _ in table.added}
        required = [column for column in table.columns if column not in added]
        return self._kept(name, lambda: table.with_added(read_table(path, required, fix, **read)))

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
        every table is."""
        name = next((n for n in (table.file, f"{table.file}.gz") if self.file(n).is_file()), table.file)
        return self._read(name, table, missing_ok=missing_ok, **dict(table.reading))

    def update(self, table: Table, frame: pd.DataFrame, *, gzip: bool = False) -> Path:
        """Merge ``frame`` into the table a feature declares: its rows replace the stored ones of their key. ``gzip``
        writes ``FILE.gz`` (no timestamp: a rerun gives the same bytes) and removes a plain ``FILE``, whose rows it
        took, or the other way round."""
        names = (table.file, f"{table.file}.gz")
        with self.locked():
            for name in names:
                self._forget(name)
            compression = {"method": "gzip", "mtime": 0} if gzip else None
            old = partial(self.read, table, missing_ok=True)
            path = self._update(names[int(gzip)], table, frame, old, compression=compression)
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
