"""mteb's own mock tasks (``mteb.mocks``: every text task of ``MOCK_TASK_TEST_GRID``, monolingual and multilingual,
and ``MockAggregatedTask``) through the one-pass sweep: every layer's score equals ``mteb.evaluate`` of the same
layer's own encoder, ``LayerEncoder.from_model(model, layer=k)``, to 1e-6.

The whole grid on all-MiniLM-L6-v2 (layers 0, 3, 6) is slow; the two kinds of task the sweep once could not run
(multilabel classification, aggregates) run on a tiny model in the default suite, with the aggregate's results
recorded as mteb records them."""

from __future__ import annotations

import json

import pandas as pd
import pytest
from conftest import script_module, tiny_model_of_depth
from mteb.abstasks.aggregated_task import AbsTaskAggregate
from mteb.abstasks.multilabel_classification import AbsTaskMultilabelClassification
from mteb.mocks import MOCK_TASK_TEST_GRID, MOCK_TASK_TEST_GRID_MONOLINGUAL, MOCK_TASK_TEST_GRID_MULTILINGUAL
from mteb.mocks.mock_tasks import (
    MockAggregatedTask,
    MockMultilabelClassification,
    MockMultilingualMultilabelClassification,
)
from threadpoolctl import threadpool_limits

from layer_mteb.common.config import EncodeConfig
from layer_mteb.evaluation.plan import is_text_task
from layer_mteb.model.loading import load_model

CONFIG = EncodeConfig(batch_size=8)
#: every text task class of mteb's mock grid once (the multilingual STS mock sits in both lists), then the aggregate
GRID = [*dict.fromkeys(type(task) for task in MOCK_TASK_TEST_GRID if is_text_task(task)), MockAggregatedTask]


@pytest.fixture(autouse=True)
def _one_thread_evaluators():
    """k-means and k-NN on a few points spend seconds spinning BLAS threads on a loaded machine; one is enough."""
    with threadpool_limits(limits=1):
        yield


#: ``scripts/mteb_coverage.py``'s comparison (the script reports the whole grid; the tests assert it)
COVERAGE = script_module("mteb_coverage")


def mteb_scores(model, task_class, layer: int) -> dict[tuple[str, str, str], float]:
    return COVERAGE.mteb_scores(model, task_class, layer, CONFIG)


def differences(model, task_class, layers: list[int], **run) -> dict[tuple, float]:
    return COVERAGE.differences(model, task_class, layers, CONFIG, **run)


def test_the_grid_is_every_text_mock_task_of_mteb():
    """Guard: 29 text mock tasks (13 multilingual, 16 monolingual, one class in both) and the aggregate, of every
    kind the sweep must handle."""
    assert len(MOCK_TASK_TEST_GRID_MULTILINGUAL) + len(MOCK_TASK_TEST_GRID_MONOLINGUAL) == 29
    assert len(GRID) == 29  # 28 classes + the aggregate
    assert all(is_text_task(task_class()) for task_class in GRID)
    assert issubclass(MockMultilabelClassification, AbsTaskMultilabelClassification)
    assert issubclass(MockAggregatedTask, AbsTaskAggregate)


@pytest.fixture(scope="module")
def tiny(bert_tokenizer):
    return tiny_model_of_depth("gpt2", bert_tokenizer, 2)


@pytest.mark.parametrize("task_class", [MockMultilabelClassification, MockMultilingualMultilabelClassification])
def test_multilabel_classification_every_layer_is_mtebs(tiny, task_class):
    found = differences(tiny, task_class, [0, 1, 2], vector_cache=False)
    assert found and max(found.values()) <= 1e-6, found


def test_an_aggregate_scores_its_subtasks_and_combines_them_as_mteb_does(tiny, tmp_path):
    found = differences(tiny, MockAggregatedTask, [0, 2], vector_cache=False, output=tmp_path)
    aggregate = MockAggregatedTask()
    assert {task for _, task, _, _ in found} == {aggregate.metadata.name}  # mteb's result is the combined one
    scores = pd.read_csv(tmp_path / "scores.csv")
    for subtask in aggregate.tasks:  # the subtasks' rows are each mteb's score of that subtask alone
        for layer in (0, 2):
            rows = scores[(scores["task"] == subtask.metadata.name) & (scores["layer"] == layer)]
            ours = {(r.task, r.split, r.subset): r.main_score for r in rows.itertuples()}
            for key, score in mteb_scores(tiny, type(subtask), layer).items():
                found[(layer, *key)] = abs(ours[key] - score)
    # per layer: the aggregate, the retrieval mock (val, test) and the reranking mock (test)
    assert len(found) == 2 * 4 and max(found.values()) <= 1e-6, found
    names = {aggregate.metadata.name, *(task.metadata.name for task in aggregate.tasks)}
    assert set(scores["task"]) == names and sorted(set(scores["layer"])) == [0, 2]
    stored = {path.stem for path in (tmp_path / "mteb").rglob("*.json") if path.stem != "model_meta"}
    assert stored == names
    (entry,) = json.loads((tmp_path / "run.json").read_text())["tasks"]
    assert entry["task"] == aggregate.metadata.name and entry["texts_encoded"] > 0
    assert entry["subtasks"] == ["MockRetrievalTask", "MockRerankingTask"]


@pytest.mark.slow
@pytest.mark.parametrize("task_class", GRID, ids=[c.__name__ for c in GRID])
def test_every_mock_task_every_layer_through_the_sweep_is_mtebs(task_class):
    """All-MiniLM-L6-v2, layers 0, 3 and 6, as the issue's report ran it."""
    found = differences(_minilm(), task_class, [0, 3, 6], vector_cache=False)
    assert found and max(found.values()) <= 1e-6, found


_MODEL = []


def _minilm():
    if not _MODEL:
        _MODEL.append(load_model("minilm-l6", CONFIG))
    return _MODEL[0]
