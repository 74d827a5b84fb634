"""Every private mteb name layer_mteb relies on, here so that an mteb upgrade breaks one module.

``tests/tasks/test_mteb_compat.py`` guards each (name, signature, output on mteb's mock tasks), so a change fails
loudly instead of a sweep silently encoding other texts or scoring from another state.
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
    """(shuffled order, selected rows) of experiment ``experiment``'s classification training sample, continuing
    from the previous ``order`` (None: the first): ``_undersample_data`` seeds itself from ``task.seed`` on each call,
    so these are exactly the rows mteb's evaluator selects."""
    _, shuffled, selected = task._undersample_data(train, experiment, order)
    return shuffled, selected


def multilabel_samples(task, labels: list[list[Any]]) -> list[int]:
    """The training rows of the next multilabel experiment (``_undersample_data_indices``): it shuffles with the
    task's ``np_rng``, advancing it as mteb's successive experiments do."""
    indices, _ = task._undersample_data_indices(labels, task.samples_per_label, None)
    return indices


def multilabel_eval_rows(task, rows, split: str):
    """The rows mteb's multilabel classification scores: the split, or past ``task.max_eval_samples`` the sample
    ``_multilabel_subsampling`` draws (seeded from ``task.seed``)."""
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
    """Each document's (``document=True``) or query's text as mteb's retrieval dataloaders build it."""
    from mteb._create_dataloaders import _retrieval_texts
    from mteb.types import PromptType

    return _retrieval_texts(rows, PromptType.document if document else PromptType.query)


def queries_with_positives(relevant_docs: Any, queries):
    """The queries mteb's retrieval evaluation keeps (``_filter_queries_without_positives``): those with a relevant
    document."""
    from mteb.abstasks.retrieval import _filter_queries_without_positives

    return _filter_queries_without_positives(relevant_docs, queries)[1]


#: Every evaluator seeds itself when created (``Evaluator.__init__`` calls ``_set_seed``), so only the task's own
#: ``rng_state`` and ``np_rng`` carry over between layers (what ``TaskRandomState`` restores).
EVALUATORS_SEED_THEMSELVES = "mteb._evaluators.evaluator.Evaluator"


def sts_gold(task, score: float) -> float:
    """A gold STS score on the scale mteb correlates against: ``AbsTaskSTS._normalize`` (min/max score to 0..1)."""
    return task._normalize(score)


def sts_metrics(task, similarities: dict, gold: list[float]) -> dict:
    """mteb's STS metrics (``AbsTaskSTS._calculate_scores``), so K labelled pairs are scored as mteb scores a split."""
    return task._calculate_scores(similarities, gold)


def pair_metrics(task, distances: dict, labels: list[int]) -> dict:
    """mteb's pair-classification metrics (``AbsTaskPairClassification._compute_metrics``)."""
    return task._compute_metrics(distances, labels)


def retrieval_metrics(task, results: dict[str, dict[str, float]], qrels: dict[str, dict[str, int]]) -> dict:
    """mteb's retrieval scores (``ndcg_at_10``, ...) of ranked ``results`` (query -> {document: similarity}) against
    ``qrels``, computed as ``AbsTaskRetrieval._evaluate_subset`` does after its search."""
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
