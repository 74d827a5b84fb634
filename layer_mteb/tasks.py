"""Which tasks to run: ``tasks.yaml`` and its suites, mteb task lookup with the paper's subsets and split, and
offline copies of task data read through the real mteb task class (its metadata, evaluator and main score kept)."""

from __future__ import annotations

import difflib
import json
import logging
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from layer_mteb.errors import UserError

PACKAGED_TASK_FILE = Path(__file__).with_name("tasks.yaml")
BUILTIN_SUITES = ("paper32", "paper32-fast", "offline")
DATA_DIR_ENV = "LAYER_MTEB_DATA"
# the project's shared task data, one level above a checkout (the README's ``../shared/data``)
SIBLING_DATA_DIR = Path(__file__).resolve().parents[1].parent / "shared" / "data"
_announced: set[Path] = set()
logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class TaskSpec:
    """One task as ``tasks.yaml`` lists it."""

    name: str
    category: str = ""
    subsets: tuple[str, ...] | None = None
    fast: str | None = None
    local_files: dict[str, tuple[str, ...]] = field(default_factory=dict)
    partial: str | None = None


@dataclass(frozen=True)
class TaskFile:
    split: str
    tasks: tuple[TaskSpec, ...]
    suites: dict[str, tuple[str, ...]]

    def spec(self, name: str) -> TaskSpec:
        return next((t for t in self.tasks if t.name == name), TaskSpec(name))


def read_task_file(path: str | Path = PACKAGED_TASK_FILE) -> TaskFile:
    """Parse and validate a tasks.yaml; every schema problem is one line naming the file."""
    path = Path(path)
    try:
        raw = yaml.safe_load(path.read_text())
    except (OSError, yaml.YAMLError) as err:
        raise UserError(f"cannot read task file {str(path)!r}: {str(err).splitlines()[0]}") from None
    if not isinstance(raw, dict) or not isinstance(raw.get("tasks"), dict) or not raw["tasks"]:
        raise UserError(f"{path}: expected a mapping with a non-empty 'tasks:' section of categories")
    specs = []
    for category, entries in raw["tasks"].items():
        if not isinstance(entries, list):
            raise UserError(f"{path}: category {category!r} must hold a list of tasks")
        for entry in entries:
            specs.append(_parse_entry(path, str(category), entry))
    suites = raw.get("suites") or {}
    if not isinstance(suites, dict) or not all(isinstance(v, list) for v in suites.values()):
        raise UserError(f"{path}: 'suites:' must map suite names to lists of task names")
    return TaskFile(str(raw.get("split", "test")), tuple(specs), {k: tuple(v) for k, v in suites.items()})


def _parse_entry(path: Path, category: str, entry: Any) -> TaskSpec:
    if isinstance(entry, str):
        entry = {"name": entry}
    if not isinstance(entry, dict) or not isinstance(entry.get("name"), str):
        raise UserError(f"{path}: every task under {category!r} needs a 'name:' (got {entry!r})")
    unknown = set(entry) - {"name", "subsets", "fast", "local"}
    if unknown:
        raise UserError(f"{path}: task {entry['name']!r} has unknown keys {sorted(unknown)}")
    local = dict(entry.get("local") or {})
    partial = local.pop("partial", None)
    files = {split: tuple(names if isinstance(names, list) else [names]) for split, names in local.items()}
    subsets = entry.get("subsets")
    return TaskSpec(entry["name"], category, tuple(subsets) if subsets else None, entry.get("fast"), files, partial)


def data_dir_from_env(data_dir: str | Path | None) -> Path | None:
    """``--data-dir``, else ``$LAYER_MTEB_DATA``, else ``../shared/data`` beside the checkout when it exists (said
    once in the log, so a user knows where the data came from), else None (tasks then load from the hub)."""
    chosen = data_dir or os.environ.get(DATA_DIR_ENV)
    if not chosen:
        if not SIBLING_DATA_DIR.is_dir():
            return None
        if SIBLING_DATA_DIR not in _announced:
            _announced.add(SIBLING_DATA_DIR)
            hint = f"--data-dir or ${DATA_DIR_ENV} to choose another"
            logger.warning("data folder: %s (beside the checkout; %s)", SIBLING_DATA_DIR, hint)
        return SIBLING_DATA_DIR
    path = Path(chosen).expanduser()
    if not path.is_dir():
        raise UserError(f"data folder {str(path)!r} does not exist")
    return path


