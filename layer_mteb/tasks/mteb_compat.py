"""Every private mteb name layer_mteb relies on, gathered here so that an mteb upgrade breaks one module.

Each function wraps one private mteb helper, and each constant names one private behaviour the package's logic
assumes; the docstrings say what is relied on and why. ``tests/tasks/test_mteb_compat.py`` holds a guard for each that
fails loudly (a missing name, a changed signature, a different output on mteb's own mock tasks) when mteb changes
underneath, instead of a sweep silently encoding other texts or scoring from another state.
"""

from __future__ import annotations

from typing import Any

#: Private mteb names relied on, by where they live (the guards check each still exists with this signature).
PRIVATE_NAMES = {
    "mteb.abstasks.classification.AbsTaskClassification._undersample_data": (
        "self",
        "dataset",
        "experiment_num",
        "idxs",
    ),
    "mteb.abstasks.multilabel_classification.AbsTaskMultilabelClassification._undersample_data_indices": (
        "self",
        "y",
        "samples_per_label",
        "idxs",
    ),
    "mteb.abstasks.abstask._multilabel_subsampling": ("dataset_dict", "seed", "splits", "label", "n_samples"),
    "mteb._create_dataloaders._retrieval_texts": ("dataset", "prompt_type"),
    "mteb.abstasks.retrieval._filter_queries_without_positives": ("relevant_docs", "queries"),
    "mteb._set_seed._set_seed": ("seed",),
    "mteb.abstasks.sts.AbsTaskSTS._normalize": ("self", "x"),
    "mteb.abstasks.sts.AbsTaskSTS._calculate_scores": ("self", "scores", "normalized_scores"),
    "mteb.abstasks.pair_classification.AbsTaskPairClassification._compute_metrics": (
        "self",
        "similarity_scores",
        "labels",
    ),
}


def undersample(task, train, experiment: int, order: list[int] | None) -> tuple[list[int], list[int]]:
    """(shuffled row order, selected rows) of one of mteb's classification training samples.

    mteb's ``AbsTaskClassification._undersample_data(dataset, experiment_num, idxs)`` draws the per-label training
    sample of experiment ``experiment``, continuing from the previous experiment's shuffled order (None: the
    first). It seeds its own ``RandomState(task.seed)`` on every call, so calling it here selects exactly the rows
    mteb's evaluator will. It reads ``train[task.label_column_name]`` once and then indexes it row by row (what
    :func:`layer_mteb.tasks.state.hold_label_lists` speeds up).
    """
    _, shuffled, selected = task._undersample_data(train, experiment, order)
    return shuffled, selected


def multilabel_samples(task, labels: list[list[Any]]) -> list[int]:
    """The training rows of one of mteb's multilabel classification experiments: what
    ``AbsTaskMultilabelClassification._evaluate_subset`` draws with ``_undersample_data_indices(labels,
    samples_per_label, None)``, rows kept until each label has ``samples_per_label`` examples. Unlike single-label
    undersampling it shuffles with the task's own ``np_rng``, advancing it: each call draws the next experiment's
    sample, as mteb's successive experiments (and subsets, and splits) do."""
    indices, _ = task._undersample_data_indices(labels, task.samples_per_label, None)
    return indices


def multilabel_eval_rows(task, rows, split: str):
    """The evaluation rows mteb's multilabel classification scores: the whole split, or past ``task.max_eval_samples``
    rows the stratified sample of that size mteb's ``abstask._multilabel_subsampling`` draws (seeded from
    ``task.seed``, so the same rows every call)."""
    from datasets import DatasetDict
    from mteb.abstasks.abstask import _multilabel_subsampling

    if task.max_eval_samples is None or len(rows) <= task.max_eval_samples:
        return rows
    sampled = _multilabel_subsampling(
        DatasetDict({split: rows}),
        seed=task.seed,
        splits=[split],
        label=task.label_column_name,
        n_samples=task.max_eval_samples,
    )
    return sampled[split]


def retrieval_texts(rows, *, document: bool) -> list[str]:
    """The text of each corpus document (``document=True``) or query, as mteb's retrieval evaluator encodes it.

    mteb's ``_create_dataloaders._retrieval_texts`` joins a document's title and text and appends a query's
    instruction, the same function its retrieval dataloaders use.
    """
    from mteb._create_dataloaders import _retrieval_texts
    from mteb.types import PromptType

    return _retrieval_texts(rows, PromptType.document if document else PromptType.query)


def queries_with_positives(relevant_docs: Any, queries):
    """The queries mteb's retrieval evaluation keeps: those with at least one relevant document.

    mteb's ``abstasks.retrieval._filter_queries_without_positives`` returns (relevant docs, queries) and is what
    ``AbsTaskRetrieval._evaluate_subset`` applies before encoding the queries.
    """
    from mteb.abstasks.retrieval import _filter_queries_without_positives

    return _filter_queries_without_positives(relevant_docs, queries)[1]


#: What the sweep's per-layer random state assumes about mteb (``layer_mteb.tasks.state.TaskRandomState``): every
#: evaluator seeds its own generators afresh when it is created (``mteb._evaluators.evaluator.Evaluator.__init__``
#: calls the private ``mteb._set_seed._set_seed(seed)``), so the only random state that carries over from one
#: layer's evaluation to the next is the task object's own ``rng_state`` and ``np_rng``.
EVALUATORS_SEED_THEMSELVES = "mteb._evaluators.evaluator.Evaluator"


def sts_gold(task, score: float) -> float:
    """A gold STS score on the scale mteb correlates against: ``AbsTaskSTS._normalize`` (min/max score to 0..1)."""
    return task._normalize(score)


def sts_metrics(task, similarities: dict, gold: list[float]) -> dict:
    """mteb's STS metrics (``cosine_spearman``, ...) of the evaluator's similarities: ``AbsTaskSTS._calculate_scores``,
    so a labelled pick on K pairs is scored exactly as mteb scores the full split."""
    return task._calculate_scores(similarities, gold)


def pair_metrics(task, distances: dict, labels: list[int]) -> dict:
    """mteb's pair-classification metrics (``max_ap``, ...) of the evaluator's similarities and distances:
    ``AbsTaskPairClassification._compute_metrics``."""
    return task._compute_metrics(distances, labels)


def retrieval_metrics(task, results: dict[str, dict[str, float]], qrels: dict[str, dict[str, int]]) -> dict:
    """mteb's retrieval scores (``ndcg_at_10``, ``map_at_1000``, ...) of ranked ``results`` (query id -> {document
    id: similarity}, each query's top ``task._top_k``) against ``qrels``: what ``AbsTaskRetrieval._evaluate_subset``
    computes after its search, through ``RetrievalEvaluator.evaluate`` (identical ids dropped where the task says)
    and ``make_score_dict``, with the task's own ``k_values`` and ``skip_first_result``."""
    from mteb._evaluators.retrieval_evaluator import RetrievalEvaluator
    from mteb._evaluators.retrieval_metrics import make_score_dict

    result = RetrievalEvaluator.evaluate(
        None,  # a method that reads nothing of its instance (mteb marks it ``noqa: PLR6301``)
        qrels,
        results,
        task.k_values,
        ignore_identical_ids=task.ignore_identical_ids,
        skip_first_result=task.skip_first_result,
    )
    return make_score_dict(
        ndcg=result.ndcg,
        _map=result.map,
        recall=result.recall,
        precision=result.precision,
        mrr=result.mrr,
        naucs=result.naucs,
        naucs_mrr=result.naucs_mrr,
        hit_rate=result.hit_rate,
        task_scores={},
    )
