"""A task's labelled test examples (pairs, labelled texts, or queries with their qrels) and each layer's score on
any subset of them, from pooled vectors with mteb's own scoring functions (no ``mteb.evaluate``). A retrieval
example is one query: the corpus is not a label and is always searched whole (reranking: the query's candidates).
"""

from __future__ import annotations

import logging
import re
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from functools import partial

import numpy as np
from datasets import Dataset
from sklearn.base import clone
from sklearn.cluster import MiniBatchKMeans
from sklearn.metrics import accuracy_score, f1_score, precision_score, recall_score, v_measure_score
from sklearn.metrics.pairwise import paired_cosine_distances, paired_euclidean_distances, paired_manhattan_distances
from sklearn.model_selection import KFold
from threadpoolctl import threadpool_limits

from layer_mteb.common.errors import UserError
from layer_mteb.evaluation.evaluator_warnings import LayerWarnings, counted, task_warnings
from layer_mteb.tasks.mteb_compat import (
    pair_metrics,
    queries_with_positives,
    retrieval_metrics,
    retrieval_texts,
    sts_gold,
    sts_metrics,
)
from layer_mteb.tasks.task_types import task_type_of

#: mteb's k-means batch size for legacy clustering (``ClusteringEvaluator(clustering_batch_size=500)``)
KMEANS_BATCH = 500
logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class LabelledExamples:
    """The labelled examples of one (task, subset, split): ``texts`` holds each unique text once; ``items`` indexes
    it ([n] for single texts, [n, 2] for pairs) and ``gold`` is each example's score or label."""

    task: object
    texts: list[str]
    items: np.ndarray
    gold: np.ndarray
    search: Search | None = None  # retrieval and reranking: the corpus each labelled query (item) searches

    def __len__(self) -> int:
        return len(self.items)


def labelled_examples(task, subset: str, split: str) -> LabelledExamples:
    """The examples mteb scores for ``task`` on ``subset``/``split`` (legacy clustering's sets pooled into one)."""
    row = task_type_of(task)
    scorer = LABELLED_SCORERS.get(row.name) if row is not None else None
    if scorer is None:  # a multilabel task may call itself classification: its row is found by class
        kind = _in_words(row.name) if row is not None else task.metadata.type
        raise UserError(f"{task.metadata.name}: labelled selection supports {', '.join(LABELLED_TYPES)}, not {kind}")
    data = task.dataset if subset not in task.dataset and subset == "default" else task.dataset[subset]
    return scorer.examples(task, data[split])


def _in_words(type_name: str) -> str:
    """``MultilabelClassification`` -> ``multilabel classification`` (an acronym such as ``STS`` kept)."""
    words = re.sub(r"(?<=[a-z])(?=[A-Z])", " ", type_name).split()
    return " ".join(word if word.isupper() else word.lower() for word in words)


def _sts_examples(task, rows) -> LabelledExamples:
    first, second = task.column_names
    gold = [sts_gold(task, x) for x in rows["score"]]  # mteb normalises before correlating
    return _pairs(task, rows[first], rows[second], gold)


def _pair_examples(task, rows) -> LabelledExamples:
    if len(rows) == 1:  # mteb's v1 layout: all pairs in one row
        rows = Dataset.from_dict(rows[0])
    return _pairs(task, rows[task.input1_column_name], rows[task.input2_column_name], rows[task.label_column_name])


def _classification_examples(task, rows) -> LabelledExamples:
    return _singles(task, rows[task.input_column_name], rows[task.label_column_name])


def _search_examples(task, rows) -> LabelledExamples:
    """A query with its qrels is one example; the corpus is searched whole."""
    texts, queries, query_ids, search = search_examples(rows)
    return LabelledExamples(task, texts, queries, query_ids, search)