def select_tasks(selection: str, data_dir: Path | None = None) -> tuple[TaskFile, list[TaskSpec]]:
    """Resolve ``--tasks``: ``FILE.yaml[:SUITE]``, a suite name, or comma-separated mteb task names."""
    file_part, _, suite = selection.partition(":")
    if file_part.endswith((".yaml", ".yml")):
        task_file = read_task_file(file_part)
        return task_file, _suite(task_file, suite or "paper32", data_dir)
    task_file = read_task_file()
    if selection in BUILTIN_SUITES or selection in task_file.suites:
        return task_file, _suite(task_file, selection, data_dir)
    names = [n.strip() for n in selection.split(",") if n.strip()]
    if not names:
        raise UserError("--tasks is empty: give a tasks.yaml, a suite name or task names")
    return task_file, [task_file.spec(n) for n in names]


def _suite(task_file: TaskFile, suite: str, data_dir: Path | None) -> list[TaskSpec]:
    if suite == "paper32":
        return list(task_file.tasks)
    if suite == "paper32-fast":
        return [TaskSpec(t.fast, t.category, t.subsets) if t.fast else t for t in task_file.tasks]
    if suite == "offline":
        if data_dir is None:
            raise UserError(f"the 'offline' suite needs a data folder: --data-dir DIR or ${DATA_DIR_ENV}")
        present = [t for t in task_file.tasks if (data_dir / t.name).is_dir()]
        if not present:
            raise UserError(f"no task of the task file has a folder in {data_dir}")
        return present
    if suite not in task_file.suites:
        known = ", ".join([*BUILTIN_SUITES, *task_file.suites])
        raise UserError(f"unknown suite {suite!r}; known suites: {known}")
    return [task_file.spec(name) for name in task_file.suites[suite]]


def load_task(spec: TaskSpec, split: str = "test", data_dir: Path | None = None):
    """The mteb task for ``spec`` restricted to ``split`` and the paper's subsets; local data when a folder exists."""
    import mteb

    try:
        task = mteb.get_task(spec.name, eval_splits=[split], hf_subsets=list(spec.subsets) if spec.subsets else None)
    except KeyError:
        raise UserError(_unknown_task_message(spec.name)) from None
    if data_dir is not None and (data_dir / spec.name).is_dir():
        from layer_mteb.task_state import attach_local_data

        attach_local_data(task, data_dir / spec.name, spec)
    return task


def load_tasks(selection: str, data_dir: str | Path | None = None) -> list:
    """The mteb tasks of a ``--tasks`` selection, as ``layer-mteb run`` scores them (the paper's split and subsets,
    local data from the data folder where it has them), ready for ``mteb.evaluate``."""
    folder = data_dir_from_env(data_dir)
    task_file, specs = select_tasks(selection, folder)
    return [load_task(spec, task_file.split, folder) for spec in specs]


def _unknown_task_message(name: str) -> str:
    import mteb

    known = [t.metadata.name for t in mteb.get_tasks(exclude_superseded=False)]
    close = difflib.get_close_matches(name, known, n=3)
    hint = f"; did you mean {', '.join(close)}?" if close else ""
    return f"unknown mteb task {name!r}{hint}"


# --------------------------------------------------------------------------------------------- local data


