"""What a sweep asks of mteb for one task: the texts its evaluator will encode, known ahead; one layer evaluated with
``mteb.evaluate``; and whether a stored result will be reused (a torn one is set aside, never trusted or deleted).

mteb encodes a task in several calls (STS: ``sentence1`` then ``sentence2``; retrieval: corpus then queries); filling
the cache once from their union, read as mteb's evaluators read it, sorts all texts together so short ones never ride
in batches padded to long ones. Evaluators that encode a random sample (v2 clustering) keep the lazy path (None).
"""

from __future__ import annotations

import copy
import logging
import warnings
from collections.abc import Callable, Iterable, Iterator
from typing import Any

import mteb
from datasets import Dataset
from mteb.abstasks.aggregated_task import AbsTaskAggregate
from mteb.abstasks.classification import AbsTaskClassification
from mteb.abstasks.multilabel_classification import AbsTaskMultilabelClassification
from mteb.abstasks.pair_classification import AbsTaskPairClassification
from mteb.abstasks.retrieval import AbsTaskRetrieval
from mteb.abstasks.sts import AbsTaskSTS
from mteb.cache import ResultCache
from mteb.results import TaskResult
from mteb.types import PromptType

from layer_mteb.common.gpus import gpus_hidden
from layer_mteb.common.run_folder import AGGREGATE_COLUMN, layer_columns, main_scores
from layer_mteb.evaluation.encoder import LayerEncoder
from layer_mteb.tasks.mteb_compat import (
    multilabel_eval_rows,
    multilabel_samples,
    queries_with_positives,
    retrieval_texts,
    undersample,
)
from layer_mteb.tasks.state import TaskRandomState

logger = logging.getLogger(__name__)

#: What a torn mteb result JSON raises (``ValueError`` covers JSON, Unicode and pydantic errors); anything else
#: propagates: stored results are never set aside on a guess.
UNREADABLE_RESULT = (OSError, ValueError, KeyError)


def score_rows(task_result, *, task, encoder, data: str, aggregate: str = "") -> list[dict]:
    """mteb's ``TaskResult`` for one layer -> ``scores.csv`` rows (one per split and subset); ``data``: where the
    data came from; ``aggregate``: the aggregate task ``task`` is a subtask of, if any."""
    about = {**layer_columns(encoder.model, encoder.layer), "task_type": task.metadata.type, **encoder.config.key()}
    task_about = {"task": task.metadata.name, "data": data, AGGREGATE_COLUMN: aggregate}
    return [{**about, **row, **task_about} for row in main_scores(task_result)]


def evaluate_layer(encoder: LayerEncoder, task, results_cache: ResultCache | None, overwrite: bool):
    """mteb's own ``evaluate`` of one layer, on the CPU as in a forked worker; a stored result is reused unless
    ``overwrite``. "Superseded" notices are silenced: the paper's task list names its versions on purpose."""
    with warnings.catch_warnings(), gpus_hidden():
        warnings.filterwarnings("ignore", message=".*is superseded by.*")
        return mteb.evaluate(
            encoder,
            task,
            cache=results_cache,
            overwrite_strategy="always" if overwrite else "only-missing",
            show_progress_bar=False,
        )


def score_encoder(
    encoder: LayerEncoder,
    task,
    random_state: TaskRandomState,
    results_cache: ResultCache | None,
    overwrite: bool,
    data: str,
) -> list[dict]:
    """One unit of a sweep (and of ``scripts/layer_mix.py``): from the state a lone ``mteb.evaluate`` sees, the
    layer's score rows."""
    random_state.restore(task)
    if isinstance(task, AbsTaskAggregate):
        return _score_aggregate(encoder, task, results_cache, overwrite, data)
    result = evaluate_layer(encoder, task, results_cache, overwrite)
    return score_rows(result.task_results[0], task=task, encoder=encoder, data=data)


def _score_aggregate(
    encoder: LayerEncoder, task: AbsTaskAggregate, results_cache: ResultCache | None, overwrite: bool, data: str
) -> list[dict]:
    """An aggregate task as ``mteb.evaluate`` runs one: each subtask evaluated and stored, their results combined
    and stored; the subtasks' rows (naming the aggregate, so means over tasks leave them out), then the aggregate's."""
    results = [evaluate_layer(encoder, subtask, results_cache, overwrite).task_results[0] for subtask in task.tasks]
    combined = task.combine_task_results(results)
    if results_cache is not None:
        results_cache.save_to_cache(combined, encoder.mteb_model_meta)
    rows = [
        row
        for subtask, result in zip(task.tasks, results, strict=True)
        for row in score_rows(result, task=subtask, encoder=encoder, data=data, aggregate=task.metadata.name)
    ]
    return rows + score_rows(combined, task=task, encoder=encoder, data=data)


def has_stored_result(results_cache: ResultCache | None, task, encoder: LayerEncoder) -> bool:
    """Whether mteb will reuse a stored result; an unreadable one is moved aside to ``*.corrupt`` and recomputed."""
    if results_cache is None:
        return False
    path = results_cache.get_task_result_path(task.metadata.name, encoder.mteb_model_meta)
    if not path.exists():
        return False
    try:
        TaskResult.from_disk(path)
    except UNREADABLE_RESULT as err:
        aside = path.with_name(path.name + ".corrupt")
        path.replace(aside)
        logger.warning(
            "unreadable result %s (%s: %s) moved to %s; it will be recomputed",
            path,
            type(err).__name__,
            err,
            aside.name,
        )
        return False
    return True


