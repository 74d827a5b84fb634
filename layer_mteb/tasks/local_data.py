"""Offline copies of task data: a folder of JSONL files read into the ``datasets`` shape the task's own mteb class
expects (its metadata, evaluator and main score kept) and handed to the task as its loaded data, before any model
loads."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from layer_mteb.common.errors import UserError
from layer_mteb.tasks.task_file import TaskSpec
from layer_mteb.tasks.task_types import TaskType, is_instance_of, task_type_of


def load_local_data(task, folder: Path, spec: TaskSpec) -> None:
    """Load ``folder`` into ``task`` now as its data; mteb uses data a task holds and unloads only what it loaded,
    so no method is replaced. Reading it all now is the early check: a mistake is one line before any model loads."""
    task.dataset = read_local_dataset(task, folder, spec)
    task.data_loaded = True


def read_local_dataset(task, folder: Path, spec: TaskSpec | None = None):
    """Read ``folder`` into the ``DatasetDict`` (or ``{subset: DatasetDict}``) shape ``task`` expects."""
    from datasets import Dataset, DatasetDict

    spec = spec or TaskSpec(task.metadata.name)
    kind = task_type_of(task)
    if kind is None or not kind.columns:
        raise UserError(f"{folder}: local data for {task.metadata.type} tasks is not supported; use the hub copy")
    one_row = kind.sets_in_one_row is not None and is_instance_of(task, kind.sets_in_one_row)
    splits = dict.fromkeys([*task.eval_splits, *([task.train_split] if kind.fits_on_train else [])])
    rows = {split: _read_split(folder, split, spec) for split in splits}
    shaped = {split: _shape(kind, one_row, split_rows, folder, split) for split, split_rows in rows.items()}
    if kind.fits_on_train:
        labels_to_ids(shaped)
    dataset = DatasetDict({split: Dataset.from_dict(columns) for split, columns in shaped.items()})
    return {subset: dataset for subset in task.hf_subsets} if task.metadata.is_multilingual else dataset


def _read_split(folder: Path, split: str, spec: TaskSpec) -> list[dict[str, Any]]:
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
    if not rows:
        raise UserError(f"{folder}: the {split!r} split is empty")
    return rows


def _shape(kind: TaskType, one_row: bool, rows: list[dict[str, Any]], folder: Path, split: str) -> dict[str, list]:
    """The split's rows in mteb's columns (the row's ``columns``); rows of ``{"text", "label"}`` form one cluster set
    (``one_row``: legacy tasks, ``sets_in_one_row``) or one document each (v2 tasks)."""
    missing = {source for source, _ in kind.columns.values() if source not in rows[0]}
    if missing:
        raise UserError(f"{folder}/{split}: missing column(s) {sorted(missing)}; have {sorted(rows[0])}")
    columns = {target: [row[source] for row in rows] for source, target in kind.columns.values()}
    return {target: [values] for target, values in columns.items()} if one_row else columns


def labels_to_ids(splits: dict[str, dict[str, list]]) -> None:
    """Class names -> integer ids, one mapping shared by all splits (sorted names, so it is reproducible)."""
    names = sorted({str(label) for columns in splits.values() for label in columns["label"]})
    ids = {name: i for i, name in enumerate(names)}
    for columns in splits.values():
        columns["label"] = [ids[str(label)] for label in columns["label"]]
