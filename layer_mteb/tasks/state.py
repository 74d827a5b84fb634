"""Everything layer_mteb changes about an mteb task object, in one place, each relying on a named part of mteb's API
(tests/test_task_state.py fails loudly when mteb changes it):

- :func:`attach_local_data`: the task reads a local folder instead of the hub (``AbsTask.load_data`` /
  ``data_loaded`` / ``dataset``);
- :func:`hold_label_lists`: a classification task's label columns answer with plain lists, so mteb's row-by-row
  label reads (``AbsTaskClassification._undersample_data``) are list lookups instead of lazy ``datasets`` reads;
- :class:`TaskRandomState`: the task's own random generators (``AbsTask.rng_state`` / ``np_rng``), saved after the
  data is loaded and put back before each layer's evaluation, so every layer is scored from the state a fresh
  ``mteb.evaluate`` of that layer alone would see.
"""

from __future__ import annotations

import copy
from collections.abc import MutableMapping
from dataclasses import dataclass
from typing import Any

from datasets import Dataset

#: The random generators mteb's ``AbsTask.__init__`` seeds on the task object itself (``random.Random`` and a numpy
#: ``Generator``). v2 clustering draws its document sample and bootstrap from ``rng_state``; multilabel
#: classification shuffles with ``np_rng``. Everything else an evaluation draws is seeded afresh per evaluation
#: (evaluators call mteb's ``_set_seed``; classification undersampling builds ``RandomState(task.seed)``).
TASK_RNG_ATTRIBUTES = ("rng_state", "np_rng")


@dataclass(frozen=True)
class TaskRandomState:
    """A copy of a task's random generators, to give every layer's evaluation the same starting state."""

    generators: dict[str, Any]

    @classmethod
    def of(cls, task) -> TaskRandomState:
        missing = [name for name in TASK_RNG_ATTRIBUTES if not hasattr(task, name)]
        if missing:  # mteb renamed them: scoring on would make a layer's score depend on the layers before it
            raise RuntimeError(
                f"mteb task {type(task).__name__} has no {missing}: this mteb version keeps its random state "
                "elsewhere; update layer_mteb.tasks.state.TASK_RNG_ATTRIBUTES"
            )
        return cls({name: copy.deepcopy(getattr(task, name)) for name in TASK_RNG_ATTRIBUTES})

    def restore(self, task) -> None:
        """Put the saved generators back (copies, so the saved state itself never advances)."""
        for name, generator in self.generators.items():
            setattr(task, name, copy.deepcopy(generator))


# --------------------------------------------------------------------------------------------- label columns


def hold_label_lists(task) -> None:
    """Give every split of a classification task a label column that answers with a plain list.

    mteb's ``_undersample_data`` does ``labels = split[label_column]`` and then ``labels[i]`` for every training
    row, ten times per layer. With ``datasets`` >= 4 the column is a lazy ``Column`` and each ``labels[i]`` formats
    one row (about 0.1 ms in memory, 0.25-0.5 ms memory-mapped): minutes per layer on a 200k-row split. A
    :class:`ListLabelDataset` answers each whole-column request with one Arrow read (milliseconds; mteb asks once
    per call) instead; the values, and so every score, are the same (benchmarks/undersampling.py: 290x on a
    memory-mapped 200k-row split). Other task types and already-held splits are left as they are.
    """
    from mteb.abstasks import AbsTaskClassification

    if not isinstance(task, AbsTaskClassification) or task.dataset is None:
        return
    _hold(task.dataset, (task.label_column_name,))


def _hold(node: MutableMapping, columns: tuple[str, ...]) -> None:
    """Wrap every ``Dataset`` below ``node`` (splits, or subsets of splits) in place."""
    for key, value in node.items():
        if isinstance(value, Dataset):
            node[key] = ListLabelDataset.wrap(value, columns)
        elif isinstance(value, MutableMapping):
            _hold(value, columns)


class ListLabelDataset(Dataset):
    """A ``datasets.Dataset`` whose ``list_columns`` answer ``dataset[column]`` with a list (one Arrow read).

    Everything else is the plain ``Dataset``: transforms that keep the rows (``select_columns``) keep the class,
    those that change them (``select``) give a plain ``Dataset`` back.
    """

    list_columns: tuple[str, ...] = ()

    @classmethod
    def wrap(cls, dataset: Dataset, columns: tuple[str, ...]) -> Dataset:
        if isinstance(dataset, cls) or dataset.format["type"] is not None:
            return dataset  # a formatted split may need every column per row: it stays as it is
        held = copy.copy(dataset)
        held.__class__ = cls
        held.list_columns = tuple(c for c in columns if c in dataset.column_names)
        return held

    def __getitem__(self, key):
        if isinstance(key, str) and key in self.list_columns:
            return Dataset.__getitem__(self.with_format("arrow"), key).to_pylist()
        return super().__getitem__(key)
