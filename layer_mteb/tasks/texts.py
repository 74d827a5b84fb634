"""The texts of a task, read without labels: every text of its evaluation split(s) and subsets, the label-free
material that per-task metrics and layer selection may use."""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

from layer_mteb.common.errors import UserError, first_line
from layer_mteb.tasks.catalog import data_dir_from_env, file_task, load_task, read_task_file, select_tasks

_NOT_TEXT = ("label", "lang", "score")


def task_texts(name: str, data_dir: str | Path | None = None) -> list[str]:
    """Every text of a task's evaluation split(s) and subsets (labels and ids are skipped); ``name`` is an mteb
    task's name or ``FILE.yaml:TASK`` (a custom task, say)."""
    folder = data_dir_from_env(data_dir)
    if file_task(name) is not None:
        task_file, specs = select_tasks(name, folder)
        if len(specs) != 1 or specs[0].name != file_task(name):
            raise UserError(f"{name!r} names a suite; name one task of the file: FILE.yaml:TASK")
        spec = specs[0]
    else:
        task_file = read_task_file()
        spec = task_file.spec(name)
    task = load_task(spec, task_file.split, folder)
    try:
        task.load_data()
    except (OSError, ConnectionError, ValueError) as err:
        raise UserError(f"cannot load task {name!r} ({first_line(err)}); pass --data-dir DIR holding {name}/") from None
    return evaluation_split_texts(task)


def evaluation_split_texts(task) -> list[str]:
    """Every text of a loaded mteb task's evaluation split(s) and subsets, in the order the data holds them: each
    text column of each ``datasets.Dataset`` (queries before corpus for retrieval; titles are texts too)."""
    name, dataset = task.metadata.name, task.dataset
    # mteb's own lookup (AbsTask.evaluate): a subset's data, or the whole dataset for a single "default" subset
    parts = [
        dataset if s not in dataset and s == "default" else dataset[s]
        for s in task.hf_subsets
        if s in dataset or s == "default"
    ]
    texts = [text for part in parts for split in task.eval_splits if split in part for text in _walk(part[split])]
    if not texts:
        raise UserError(f"task {name!r} has no texts in split(s) {', '.join(task.eval_splits)}")
    return texts


def _walk(node: Any) -> Iterator[str]:
    """Strings in text columns of every ``datasets.Dataset`` below ``node`` (retrieval splits nest corpus/queries)."""
    from datasets import Dataset

    if isinstance(node, Dataset):
        for column, feature in node.features.items():
            if _is_text_column(column, feature):
                yield from _flatten(node[column])
    elif isinstance(node, Mapping):
        for value in node.values():
            yield from _walk(value)


def _is_text_column(column: str, feature: Any) -> bool:
    name = column.lower()
    if name in ("id", "ids", "_id") or name.endswith(("_id", "-id", "_ids", "-ids")) or name.startswith(_NOT_TEXT):
        return False
    while hasattr(feature, "feature"):  # Sequence / List of strings (legacy clustering)
        feature = feature.feature
    return getattr(feature, "dtype", None) in ("string", "large_string")


def _flatten(values: Sequence[Any]) -> Iterator[str]:
    for value in values:
        if isinstance(value, str):
            yield value
        elif isinstance(value, Sequence):
            yield from _flatten(value)
