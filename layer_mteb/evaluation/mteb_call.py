"""What a sweep asks of mteb for one task: the texts its evaluator will encode, known ahead; one layer evaluated with
``mteb.evaluate``; and whether a stored result will be reused (a torn one is set aside, never trusted or deleted).

mteb encodes a task in several calls (STS: ``sentence1`` then ``sentence2``; retrieval: corpus then queries); filling
the cache once from their union, read as mteb's evaluators read it, sorts all texts together so short ones never ride
in batches padded to long ones. Evaluators that encode a random sample (v2 clustering) keep the lazy path (None).
"""

from __future__ import annotations

import logging
import warnings

import mteb
from mteb.abstasks.aggregated_task import AbsTaskAggregate
from mteb.cache import ResultCache
from mteb.results import TaskResult

from layer_mteb.common.gpus import gpus_hidden
from layer_mteb.common.scores import AGGREGATE_COLUMN, main_scores
from layer_mteb.common.table import layer_columns
from layer_mteb.evaluation.encoder import LayerEncoder
from layer_mteb.tasks.task_types import Prompter, task_type_of

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
    encoder: LayerEncoder, task, results_cache: ResultCache | None, overwrite: bool, data: str
) -> list[dict]:
    """One unit of a sweep: the layer's score rows (from the task's state as the caller leaves it: a lone run's).

    An aggregate task runs as ``mteb.evaluate`` runs one: each subtask evaluated and stored, their results combined
    and stored; the subtasks' rows (naming the aggregate, so means over tasks leave them out), then the aggregate's."""
    if not isinstance(task, AbsTaskAggregate):
        result = evaluate_layer(encoder, task, results_cache, overwrite)
        return score_rows(result.task_results[0], task=task, encoder=encoder, data=data)
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
    prompt first, or None when not known ahead (its row of ``tasks.task_types.TASK_TYPES`` walks none); the task's
    random state is left as it was."""
    if task.metadata.modalities != ["text"]:
        return None
    prompt = prompt or (lambda task_metadata, prompt_type: "")
    if isinstance(task, AbsTaskAggregate):  # mteb encodes each subtask's texts in turn
        parts = [texts_mteb_encodes(subtask, prompt) for subtask in task.tasks]
        texts = None if any(part is None for part in parts) else [t for part in parts for t in part]
    else:
        kind = task_type_of(task)
        texts = kind.texts(task, prompt) if kind is not None and kind.texts is not None else None
    return None if texts is None else list(dict.fromkeys(t for t in texts if isinstance(t, str)))