def read_local_dataset(task, folder: Path, spec: TaskSpec | None = None):
    """Read ``folder`` into the ``DatasetDict`` (or ``{subset: DatasetDict}``) shape ``task`` expects."""
    from datasets import Dataset, DatasetDict

    spec = spec or TaskSpec(task.metadata.name)
    task_type = task.metadata.type
    rows = {split: _read_split(folder, split, spec) for split in _needed_splits(task)}
    shaped = {split: _shape(task, task_type, split_rows, folder, split) for split, split_rows in rows.items()}
    if task_type == "Classification":
        _labels_to_ids(shaped)
    dataset = DatasetDict({split: Dataset.from_dict(columns) for split, columns in shaped.items()})
    if task.metadata.is_multilingual:
        return {subset: dataset for subset in task.hf_subsets}
    return dataset


def check_local_folder(task, folder: Path, spec: TaskSpec) -> None:
    """Fail before any model is loaded on a folder that lacks a split, a column or rows (reads one row a file)."""
    for split in _needed_splits(task):
        _shape(task, task.metadata.type, _read_split(folder, split, spec, limit=1), folder, split)


def _needed_splits(task) -> list[str]:
    splits = list(task.eval_splits)
    if task.metadata.type == "Classification":
        splits.append(task.train_split)
    return list(dict.fromkeys(splits))


def _read_split(folder: Path, split: str, spec: TaskSpec, limit: int | None = None) -> list[dict[str, Any]]:
    rows: list[dict[str, Any]] = []
    for name in spec.local_files.get(split, (f"{split}.jsonl",)):
        path = folder / name
        if not path.exists():
            raise UserError(f"{folder}: no {name} for the {split!r} split this task needs")
        with path.open(encoding="utf-8") as handle:
            for line in handle:
                if line.strip():
                    try:
                        rows.append(json.loads(line))
                    except json.JSONDecodeError:
                        raise UserError(f"{path}: a line is not valid JSON: {line[:60]!r}") from None
                if limit is not None and len(rows) >= limit:
                    break
    if not rows:
        raise UserError(f"{folder}: the {split!r} split is empty")
    return rows


_COLUMNS = {
    "STS": {"sentence1": "sentence1", "sentence2": "sentence2", "score": "score"},
    "PairClassification": {"sentence1": "sentence1", "sentence2": "sentence2", "labels": "label"},
    "Classification": {"text": "text", "label": "label"},
}


def _shape(task, task_type: str, rows: list[dict[str, Any]], folder: Path, split: str) -> dict[str, list]:
    if task_type == "Clustering":
        return _clustering_columns(task, rows, folder, split)
    if task_type not in _COLUMNS:
        raise UserError(f"{folder}: local data for {task_type} tasks is not supported; use the hub copy")
    columns = _COLUMNS[task_type]
    missing = {source for source in columns.values() if source not in rows[0]}
    if missing:
        raise UserError(f"{folder}/{split}: missing column(s) {sorted(missing)}; have {sorted(rows[0])}")
    return {target: [row[source] for row in rows] for target, source in columns.items()}


def _clustering_columns(task, rows: list[dict[str, Any]], folder: Path, split: str) -> dict[str, list]:
    """Rows of ``{"text", "label"}`` form one cluster set (legacy tasks) or one document each (v2 tasks)."""
    if "text" not in rows[0] or "label" not in rows[0]:
        raise UserError(f"{folder}/{split}: clustering data needs 'text' and 'label' columns; have {sorted(rows[0])}")
    texts, labels = [row["text"] for row in rows], [row["label"] for row in rows]
    from mteb.abstasks import AbsTaskClusteringLegacy  # public: in mteb.abstasks.__all__

    if isinstance(task, AbsTaskClusteringLegacy):
        return {"sentences": [texts], "labels": [labels]}
    return {"sentences": texts, "labels": labels}


def _labels_to_ids(splits: dict[str, dict[str, list]]) -> None:
    """Class names -> integer ids, one mapping shared by all splits (sorted names, so it is reproducible)."""
    names = sorted({str(label) for columns in splits.values() for label in columns["label"]})
    ids = {name: i for i, name in enumerate(names)}
    for columns in splits.values():
        columns["label"] = [ids[str(label)] for label in columns["label"]]
