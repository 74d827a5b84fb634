"""Labelled selection's classification and clustering scorers, given every labelled example of the split, against
mteb's own evaluators run by ``mteb.evaluate`` on the same vectors (STS and pair classification are checked the same
way in ``test_label_budget.py``).

The tasks are real (the shared data folder); the vectors are seeded and structured (a centre per label plus noise),
so scores sit well between chance and 1 and a wrong fold, classifier, sample or k-means setting shows. The scorers
differ from mteb in two documented ways, each pinned below to exactly that difference: the training folds'
undersampling order (classification) and pooled cluster sets (legacy clustering).
"""

from __future__ import annotations

import mteb
import numpy as np
import pytest
from datasets import Dataset, DatasetDict
from mteb.models.abs_encoder import AbsEncoder
from mteb.models.model_meta import ModelMeta, ScoringFunction
from threadpoolctl import threadpool_limits

from layer_mteb.analysis.labels import labelled
from layer_mteb.analysis.labels.labelled import labelled_examples, layer_score
from layer_mteb.tasks.catalog import load_task, select_tasks

#: texts per classification task: five equal folds of 100, so mteb's mean over folds is the pooled accuracy
N_CLASSIFICATION = 500


@pytest.fixture(autouse=True)
def _one_thread():
    """Logistic regression and k-means on a few thousand points: BLAS threads only contend on a shared machine."""
    with threadpool_limits(limits=1):
        yield


class TableEncoder(AbsEncoder):
    """An mteb encoder that returns a fixed vector per text: what the labelled scorer reads from the vector store."""

    def __init__(self, texts: list[str], vectors: np.ndarray):
        self.table = dict(zip(texts, vectors, strict=True))
        self.mteb_model_meta = ModelMeta.create_empty(
            {"name": "table/vectors", "similarity_fn_name": ScoringFunction.COSINE, "framework": ["PyTorch"]}
        )

    def encode(self, inputs, *, task_metadata, hf_split, hf_subset, prompt_type=None, **kwargs):
        return np.stack([self.table[text] for batch in inputs for text in batch["text"]])


def _task(name: str, data_dir):
    _, (spec,) = select_tasks(name, data_dir)
    return load_task(spec, "test", data_dir)


def _structured_vectors(examples, noise: float, dim: int = 16, seed: int = 0) -> np.ndarray:
    """One vector per unique text: its (first) label's random centre plus Gaussian noise of scale ``noise``."""
    rng = np.random.default_rng(seed)
    labels = sorted(set(examples.gold.tolist()))
    centres = rng.standard_normal((len(labels), dim))
    label_of = {}
    for item, gold in zip(examples.items.tolist(), examples.gold.tolist(), strict=True):
        label_of.setdefault(item, gold)
    rows = [centres[labels.index(label_of[i])] + noise * rng.standard_normal(dim) for i in range(len(examples.texts))]
    return np.stack(rows).astype(np.float32)


def _mteb_scores(task, examples, vectors) -> dict:
    result = mteb.evaluate(TableEncoder(examples.texts, vectors), task, cache=None, show_progress_bar=False)
    (scores,) = result.task_results[0].scores["test"]
    return scores


def _cross_validated(name: str, data_dir, samples_per_label: int | None = None):
    """The first :data:`N_CLASSIFICATION` test texts of a classification task, which mteb then scores by its own
    cross-validation on that split (``_evaluate_subset_cross_validation``), as the labelled scorer does."""
    task = _task(name, data_dir)
    task.dataset = DatasetDict({"test": task.dataset["test"].select(range(N_CLASSIFICATION))})
    task.is_cross_validation, task.train_split = True, "test"
    if samples_per_label is not None:
        task.samples_per_label = samples_per_label
    return task