def _clustering_examples(task, rows) -> LabelledExamples:
    texts, labels = rows[task.input_column_name], rows[task.label_column_name]
    if texts and isinstance(texts[0], list):  # legacy: one row per cluster set
        texts = [t for group in texts for t in group]
        labels = [label for group in labels for label in group]
    labels = [label[0] if isinstance(label, list) else label for label in labels]  # hierarchical: level 0
    return _singles(task, texts, labels)


def _indexed(texts: Sequence[str]) -> tuple[list[str], np.ndarray]:
    """Each text once, in order of first appearance, and each of ``texts``' position in that list: a text shared by
    examples is encoded once."""
    unique = list(dict.fromkeys(texts))
    index = {t: i for i, t in enumerate(unique)}
    return unique, np.array([index[t] for t in texts], dtype=np.int64)


def _pairs(task, first: Sequence[str], second: Sequence[str], gold: Sequence) -> LabelledExamples:
    texts, items = _indexed([*first, *second])
    return LabelledExamples(task, texts, items.reshape(2, -1).T, np.asarray(gold))


def _singles(task, texts: Sequence[str], labels: Sequence) -> LabelledExamples:
    return LabelledExamples(task, *_indexed(texts), np.asarray(labels))


def layer_scores(examples: LabelledExamples, vectors: np.ndarray, rows: np.ndarray, seed: int = 42) -> np.ndarray:
    """The task's main score for every layer of ``vectors`` ([L+1, len(texts), D]) on the examples ``rows``; NaN
    where they cannot score (no positive pair, say). ``seed`` plays mteb's ``task.seed``."""
    with threadpool_limits(1):  # small fits: BLAS threads cost 6-15x more than they save (and share the cores)
        return np.array([layer_score(examples, layer, rows, seed) for layer in vectors], dtype=np.float64)


def layer_score(examples: LabelledExamples, layer: np.ndarray, rows: np.ndarray, seed: int = 42) -> float:
    """One layer's :func:`layer_scores`, independent of the others. The caller limits BLAS to one thread once for
    many calls (entering the limit costs as much as scoring a few pairs)."""
    task = examples.task
    if examples.search is not None:
        return search_score(task, examples.search, layer, examples.items[rows], examples.gold[rows])
    scorer = LABELLED_SCORERS[task.metadata.type].score
    return scorer(task, task.metadata.main_score, layer[examples.items[rows]], examples.gold[rows], seed)


def _sts(task, main: str, pairs: np.ndarray, gold: np.ndarray, seed: int) -> float:
    """mteb's ``AbsTaskSTS._calculate_scores`` on the similarities ``AnySTSEvaluator`` computes (cosine, negated
    Manhattan and Euclidean distances; the encoder's own similarity is cosine); main score ``cosine_spearman``."""
    return float(sts_metrics(task, _paired(pairs, distance_sign=-1), gold.tolist())[main])


def _pair_classification(task, main: str, pairs: np.ndarray, gold: np.ndarray, seed: int) -> float:
    """mteb's ``AbsTaskPairClassification._compute_metrics`` on the distances ``PairClassificationEvaluator``
    computes; main score ``max_ap``, the best average precision over cosine, dot, Manhattan and Euclidean."""
    if len(np.unique(gold)) < 2:
        return float("nan")  # average precision needs positives and negatives
    distances = _paired(pairs) | {"dot_scores": np.einsum("nd,nd->n", pairs[:, 0], pairs[:, 1]).tolist()}
    return float(pair_metrics(task, distances, gold.tolist())[main])


def _paired(pairs: np.ndarray, distance_sign: int = 1) -> dict[str, list[float]]:
    """The similarities mteb's pair evaluators compute of each pair: cosine (the encoder's own similarity too), and
    the Manhattan and Euclidean distances, times ``distance_sign`` (STS negates them into similarities)."""
    a, b = pairs[:, 0], pairs[:, 1]
    cosine = (1 - paired_cosine_distances(a, b)).tolist()
    return {
        "cosine_scores": cosine,
        "similarity_scores": cosine,
        "manhattan_distances": (distance_sign * paired_manhattan_distances(a, b)).tolist(),
        "euclidean_distances": (distance_sign * paired_euclidean_distances(a, b)).tolist(),
    }


