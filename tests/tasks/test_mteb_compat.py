"""Guards for the private mteb names in ``layer_mteb.tasks.mteb_compat``: each fails loudly when mteb renames one,
changes its signature or what it gives on mteb's own mock tasks, instead of a sweep silently encoding other texts."""

from __future__ import annotations

import importlib
import inspect
import random
import warnings
from collections import Counter

import mteb
import numpy as np
import pytest
from _recording_encoder import RecordingEncoder
from datasets import Dataset
from mteb.mocks.mock_tasks import (
    MockAggregatedTask,
    MockMultilabelClassification,
    MockMultilingualMultilabelClassification,
)
from mteb.mocks.mock_tasks.classification import MockClassificationTask, MockMultilingualClassificationTask
from mteb.mocks.mock_tasks.pair_classification import MockPairClassificationTask
from mteb.mocks.mock_tasks.reranking import MockRerankingTask
from mteb.mocks.mock_tasks.retrieval import MockRetrievalTask
from mteb.mocks.mock_tasks.sts import MockSTSTask

from layer_mteb.evaluation.mteb_call import texts_mteb_encodes
from layer_mteb.tasks.mteb_compat import (
    EVALUATORS_SEED_THEMSELVES,
    PRIVATE_NAMES,
    queries_with_positives,
    retrieval_texts,
    undersample,
)
from layer_mteb.tasks.state import ListLabelDataset, TaskRandomState, data_parts


def _resolve(dotted: str):
    """The object a dotted name points to: the longest importable module, then attributes."""
    parts = dotted.split(".")
    for cut in range(len(parts) - 1, 0, -1):
        try:
            target = importlib.import_module(".".join(parts[:cut]))
        except ImportError:
            continue
        for attribute in parts[cut:]:
            target = getattr(target, attribute)
        return target
    raise ImportError(dotted)


@pytest.mark.parametrize("name", list(PRIVATE_NAMES))
def test_every_private_name_exists_with_the_signature_relied_on(name):
    parameters = tuple(inspect.signature(_resolve(name)).parameters)
    assert parameters == PRIVATE_NAMES[name], f"mteb changed {name}: now {parameters}"


def _rows(n: int, labels: int, seed: int = 0) -> Dataset:
    rng = random.Random(seed)
    texts, classes = [f"text {i}" for i in range(n)], [rng.randrange(labels) for _ in range(n)]
    return Dataset.from_dict({"text": texts, "label": classes})


def _expected_sample(seed: int, labels: list[int], order: list[int], per_label: int) -> tuple[list[int], list[int]]:
    """mteb's undersampling by its definition: the order shuffled by a fresh ``RandomState(seed)``, then the first
    ``per_label`` rows of each label in that order."""
    order = list(order)
    np.random.RandomState(seed).shuffle(order)
    counts: Counter = Counter()
    picked = []
    for i in order:
        if counts[labels[i]] < per_label:
            picked.append(i)
            counts[labels[i]] += 1
    return order, picked


def test_undersample_draws_mtebs_per_label_sample_from_the_task_seed():
    task = MockClassificationTask()
    train = _rows(300, 7)
    labels = list(train["label"])
    order, previous = None, list(range(len(train)))
    for experiment in range(3):  # each experiment reshuffles the previous one's order, from the same seed
        want = _expected_sample(task.seed, labels, previous, task.samples_per_label)
        order, picked = undersample(task, train, experiment, order)  # mteb shuffles the order it is given in place
        assert (order, picked) == want
        previous = list(order)
    assert Counter(labels[i] for i in picked) == dict.fromkeys(set(labels), task.samples_per_label)


def test_undersample_reads_the_label_column_once_per_call():
    """What ``hold_label_lists`` speeds up: one whole-column read, then row-by-row lookups into it."""
    reads = []

    class Counting(ListLabelDataset):
        def __getitem__(self, key):
            reads.append(key)
            return super().__getitem__(key)

    task = MockClassificationTask()
    train = _rows(200, 5)
    held = Counting(train.with_format("arrow")[:], list_columns=["label"])
    assert undersample(task, held, 0, None) == undersample(task, train, 0, None)
    assert reads == ["label"]


def test_retrieval_helpers_give_document_and_query_texts_as_mteb_forms_them():
    corpus = Dataset.from_dict({"id": ["d1", "d2"], "title": ["A title", ""], "text": ["body one", "body two"]})
    queries = Dataset.from_dict({"id": ["q1", "q2", "q3"], "text": ["first?", "second?", "third?"]})
    kept = queries_with_positives({"q1": {"d1": 1}, "q2": {}, "q3": {"d2": 1}}, queries)
    assert kept["id"] == ["q1", "q3"]
    assert retrieval_texts(kept, document=False) == ["first?", "third?"]
    documents = retrieval_texts(corpus, document=True)
    assert len(documents) == 2 and "A title" in documents[0] and "body one" in documents[0]
    assert documents[1].strip() == "body two"


@pytest.mark.parametrize(
    "task_class",
    [
        MockSTSTask,
        MockPairClassificationTask,
        MockClassificationTask,
        MockMultilingualClassificationTask,
        MockRetrievalTask,
        MockRerankingTask,
        MockMultilabelClassification,
        MockMultilingualMultilabelClassification,
        MockAggregatedTask,
    ],
)
def test_the_texts_read_ahead_are_exactly_the_texts_mteb_encodes(task_class):
    """prefill reads each task type's texts through the compat helpers; mteb's own evaluation must ask for the same
    (multilabel sampling draws from the task's own generator: reading ahead must leave it as it was)."""
    task = task_class()
    for part in data_parts(task):
        part.load_data()
    before = TaskRandomState.of(task)
    ahead = texts_mteb_encodes(task)
    after = TaskRandomState.of(task)
    for was, now in zip(before.generators, after.generators, strict=True):
        assert was["rng_state"].getstate() == now["rng_state"].getstate()
        assert was["np_rng"].bit_generator.state == now["np_rng"].bit_generator.state
    recorder = RecordingEncoder()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        mteb.evaluate(recorder, task, cache=None, show_progress_bar=False)
    assert ahead is not None and set(ahead) == set(recorder.texts)


def test_evaluators_seed_their_own_generators():
    """Why only the task's own generators are saved per layer: every mteb evaluator seeds itself when created."""
    from mteb._set_seed import _set_seed

    evaluator = _resolve(EVALUATORS_SEED_THEMSELVES)
    assert "_set_seed(seed)" in inspect.getsource(evaluator.__init__)
    first, second = _set_seed(7), _set_seed(7)
    assert first[0].getstate() == second[0].getstate() == random.Random(7).getstate()
    assert first[1].random() == second[1].random()