def texts_mteb_encodes(task, prompt: Prompter | None = None) -> list[str] | None:
    """The unique texts mteb's evaluator of ``task`` (data loaded) encodes, in first-seen order and with ``prompt``'s
    prompt first, or None when not known ahead; the task's random state is left as it was."""
    if task.metadata.modalities != ["text"]:
        return None
    prompt = prompt or _no_prompt
    if isinstance(task, AbsTaskAggregate):  # mteb encodes each subtask's texts in turn
        parts = [texts_mteb_encodes(subtask, prompt) for subtask in task.tasks]
        texts = None if any(part is None for part in parts) else [t for part in parts for t in part]
    elif isinstance(task, AbsTaskSTS):
        columns = task.column_names
        kinds = (task.input1_prompt_type, task.input2_prompt_type)
        texts = _columns(task, columns, kinds, prompt) if all(isinstance(c, str) for c in columns) else None
    elif isinstance(task, AbsTaskPairClassification):
        columns = (task.input1_column_name, task.input2_column_name)
        kinds = (task.input1_prompt_type, task.input2_prompt_type)
        ok = all(isinstance(c, str) for c in columns)
        texts = _columns(task, columns, kinds, prompt, v1_rows=True) if ok else None
    elif isinstance(task, AbsTaskMultilabelClassification):  # a subclass of the next, with lists of labels
        text = prompt(task.metadata, None)
        texts = _prefixed(text, _multilabel_texts(task)) if isinstance(task.input_column_name, str) else None
    elif isinstance(task, AbsTaskClassification):
        text = prompt(task.metadata, None)
        texts = _prefixed(text, _classification(task)) if isinstance(task.input_column_name, str) else None
    elif isinstance(task, AbsTaskRetrieval):
        texts = _retrieval(task, prompt)
    else:
        return None
    return None if texts is None else list(dict.fromkeys(_strings(texts)))


Prompter = Callable[[Any, Any], str]


def _no_prompt(task_metadata: Any, prompt_type: Any) -> str:
    return ""


def _prefixed(prompt: str, texts: Iterable[object] | None) -> Iterator[object] | None:
    if texts is None:
        return None
    return (prompt + t if isinstance(t, str) else t for t in texts)


def _splits(task) -> Iterator[tuple[str, object]]:
    """(split, data) for every subset and evaluation split mteb's ``evaluate`` visits."""
    subsets = task.hf_subsets if task.hf_subsets is not None else list(task.dataset)
    for split in task.eval_splits:
        for subset in subsets:
            data = task.dataset if subset not in task.dataset and subset == "default" else task.dataset[subset]
            yield split, data


def _columns(task, columns, kinds, prompt: Prompter, *, v1_rows: bool = False) -> Iterator[object]:
    prefixes = [prompt(task.metadata, kind) for kind in kinds]  # each column is encoded as its own prompt type
    for split, data in _splits(task):
        rows = data[split]
        if v1_rows and len(rows) == 1:  # mteb's v1 layout: all pairs in one row (see AbsTaskPairClassification)
            rows = Dataset.from_dict(rows[0])
        for column, prefix in zip(columns, prefixes, strict=True):
            yield from _prefixed(prefix, rows[column])


def _classification(task) -> Iterator[str] | None:
    return None if task.is_cross_validation else _classification_texts(task)


def _classification_texts(task) -> Iterator[str]:
    for split, data in _splits(task):
        train = data[task.train_split]
        sample, selected = None, set()  # the same undersampling mteb runs
        for experiment in range(task.n_experiments):
            sample, picked = undersample(task, train, experiment, sample)
            selected.update(picked)
        yield from train.select(sorted(selected))[task.input_column_name]
        yield from data[split][task.input_column_name]


def _multilabel_texts(task) -> list[str]:
    """The training samples and evaluation rows mteb's multilabel evaluator encodes, in its order; the task's
    ``np_rng`` they are drawn from is put back."""
    saved = copy.deepcopy(task.np_rng)
    texts: list[str] = []
    try:
        for split, data in _splits(task):
            train = data[task.train_split]
            labels = train[task.label_column_name]
            picked: set[int] = set()
            for _ in range(task.n_experiments):
                picked.update(multilabel_samples(task, labels))
            texts += train.select(sorted(picked))[task.input_column_name]
            texts += multilabel_eval_rows(task, data[split], split)[task.input_column_name]
    finally:
        task.np_rng = saved
    return texts


def _retrieval(task, prompt: Prompter) -> Iterator[object]:
    document, query = prompt(task.metadata, PromptType.document), prompt(task.metadata, PromptType.query)
    for split, data in _splits(task):
        rows = data[split]
        yield from _prefixed(document, retrieval_texts(rows["corpus"], document=True))
        queries = queries_with_positives(rows["relevant_docs"], rows["queries"])
        yield from _prefixed(query, retrieval_texts(queries, document=False))


def _strings(texts: Iterable[object]) -> Iterator[str]:
    return (t for t in texts if isinstance(t, str))
