"""Offline copies of task data: a folder of JSONL files read into the ``datasets`` shape the task's own mteb class
expects (its metadata, evaluator and main score kept) and handed to the task as its loaded data, before any model
loads."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from layer_mteb.common.errors import UserError
from layer_mteb.tasks.task_file import TaskSpec


def load_local_data(task, folder: Path, spec: TaskSpec) -> None:
    """Load ``folder`` into ``task`` now as its data; mteb uses data a task holds and unloads only what it loaded,
    so no method is replaced. Reading it all now is the early check: a mistake is one line before any model loads."""
    task.dataset = read_local_dataset(task, folder, spec)
    task.data_loaded = True


def read_local_dataset(task, folder: Path, spec: TaskSpec | None = None):
    """Read ``folder`` into the ``DatasetDict`` (or ``{subset: DatasetDict}``) shape ``task`` expects."""
    from datasets import Dataset, DatasetDict

    spec = spec or TaskSpec(task.metadata.name)
    task_type = task.metadata.type
    rows = {split: _read_split(folder, split, spec) for split in _needed_splits(task)}
    shaped = {split: _shape(task, task_type, split_rows, folder, split) for split, split_rows in rows.items()}
    if task_type == "Classification":
        labels_to_ids(shaped)
    dataset = DatasetDict({split: Dataset.from_dict(columns) for split, columns in shaped.items()})
    if task.metadata.is_multilingual:
        return {subset: dataset for subset in task.hf_subsets}
    return dataset


def _needed_splits(task) -> list[str]:
    splits = list(task.eval_splits)
    if task.metadata.type == "Classification":
        splits.append(task.train_split)
    return list(dict.fromkeys(splits))


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


def labels_to_ids(splits: dict[str, dict[str, list]]) -> None:
    """Class names -> integer ids, one mapping shared by all splits (sorted names, so it is reproducible)."""
    names = sorted({str(label) for columns in splits.values() for label in columns["label"]})
    ids = {name: i for i, name in enumerate(names)}
    for columns in splits.values():
        columns["label"] = [ids[str(label)] for label in columns["label"]]
