"""The one place a sweep calls mteb: one layer evaluated with ``mteb.evaluate``, and whether mteb will reuse a
stored result for it (a torn result file is set aside and recomputed, never trusted or deleted)."""

from __future__ import annotations

import logging
import warnings

import mteb
from mteb.cache import ResultCache
from mteb.results import TaskResult

from layer_mteb.common.run_tables import score_rows
from layer_mteb.evaluation.encoder import LayerEncoder
from layer_mteb.tasks.state import TaskRandomState

logger = logging.getLogger(__name__)

#: What reading a torn or hand-broken mteb result JSON raises: an I/O error, undecodable bytes or JSON
#: (``ValueError`` covers ``JSONDecodeError``, ``UnicodeDecodeError`` and pydantic's ``ValidationError``), or a
#: missing field. Anything else (a change in mteb, say) propagates: stored results are never removed on a guess.
UNREADABLE_RESULT = (OSError, ValueError, KeyError)


def evaluate_layer(encoder: LayerEncoder, task, results_cache: ResultCache | None, overwrite: bool):
    """mteb's own ``evaluate`` of one layer: a stored result is reused unless ``overwrite``. mteb's notice that a task
    is superseded by a newer one is silenced: the paper's task list names the versions it scores on purpose."""
    with warnings.catch_warnings():
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
    """One unit of a sweep: the task's random state put back (every unit starts from the state a lone
    ``mteb.evaluate`` of it sees), :func:`evaluate_layer`, and the result as score rows. The sweep scores each layer
    through it, and a layer combination (:class:`~layer_mteb.evaluation.encoder.LayerMixEncoder`) goes the same way."""
    random_state.restore(task)
    result = evaluate_layer(encoder, task, results_cache, overwrite)
    return score_rows(result.task_results[0], task=task, encoder=encoder, data=data)


def has_stored_result(results_cache: ResultCache | None, task, encoder: LayerEncoder) -> bool:
    """Whether mteb will reuse a stored result; a torn or unreadable one is moved aside to ``*.corrupt`` (with a
    warning) and recomputed."""
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