def _classification(task, main: str, x: np.ndarray, y: np.ndarray, seed: int) -> float:
    """mteb's cross-validated classification (``_evaluate_subset_cross_validation``) within the given texts, its
    undersampling and ``task.evaluator_model`` included; out-of-fold predictions are scored at once (small K gives
    folds of one or two texts). A training fold of one label predicts that label (nothing to fit)."""
    if main not in CLASSIFICATION_SCORES:
        raise UserError(f"{task.metadata.name}: main score {main!r} is not one labelled selection computes")
    folds = KFold(n_splits=min(task.n_splits, len(y)), shuffle=True, random_state=seed)
    predicted = np.empty_like(y)
    positions: list[int] | None = None
    for train_rows, test in folds.split(x):
        positions, train = _undersample(train_rows, y, task.samples_per_label, seed, positions)
        if len(np.unique(y[train])) == 1:
            predicted[test] = y[train][0]
        else:
            predicted[test] = clone(task.evaluator_model).fit(x[train], y[train]).predict(x[test])
    return float(CLASSIFICATION_SCORES[main](y, predicted))


def report_scorer_warnings(name: str, task_type: str, per_layer: Mapping[int, LayerWarnings]) -> str:
    """Log one line for a task whose labelled scoring raised warnings (counted in the scoring processes, else lost
    there), as a sweep does, and return them in words for the task's row ('' for none)."""
    record = task_warnings(per_layer)
    if record:
        scorer = LABELLED_SCORERS.get(task_type)
        source = scorer.warns if scorer is not None and scorer.warns else "the labelled scorers"
        logger.warning(
            "%s: %s; the layers were scored with those fits, as mteb scores them", name, counted(record, source)
        )
    return counted(record)


#: mteb's ``AbsTaskClassification._calculate_scores``, main score by main score
CLASSIFICATION_SCORES = {
    "accuracy": accuracy_score,
    "f1": partial(f1_score, average="macro", zero_division=0),
    "f1_weighted": partial(f1_score, average="weighted", zero_division=0),
    "precision": partial(precision_score, average="macro", zero_division=0),
    "precision_weighted": partial(precision_score, average="weighted", zero_division=0),
    "recall": partial(recall_score, average="macro", zero_division=0),
    "recall_weighted": partial(recall_score, average="weighted", zero_division=0),
}


def _undersample(
    rows: np.ndarray, labels: np.ndarray, per_label: int, seed: int, positions: list[int] | None = None
) -> tuple[list[int], np.ndarray]:
    """mteb's ``_undersample_data`` as its cross-validation calls it: the previous fold's positions are shuffled
    again with the seed, then at most ``per_label`` rows per label kept. Returns (positions, rows kept)."""
    positions = list(range(len(rows))) if positions is None else positions
    np.random.RandomState(seed).shuffle(positions)
    kept, counts = [], Counter()
    for position in positions:
        row = rows[position]
        if counts[labels[row]] < per_label:
            kept.append(row)
            counts[labels[row]] += 1
    return positions, np.asarray(kept, dtype=np.int64)


def _clustering(task, main: str, x: np.ndarray, y: np.ndarray, seed: int) -> float:
    """mteb's legacy clustering evaluator on the given texts: ``MiniBatchKMeans`` with as many clusters as labels
    among them (batch 500, ``n_init="auto"``, ``random_state`` the seed), scored by ``v_measure_score``."""
    n_labels = len(np.unique(y))
    if n_labels < 2:
        return 1.0  # mteb's own convention for a set of one label
    model = MiniBatchKMeans(n_clusters=n_labels, batch_size=KMEANS_BATCH, n_init="auto", random_state=seed)
    return float(v_measure_score(y, model.fit_predict(x)))


