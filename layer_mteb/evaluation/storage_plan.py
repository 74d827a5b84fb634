"""What a run will encode and store, said before the first forward pass: per task, the texts, the size of their
all-layer vectors and where they will live (memory, or per-layer files: a large model may need disk the user should
know of first)."""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass

from layer_mteb.evaluation.mteb_call import texts_mteb_encodes
from layer_mteb.tasks.state import TaskRandomState, hold_label_lists
from layer_mteb.tasks.task_types import task_type_of
from layer_mteb.vectors.memory import format_size, store_bytes

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class TaskVectorSize:
    """The storage one task's all-layer vectors take: its texts (``source``: ``data``, ``mteb statistics`` or
    ``unknown``) and their vectors' shape."""

    task: str
    texts: int | None
    source: str
    n_layers: int
    hidden: int

    @property
    def bytes(self) -> int:
        """The size of the task's all-layer vectors."""
        return store_bytes(self.texts or 0, self.n_layers, self.hidden)


def expected_texts(task) -> tuple[int | None, str]:
    """(texts to encode, source): the unique texts of the loaded data, else mteb's descriptive statistics of the
    splits and subsets it runs (for a type fitted on the training split an upper bound: it is undersampled)."""
    if getattr(task, "is_aggregate", False):  # its texts are its subtasks'
        parts = [expected_texts(subtask) for subtask in task.tasks]
        if any(texts is None for texts, _ in parts):
            return None, "unknown"
        return sum(texts or 0 for texts, _ in parts), parts[0][1]
    if getattr(task, "data_loaded", False):
        hold_label_lists(task)  # undersampling reads a label per row: 5.5 s for Banking77 lazily, 0.2 s held
        state = TaskRandomState.of(task)  # reading the training sample must leave no trace on the task
        try:
            known = texts_mteb_encodes(task)
        finally:
            state.restore(task)
        if known is not None:
            return len(known), "data"
    try:
        stats = task.metadata.descriptive_stats or {}
    except (OSError, ValueError):  # mteb reads them from a file of its package; a task may have none
        return None, "unknown"
    splits = list(task.eval_splits)
    kind = task_type_of(task)
    if kind is not None and kind.fits_on_train and getattr(task, "train_split", None):
        splits.append(task.train_split)
    total = sum(_texts_of(part) for split in dict.fromkeys(splits) for part in _subset_stats(stats.get(split), task))
    return (total, "mteb statistics") if total else (None, "unknown")


def _subset_stats(split_stats: dict | None, task) -> list[dict]:
    """The statistics of each subset the task runs (the whole split's for a task of one subset)."""
    if not isinstance(split_stats, dict):
        return []
    per_subset = split_stats.get("hf_subset_descriptive_stats")
    if task.metadata.is_multilingual and isinstance(per_subset, dict):
        return [per_subset[s] for s in task.hf_subsets if isinstance(per_subset.get(s), dict)]
    return [split_stats]


def _texts_of(stats: dict) -> int:
    """Texts of one split and subset: documents and queries, else each text column's unique texts, else samples."""
    if "num_documents" in stats:
        return int(stats.get("num_documents") or 0) + int(stats.get("num_queries") or 0)
    unique = [
        int(value["unique_texts"])
        for key, value in stats.items()
        if key.endswith("statistics") and isinstance(value, dict) and value.get("unique_texts")
    ]
    return sum(unique) if unique else int(stats.get("num_samples") or 0)


def state_plan(
    tasks: Sequence[object], n_layers: int, hidden: int, memory_limit: int, device: str, store: str | None
) -> list[TaskVectorSize]:
    """Log per task the texts to encode and the size and place of their vectors (``n_layers``: hidden states kept;
    ``store``: where per-layer files go, None: a temporary folder), and the total; return the sizes."""
    sizes = [TaskVectorSize(task.metadata.name, *expected_texts(task), n_layers, hidden) for task in tasks]
    where_files = f"per-layer files under {store}" if store else "per-layer files in a temporary folder"
    for size in sizes:
        if size.texts is None:
            logger.info("plan: %s: texts not known ahead (mteb has no statistics for it)", size.task)
            continue
        where = f"{device} memory" if size.bytes <= memory_limit else where_files
        logger.info(
            "plan: %s: %d texts (%s) x %d layers x %d dims = %s of float32 vectors, in %s",
            size.task,
            size.texts,
            size.source,
            n_layers,
            hidden,
            format_size(size.bytes),
            where,
        )
    known = [size for size in sizes if size.texts is not None]
    if len(sizes) > 1 and known:
        largest = max(known, key=lambda size: size.bytes)
        logger.info(
            "plan: %d tasks, %d texts in all; the largest task (%s) needs %s at once (memory limit %s)",
            len(sizes),
            sum(size.texts or 0 for size in known),
            largest.task,
            format_size(largest.bytes),
            format_size(memory_limit),
        )
    return sizes
