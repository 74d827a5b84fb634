"""Warnings of mteb's evaluators counted per layer and told once per task.

mteb's logistic regression on unnormalised decoder vectors raises hundreds of identical ``ConvergenceWarning``s per
layer: true of the evaluator, nothing wrong with the scores. They are counted where the layer is evaluated (workers
too), by the filters in force, so the counts are what ``--verbose`` shows; the sweep logs one line per task.
"""

from __future__ import annotations

import logging
import warnings
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from itertools import groupby
from typing import NamedTuple

logger = logging.getLogger(__name__)


class Seen(NamedTuple):
    """How many warnings of one category a layer's evaluation raised, and the first one's message."""

    count: int
    first: str


#: category name -> what was seen, for one layer
LayerWarnings = dict[str, Seen]


@contextmanager
def counted_warnings(show: bool = False) -> Iterator[LayerWarnings]:
    """Count the warnings raised inside the block by category; ``show`` also shows each as it comes."""
    seen: LayerWarnings = {}
    with warnings.catch_warnings():  # restores the previous showwarning on the way out
        shown = warnings.showwarning

        def count(message, category, filename, lineno, file=None, line=None) -> None:
            name = category.__name__
            before = seen.get(name)
            seen[name] = Seen(before.count + 1, before.first) if before else Seen(1, _first_line(message))
            if show:
                shown(message, category, filename, lineno, file, line)

        warnings.showwarning = count
        yield seen


def _first_line(message: object) -> str:
    return str(message).strip().split("\n", 1)[0][:300]


def task_warnings(per_layer: Mapping[int, LayerWarnings]) -> dict[str, dict]:
    """A task's ``run.json`` record: per category, the total, the layers that raised it and the first message."""
    record: dict[str, dict] = {}
    for layer in sorted(per_layer):
        for name, seen in per_layer[layer].items():
            entry = record.setdefault(name, {"count": 0, "layers": [], "first_message": seen.first})
            entry["count"] += seen.count
            entry["layers"].append(layer)
    return record


def summary_line(task: str, record: Mapping[str, Mapping], shown: bool = False) -> str | None:
    """``Banking77Classification: 281 ConvergenceWarnings from the evaluators at layers 3-30 (...)``, or None."""
    if not record:
        return None
    tail = "shown above" if shown else "--verbose shows them"
    return f"{task}: {counted(record, 'the evaluators')} (scores are mteb's, unchanged; {tail})"


def counted(record: Mapping[str, Mapping], source: str | None = None) -> str:
    """A :func:`task_warnings` record in words: ``281 ConvergenceWarnings from <source> at layers 3-30; ...``."""
    where = f" from {source}" if source else ""
    return "; ".join(
        f"{entry['count']} {name}{'s' if entry['count'] != 1 else ''}{where} at "
        f"{'layer' if len(entry['layers']) == 1 else 'layers'} {layer_ranges(entry['layers'])}"
        for name, entry in record.items()
    )


def layer_ranges(layers: list[int], dash: str = "-") -> str:
    """``[3, 4, 5, 7]`` -> ``3-5, 7``: runs of consecutive layers as spans, ascending, ``dash`` joining a span's
    ends (a report's missing layers: ``0, 3–5``)."""
    # consecutive layers keep the same difference to their position in the sorted list
    runs = [[layer for _, layer in run] for _, run in groupby(enumerate(sorted(set(layers))), lambda p: p[1] - p[0])]
    return ", ".join(str(run[0]) if len(run) == 1 else f"{run[0]}{dash}{run[-1]}" for run in runs)


def log_task_warnings(task: str, per_layer: Mapping[int, LayerWarnings], shown: bool) -> dict[str, dict]:
    """Log the task's one line (if it raised any warning) and return its ``run.json`` record."""
    record = task_warnings(per_layer)
    if line := summary_line(task, record, shown):
        logger.warning(line)
    return record