@dataclass(frozen=True)
class Search:
    """A retrieval split as positions into the examples' texts: corpus, qrels and reranking ``candidates``."""

    document_ids: list[str]
    documents: np.ndarray
    qrels: dict[str, dict[str, int]]
    candidates: dict[str, np.ndarray] | None


def search_examples(split: dict) -> tuple[list[str], np.ndarray, np.ndarray, Search]:
    """(texts, query positions, query ids, :class:`Search`) of a retrieval split: texts as mteb encodes them, only
    the queries mteb keeps (those with a relevant document)."""
    corpus = split["corpus"]
    queries = queries_with_positives(split["relevant_docs"], split["queries"])
    documents, asked = retrieval_texts(corpus, document=True), retrieval_texts(queries, document=False)
    texts, positions = _indexed([*documents, *asked])
    document_ids = [str(d) for d in corpus["id"]]
    query_ids = np.asarray([str(q) for q in queries["id"]], dtype=object)
    qrels = {str(q): {str(d): int(r) for d, r in docs.items()} for q, docs in split["relevant_docs"].items()}
    candidates = None
    if split.get("top_ranked"):
        position = {d: i for i, d in enumerate(document_ids)}
        candidates = {
            str(q): np.asarray([position[str(d)] for d in docs if str(d) in position], dtype=np.int64)
            for q, docs in split["top_ranked"].items()
        }
    search = Search(document_ids, positions[: len(documents)], qrels, candidates)
    return texts, positions[len(documents) :], query_ids, search


def search_score(task, search: Search, vectors: np.ndarray, queries: np.ndarray, query_ids: np.ndarray) -> float:
    """One layer's main score on ``queries``: each query's top ``task._top_k`` documents by cosine (reranking: of
    its candidates), scored by mteb's retrieval metrics against those queries' qrels."""
    documents = _unit(vectors[search.documents])
    similarity = _unit(vectors[queries]) @ documents.T
    everything = np.arange(len(documents))
    results = {}
    for qid, row in zip(query_ids, similarity, strict=True):
        pool = everything if search.candidates is None else search.candidates.get(str(qid), everything[:0])
        top = pool[np.argsort(-row[pool], kind="stable")[: task._top_k]]
        results[str(qid)] = {search.document_ids[d]: float(row[d]) for d in top}
    qrels = {str(q): search.qrels[str(q)] for q in query_ids}
    return float(retrieval_metrics(task, results, qrels)[task.metadata.main_score])


def _unit(x: np.ndarray) -> np.ndarray:
    x = np.asarray(x, dtype=np.float32)
    norms = np.linalg.norm(x, axis=1, keepdims=True)
    return x / np.where(norms == 0, 1, norms)


@dataclass(frozen=True)
class LabelledScorer:
    """How a labelled pick reads and scores one task type: ``examples`` (task, the split's rows) -> its labelled
    examples; ``score`` one layer's main score on some of them (None: a search, :func:`search_score`); ``warns``:
    what raises the warnings its fits may raise (a logistic regression that did not converge, say)."""

    examples: Callable[[object, object], LabelledExamples]
    score: Callable[[object, str, np.ndarray, np.ndarray, int], float] | None = None
    warns: str | None = None


_SEARCH = LabelledScorer(_search_examples)
#: the mteb task types a labelled pick scores, by name (what each example is: a pair, a labelled text, a query and its
#: qrels); each is a row of ``TASK_TYPES`` marked ``labelled`` (``tests/tasks/test_task_type_table.py``)
LABELLED_SCORERS: dict[str, LabelledScorer] = {
    "STS": LabelledScorer(_sts_examples, _sts),
    "PairClassification": LabelledScorer(_pair_examples, _pair_classification),
    "Classification": LabelledScorer(_classification_examples, _classification, "mteb's logistic regression"),
    "Clustering": LabelledScorer(_clustering_examples, _clustering, "scikit-learn's k-means"),
    "Retrieval": _SEARCH,
    "Reranking": _SEARCH,
}
LABELLED_TYPES = tuple(LABELLED_SCORERS)
