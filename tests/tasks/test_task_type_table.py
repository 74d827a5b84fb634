"""The task-type table against mteb's registry: every text task type mteb registers (and every type of its text mock
tasks) is one row, each registered task finds a row of its own type by class, and every row names real mteb classes
and types. A type a new mteb adds fails here as one row; so does a row the other stages would read wrongly."""

from __future__ import annotations

import typing
import warnings
from functools import cache

import mteb
import mteb.abstasks
import pytest
from _recording_encoder import RecordingEncoder
from mteb.abstasks.aggregated_task import AbsTaskAggregate
from mteb.abstasks.task_metadata import TaskMetadata
from mteb.mocks import MOCK_TASK_TEST_GRID

from layer_mteb.analysis.labels.labelled import LABELLED_SCORERS
from layer_mteb.analysis.selection.auto import TYPE_ANALOGUES
from layer_mteb.evaluation.mteb_call import texts_mteb_encodes
from layer_mteb.evaluation.plan import is_text_task
from layer_mteb.tasks.task_file import CUSTOM_TYPES
from layer_mteb.tasks.task_types import TASK_TYPES, task_type_of


@cache
def registered_text_tasks() -> dict[str, list]:
    """mteb's text tasks (its registry and its mock grid) by type; aggregates hold no data, their subtasks do."""
    found: dict[str, list] = {}
    for task in [*mteb.get_tasks(), *MOCK_TASK_TEST_GRID]:
        if is_text_task(task) and not isinstance(task, AbsTaskAggregate):
            found.setdefault(task.metadata.type, []).append(task)
    return found


def _mteb_text_types() -> list[str]:
    return sorted(registered_text_tasks())


@pytest.mark.parametrize("type_name", _mteb_text_types())
def test_every_text_task_type_mteb_registers_is_a_row(type_name):
    assert type_name in TASK_TYPES, f"mteb has text tasks of type {type_name!r}: add its row to TASK_TYPES"
    row = TASK_TYPES[type_name]
    for task in registered_text_tasks()[type_name]:
        found = task_type_of(task)
        assert found is not None, task.metadata.name
        # a task finds its own type's row, or a subclass's (a multilabel task that calls itself classification)
        assert found is row or issubclass(found.mteb_class(), row.mteb_class()), (task.metadata.name, found.name)


@pytest.mark.parametrize("type_name", list(TASK_TYPES))
def test_every_row_is_an_mteb_type_of_real_classes(type_name):
    row = TASK_TYPES[type_name]
    assert type_name == row.name in typing.get_args(TaskMetadata.model_fields["type"].annotation)
    for name in row.classes:
        assert isinstance(getattr(mteb.abstasks, name), type), name
    if row.sets_in_one_row is not None:
        assert row.sets_in_one_row in row.classes
    if row.analogue is not None:  # a studied type, one the policy has rules for
        assert TASK_TYPES[row.analogue].analogue is None
    if row.custom is not None:
        assert row.searched or row.columns, "a custom task needs files: split files' columns or retrieval's three"
    assert not row.ranks_candidates or row.searched


def test_a_row_of_one_class_is_found_by_its_metadata_type_and_subclasses_first():
    """Reranking and retrieval share mteb's retrieval class: the task's type decides; a multilabel task finds the
    multilabel row though it subclasses classification (and may call itself Classification)."""
    from mteb.mocks.mock_tasks import MockMultilabelClassification, MockRerankingTask, MockRetrievalTask

    assert task_type_of(MockRerankingTask()).name == "Reranking"
    assert task_type_of(MockRetrievalTask()).name == "Retrieval"
    assert task_type_of(MockMultilabelClassification()).name == "MultilabelClassification"
    assert task_type_of(object()) is None


def test_the_stages_read_the_rows_they_say():
    """labels/ scores exactly the rows marked ``labelled``; the custom types, the policy's analogues and the types
    mteb's readers handled before the table are the rows'."""
    assert set(LABELLED_SCORERS) == {name for name, row in TASK_TYPES.items() if row.labelled}
    assert CUSTOM_TYPES == ("STS", "PairClassification", "Classification", "Clustering", "Retrieval", "Reranking")
    assert TYPE_ANALOGUES == {"Retrieval": "Reranking", "Summarization": "STS"}
    assert {name for name, row in TASK_TYPES.items() if row.columns} == {
        "STS",
        "PairClassification",
        "Classification",
        "Clustering",
    }


#: every text mock task class of mteb's grid whose row reads its texts ahead
WALKED = [
    cls
    for cls in dict.fromkeys(type(task) for task in MOCK_TASK_TEST_GRID if is_text_task(task))
    if (row := task_type_of(cls())) is not None and row.texts is not None
]


@pytest.mark.parametrize("task_class", WALKED, ids=[cls.__name__ for cls in WALKED])
def test_a_rows_texts_read_ahead_are_the_texts_mtebs_evaluator_encodes(task_class):
    """Every row that reads texts ahead, on each of mteb's mock tasks of its type (regression through the
    classification walk, instruction retrieval and reranking through retrieval's): exactly what mteb encodes."""
    task = task_class()
    task.load_data()
    ahead = texts_mteb_encodes(task)
    recorder = RecordingEncoder()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        mteb.evaluate(recorder, task, cache=None, show_progress_bar=False)
    assert ahead is not None and set(ahead) == set(recorder.texts)