@pytest.mark.parametrize("name", ["EmotionClassification", "Banking77Classification"])
def test_classification_of_every_example_equals_mtebs_cross_validation(name, data_dir):
    """Same folds (``task.n_splits``, shuffled with ``task.seed``), same classifier, same predictions: equal to
    rounding. ``samples_per_label`` is raised past the fold size so undersampling keeps every text (its order is
    the one known difference, pinned in the next test)."""
    task = _cross_validated(name, data_dir, samples_per_label=N_CLASSIFICATION)
    examples = labelled_examples(task, "default", "test")
    vectors = _structured_vectors(examples, noise=1.5)
    ours = layer_score(examples, vectors, np.arange(len(examples)), seed=task.seed)
    theirs = _mteb_scores(task, examples, vectors)
    assert task.metadata.main_score == "accuracy" and 0.4 < ours < 0.95
    assert ours == pytest.approx(theirs["accuracy"], abs=1e-6)
    assert ours == pytest.approx(theirs["main_score"], abs=1e-6)


@pytest.mark.parametrize("name", ["EmotionClassification", "Banking77Classification"])
def test_undersampled_classification_equals_mtebs_evaluator(name, data_dir):
    """With the task's own ``samples_per_label`` (16 and 8) each training fold keeps a sample per label, in mteb's
    order: the previous fold's shuffled positions shuffled again with the seed. The scorer once shuffled each fold
    afresh and differed from mteb by 0.01 to 0.03 on these splits."""
    task = _cross_validated(name, data_dir)
    examples = labelled_examples(task, "default", "test")
    vectors = _structured_vectors(examples, noise=1.5)
    theirs = _mteb_scores(task, examples, vectors)["accuracy"]
    ours = layer_score(examples, vectors, np.arange(len(examples)), seed=task.seed)
    assert ours == pytest.approx(theirs, abs=1e-6)


def test_clustering_of_every_example_equals_mtebs_evaluator(data_dir):
    """TwentyNewsgroups' local test split is one cluster set of 7532 texts (20 labels): mteb's ``ClusteringEvaluator``
    (MiniBatchKMeans, batch 500, seed 42) and the scorer give the same V-measure."""
    task = _task("TwentyNewsgroupsClustering", data_dir)
    examples = labelled_examples(task, "default", "test")
    vectors = _structured_vectors(examples, noise=1.0)
    ours = layer_score(examples, vectors, np.arange(len(examples)), seed=task.seed)
    theirs = _mteb_scores(task, examples, vectors)
    assert len(examples) == 7532 > 10 * labelled.KMEANS_BATCH and 0.3 < ours < 0.95
    assert ours == pytest.approx(theirs["v_measure"], abs=1e-6)
    assert ours == pytest.approx(theirs["main_score"], abs=1e-6)


def test_several_cluster_sets_are_scored_as_mteb_scores_each_and_pooled_where_mteb_averages(data_dir):
    """mteb's legacy clustering scores each cluster set alone and averages; ``labelled_examples`` pools the sets'
    examples into one list. Scored on one set's rows, the scorer gives mteb's V-measure of that set exactly; on all
    rows it clusters the pool, which is not mteb's mean (the documented difference)."""
    task = _task("TwentyNewsgroupsClustering", data_dir)
    (pool,) = task.dataset["test"]
    order = np.random.default_rng(0).permutation(len(pool["sentences"]))
    sets = [order[:1200], order[1200:2100]]  # two random sets, each more than one k-means batch
    task.dataset = DatasetDict(
        {"test": Dataset.from_dict({key: [[pool[key][i] for i in s] for s in sets] for key in ("sentences", "labels")})}
    )
    examples = labelled_examples(task, "default", "test")
    vectors = _structured_vectors(examples, noise=1.0)
    theirs = _mteb_scores(task, examples, vectors)
    each = [layer_score(examples, vectors, rows, seed=task.seed) for rows in (np.arange(1200), np.arange(1200, 2100))]
    np.testing.assert_allclose(each, theirs["v_measures"], atol=1e-6)
    assert theirs["v_measure"] == pytest.approx(np.mean(each), abs=1e-6)
    pooled = layer_score(examples, vectors, np.arange(2100), seed=task.seed)
    assert abs(pooled - theirs["v_measure"]) > 1e-3


def test_multilabel_classification_is_refused_in_one_line_not_read_as_single_labels():
    """A multilabel task is a classification task to ``isinstance``; its list labels have no single-label score."""
    from mteb.mocks.mock_tasks import MockMultilabelClassification

    from layer_mteb.common.errors import UserError

    task = MockMultilabelClassification()
    task.load_data()
    with pytest.raises(UserError, match="not multilabel classification"):
        labelled_examples(task, "default", "test")
