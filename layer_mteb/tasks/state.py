"""What layer_mteb changes about the state of an mteb task object, in one place, each through mteb's public task
attributes (tests/tasks/test_task_state.py fails loudly when mteb changes them; the private mteb behaviour relied on is
named in :mod:`layer_mteb.tasks.mteb_compat`):

- :func:`data_parts`: the task objects that hold data (an aggregate task's subtasks, else the task itself), each of
  which the points below apply to;
- :func:`load_data_once`: the task's data loaded unless it is already (local data comes loaded from
  :func:`layer_mteb.tasks.catalog.load_task`), saying whether this call loaded it, so only that data is unloaded;
- :func:`hold_label_lists`: a classification task's label columns answer with plain lists, so mteb's row-by-row
  label reads during undersampling are list lookups instead of lazy ``datasets`` reads;
- :class:`TaskRandomState`: the task's own random generators (``AbsTask.rng_state`` / ``np_rng``), saved after the
  data is loaded and put back before each layer's evaluation, so every layer is scored from the state a fresh
  ``mteb.evaluate`` of that layer alone would see.
"""

from __future__ import annotations

import copy
import secrets
from collections.abc import MutableMapping, Sequence
from dataclasses import dataclass
from typing import Any

from datasets import Dataset

#: The random generators mteb's ``AbsTask.__init__`` seeds on the task object itself (``random.Random`` and a numpy
#: ``Generator``). v2 clustering draws its document sample and bootstrap from ``rng_state``; multilabel
#: classification shuffles with ``np_rng``. Everything else an evaluation draws is seeded afresh per evaluation
#: (``mteb_compat.EVALUATORS_SEED_THEMSELVES``; classification undersampling seeds itself from ``task.seed``).
TASK_RNG_ATTRIBUTES = ("rng_state", "np_rng")


@dataclass(frozen=True)
class TaskRandomState:
    """A copy of a task's random generators (an aggregate's: each subtask's), to give every layer's evaluation the
    same starting state."""

    generators: tuple[dict[str, Any], ...]

    @classmethod
    def of(cls, task) -> TaskRandomState:
        return cls(tuple(_generators(part) for part in data_parts(task)))

    def restore(self, task) -> None:
        """Put the saved generators back (copies, so the saved state itself never advances)."""
        for part, generators in zip(data_parts(task), self.generators, strict=True):
            for name, generator in generators.items():
                setattr(part, name, copy.deepcopy(generator))


def _generators(task) -> dict[str, Any]:
    missing = [name for name in TASK_RNG_ATTRIBUTES if not hasattr(task, name)]
    if missing:  # mteb renamed them: scoring on would make a layer's score depend on the layers before it
        raise RuntimeError(
            f"mteb task {type(task).__name__} has no {missing}: this mteb version keeps its random state "
            "elsewhere; update layer_mteb.tasks.state.TASK_RNG_ATTRIBUTES"
        )
    return {name: copy.deepcopy(getattr(task, name)) for name in TASK_RNG_ATTRIBUTES}


def data_parts(task) -> list:
    """The task objects that hold data and are scored: an aggregate's subtasks (``AbsTaskAggregate`` holds no data;
    ``mteb.evaluate`` scores each subtask and combines their results), else the task itself."""
    return list(task.tasks) if getattr(task, "is_aggregate", False) else [task]


# --------------------------------------------------------------------------------------------- data


def load_data_once(task) -> bool:
    """Load ``task``'s data unless it is loaded already; True when this call loaded it.

    A caller unloads only the data it loaded itself, as ``mteb.evaluate`` does: a task from
    :func:`layer_mteb.tasks.catalog.load_task` on a local folder holds its data from the start, and unloading it
    would leave the hub as the only place to load it from again.
    """
    if task.data_loaded:
        return False
    task.load_data()
    return True


# --------------------------------------------------------------------------------------------- label columns


def hold_label_lists(task) -> None:
    """Give every split of a classification task a label column that answers with a plain list.

    mteb's undersampling (:func:`layer_mteb.tasks.mteb_compat.undersample`) reads ``labels = split[label_column]``
    and then ``labels[i]`` for every training row, ten times per layer. With ``datasets`` >= 4 the column is a lazy
    ``Column`` and each ``labels[i]`` formats one row (about 0.1 ms in memory, 0.25-0.5 ms memory-mapped): minutes
    per layer on a 200k-row split. A :class:`ListLabelDataset` answers each whole-column request with one Arrow read
    (milliseconds; mteb asks once per call) instead; the values, and so every score, are the same
    (benchmarks/undersampling.py). Other task types and already-held splits are left as they are.
    """
    from mteb.abstasks import AbsTaskClassification

    if not isinstance(task, AbsTaskClassification) or task.dataset is None:
        return
    _hold(task.dataset, (task.label_column_name,))


def _hold(node: MutableMapping, columns: tuple[str, ...]) -> None:
    """Replace every ``Dataset`` below ``node`` (splits, or subsets of splits) by its held copy, in place."""
    for key, value in node.items():
        if isinstance(value, Dataset):
            node[key] = ListLabelDataset.holding(value, columns)
        elif isinstance(value, MutableMapping):
            _hold(value, columns)


class ListLabelDataset(Dataset):
    """A ``datasets.Dataset`` whose ``list_columns`` answer ``dataset[column]`` with a list (one Arrow read).

    Built through ``Dataset``'s own constructor (:meth:`holding`); everything else is the plain ``Dataset``:
    transforms that keep the rows (``select_columns``) keep the class, those that change them (``select``) give a
    plain ``Dataset`` back.
    """

    def __init__(self, *args: Any, list_columns: Sequence[str] = (), **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.list_columns = tuple(column for column in list_columns if column in self.column_names)

    @classmethod
    def holding(cls, dataset: Dataset, columns: Sequence[str]) -> Dataset:
        """``dataset``'s rows, in its order, with ``columns`` held; a formatted split (which may need every column
        per row) or an already held one is returned as it is."""
        if isinstance(dataset, cls) or dataset.format["type"] is not None:
            return dataset
        rows = dataset.with_format("arrow")[:]  # a zero-copy slice, unless the split is a selection of another
        # a fingerprint only names the cache files of later transforms: a fresh one, as hashing the rows would read
        # them all (a second on 200k rows)
        fingerprint = secrets.token_hex(8)
        return cls(rows, info=dataset.info, split=dataset.split, fingerprint=fingerprint, list_columns=columns)

    def __getitem__(self, key):
        if isinstance(key, str) and key in self.list_columns and self.format["type"] is None:
            return Dataset.__getitem__(self.with_format("arrow"), key).to_pylist()
        return super().__getitem__(key)
