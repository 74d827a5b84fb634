"""Every change layer_mteb makes to an mteb task object's state, in one place, through mteb's public task attributes
(tests/tasks/test_task_state.py fails when mteb changes them; private behaviour relied on: :mod:`.mteb_compat`).
"""

from __future__ import annotations

import copy
import secrets
from collections.abc import MutableMapping, Sequence
from dataclasses import dataclass
from typing import Any

from datasets import Dataset

from layer_mteb.tasks.catalog import load_task_data

#: The generators ``AbsTask.__init__`` seeds on the task (v2 clustering samples with ``rng_state``, multilabel
#: classification shuffles with ``np_rng``); the rest is seeded per evaluation (``EVALUATORS_SEED_THEMSELVES``).
TASK_RNG_ATTRIBUTES = ("rng_state", "np_rng")


@dataclass(frozen=True)
class TaskRandomState:
    """A copy of a task's (or each subtask's) random generators: every layer starts from the state a lone run sees."""

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
    """The task objects that hold data and are scored: an aggregate's subtasks, else the task itself."""
    return list(task.tasks) if getattr(task, "is_aggregate", False) else [task]


def load_data_once(task) -> bool:
    """Load ``task``'s data unless loaded; True when this call did, so only that is unloaded (local data, which
    :func:`~layer_mteb.tasks.catalog.load_task` loads, stays: the hub would be the only way back)."""
    if task.data_loaded:
        return False
    load_task_data(task)  # the hub failing mid-run: one line saying where else the data can come from
    return True


def hold_label_lists(task) -> None:
    """Give a classification task's splits a label column that answers with a plain list.

    mteb's undersampling reads ``split[label_column][i]`` per training row, ten times per layer; a lazy ``datasets``
    >= 4 ``Column`` formats each row (0.1-0.5 ms): minutes per layer on 200k rows. One Arrow read gives the same values
    (benchmarks/undersampling.py).
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
    """A ``Dataset`` whose ``list_columns`` answer ``dataset[column]`` with a list (one Arrow read); transforms that
    keep the rows keep the class, others give a plain ``Dataset``."""

    def __init__(self, *args: Any, list_columns: Sequence[str] = (), **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.list_columns = tuple(column for column in list_columns if column in self.column_names)

    @classmethod
    def holding(cls, dataset: Dataset, columns: Sequence[str]) -> Dataset:
        """``dataset`` with ``columns`` held; a formatted (may need every column) or held one is returned as it is."""
        if isinstance(dataset, cls) or dataset.format["type"] is not None:
            return dataset
        rows = dataset.with_format("arrow")[:]  # a zero-copy slice, unless the split is a selection of another
        fingerprint = secrets.token_hex(8)  # it only names later cache files; hashing reads every row
        return cls(rows, info=dataset.info, split=dataset.split, fingerprint=fingerprint, list_columns=columns)

    def __getitem__(self, key):
        if isinstance(key, str) and key in self.list_columns and self.format["type"] is None:
            return Dataset.__getitem__(self.with_format("arrow"), key).to_pylist()
        return super().__getitem__(key)
