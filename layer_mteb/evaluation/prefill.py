"""The texts a task's evaluator will encode, known before mteb's first ``encode`` call.

mteb's evaluators encode a task in several calls (STS: ``sentence1``, then ``sentence2``; classification: the
training sample, then the evaluation split; retrieval: the corpus, then the queries). Filling the all-layer cache
from each call sorts each call's texts on their own; filling it once from the union sorts them all together, so
short texts of one column no longer ride in batches padded to the long texts of the other. The union is read here
the way mteb's evaluators read it (same subsets, splits, columns, training sample, document text); task types
whose evaluator encodes a random sample (v2 clustering) or that are not listed keep the lazy path (None).
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator

from datasets import Dataset
from mteb.abstasks.classification import AbsTaskClassification
from mteb.abstasks.pair_classification import AbsTaskPairClassification
from mteb.abstasks.retrieval import AbsTaskRetrieval
from mteb.abstasks.sts import AbsTaskSTS


def texts_mteb_encodes(task) -> list[str] | None:
    """The unique texts mteb's evaluator of ``task`` encodes (in first-seen order), or None when not known ahead.

    ``task`` must have its data loaded.
    """
    if task.metadata.modalities != ["text"]:
        return None
    if isinstance(task, AbsTaskSTS):
        columns = task.column_names
        texts = _columns(task, columns) if all(isinstance(c, str) for c in columns) else None
    elif isinstance(task, AbsTaskPairClassification):
        columns = (task.input1_column_name, task.input2_column_name)
        texts = _columns(task, columns, v1_rows=True) if all(isinstance(c, str) for c in columns) else None
    elif isinstance(task, AbsTaskClassification):
        known = isinstance(task.input_column_name, str) and not task.is_cross_validation
        texts = _classification_texts(task) if known else None
    elif isinstance(task, AbsTaskRetrieval):
        texts = _retrieval(task)
    else:
        return None
    return None if texts is None else list(dict.fromkeys(t for t in texts if isinstance(t, str)))


def _splits(task) -> Iterator[tuple[str, object]]:
    """(split, data) for every subset and evaluation split mteb's ``evaluate`` visits."""
    subsets = task.hf_subsets if task.hf_subsets is not None else list(task.dataset)
    for split in task.eval_splits:
        for subset in subsets:
            data = task.dataset if subset not in task.dataset and subset == "default" else task.dataset[subset]
            yield split, data


def _columns(task, columns: Iterable[str], *, v1_rows: bool = False) -> Iterator[str]:
    for split, data in _splits(task):
        rows = data[split]
        if v1_rows and len(rows) == 1:  # mteb's v1 layout: all pairs in one row (see AbsTaskPairClassification)
            rows = Dataset.from_dict(rows[0])
        for column in columns:
            yield from rows[column]


def _classification_texts(task) -> Iterator[str]:
    for split, data in _splits(task):
        train = data[task.train_split]
        # the same undersampling mteb runs (its RandomState is seeded from task.seed on every call)
        sample, selected = None, set()
        for experiment in range(task.n_experiments):
            _, sample, picked = task._undersample_data(train, experiment, sample)
            selected.update(picked)
        yield from train.select(sorted(selected))[task.input_column_name]
        yield from data[split][task.input_column_name]


def _retrieval(task) -> Iterator[str]:
    from mteb._create_dataloaders import _retrieval_texts
    from mteb.abstasks.retrieval import _filter_queries_without_positives
    from mteb.types import PromptType

    for split, data in _splits(task):
        rows = data[split]
        _, queries = _filter_queries_without_positives(rows["relevant_docs"], rows["queries"])
        yield from _retrieval_texts(rows["corpus"], PromptType.document)
        yield from _retrieval_texts(queries, PromptType.query)
