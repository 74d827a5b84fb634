"""Layers of one task evaluated in parallel processes, results handed back in layer order.

Once the forward pass is done, a sweep's time goes to mteb's evaluators, one layer after another. Workers are
forked from the sweep after the task's vectors are in the cache, so each one reads them from the parent's memory
(copy-on-write, never written) or from the per-layer files on disk: nothing is pickled but the layer number going
out and the score rows coming back. Each worker evaluates a layer exactly as the sweep would in-process (same task
object, same per-layer preparation), so scores are bit-identical to one worker. Ctrl-C stops the workers (they ignore
the signal themselves and are terminated by the sweep) and leaves the rows of finished layers written.

A worker forked from a process that has used CUDA (or merely asked whether it is available) still sees CUDA as
available, and its first CUDA call fails ("Cannot re-initialize CUDA in forked subprocess"). mteb asks at call time
(its similarity functions move their work to ``cuda`` when it is available), so a worker's start-up hides every GPU
from everything it runs (:func:`~layer_mteb.common.gpus.hide_gpus`): evaluation in a worker is on the CPU, as it is
in the sweep itself (:func:`~layer_mteb.common.gpus.gpus_hidden`).
"""

from __future__ import annotations

import ctypes
import logging
import multiprocessing
import os
import signal
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import ExitStack, contextmanager, suppress
from typing import NamedTuple

from threadpoolctl import threadpool_limits

from layer_mteb.common.errors import UserError
from layer_mteb.common.gpus import hide_gpus
from layer_mteb.common.ranks import host_share
from layer_mteb.common.threads import torch_threads
from layer_mteb.evaluation.evaluator_warnings import LayerWarnings, counted_warnings
from layer_mteb.vectors.memory import host_available, store_bytes

logger = logging.getLogger(__name__)

ScoreLayer = Callable[[int], list[dict]]

_score_layer: ScoreLayer | None = None  # set in the sweep just before forking; read by the forked workers
_show_warnings = False  # likewise


def usable_cpus() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not Linux
        return os.cpu_count() or 1


def check_eval_workers(workers: int | None) -> int:
    """``--eval-workers``; by default one worker per usable CPU core (each evaluator runs on one thread), so no core
    runs two evaluator threads; under ``accelerate launch`` this process's share of the cores."""
    if workers is None:
        return host_share(usable_cpus())
    if workers < 1:
        raise UserError(f"--eval-workers must be a positive integer, got {workers}")
    return workers


def affordable_workers(requested: int, n_layers: int, cache) -> int:
    """At most ``requested`` and one per layer, and no more than host memory holds: a worker holds about one
    layer's vectors of the task several times over (the rows handed to mteb and the evaluator's own copies). Measured
    once the task's vectors are in the cache and in host memory (they take their part of it), and from this process's
    share of the host under ``accelerate launch``."""
    per_worker = _COPIES * store_bytes(max(len(cache), 1), 1, cache.model.hidden_size)
    return max(1, min(requested, n_layers, host_share(host_available()) // per_worker))


_COPIES = 4


class ScoredLayer(NamedTuple):
    """One layer's score rows, the seconds its evaluation took and the warnings it raised (counted in the process
    that ran it)."""

    layer: int
    rows: list[dict]
    seconds: float
    warnings: LayerWarnings


def score_layers(
    score_layer: ScoreLayer, layers: Sequence[int], workers: int, show_warnings: bool = False
) -> Iterator[ScoredLayer]:
    """A :class:`ScoredLayer` for each of ``layers``, in that order; ``workers`` > 1 evaluates them in forked
    processes. Warnings are counted (:func:`~.evaluator_warnings.counted_warnings`), and shown too with
    ``show_warnings``.

    ``score_layer`` must not need anything a forked child lacks (a CUDA context, open GPU tensors): the sweep moves
    the task's vectors to host memory before asking for more than one worker.
    """
    workers = min(workers, len(layers))
    if workers <= 1 or "fork" not in multiprocessing.get_all_start_methods():
        for layer in layers:
            with one_thread():
                result = _timed(score_layer, layer, show_warnings)
            yield ScoredLayer(layer, *result)
        return
    global _score_layer, _show_warnings
    _score_layer, _show_warnings = score_layer, show_warnings
    pool = multiprocessing.get_context("fork").Pool(workers, initializer=_start_worker)
    try:
        for layer, result in zip(layers, pool.imap(_run, layers), strict=True):
            yield ScoredLayer(layer, *result)
        pool.close()
    except BaseException:  # Ctrl-C or a failing layer: stop every worker before passing it on
        pool.terminate()
        raise
    finally:
        pool.join()
        _score_layer = None


@contextmanager
def one_thread() -> Iterator[None]:
    """Evaluators on one BLAS/OpenMP and torch thread, whatever the number of workers.

    A logistic regression or similarity matrix can differ in its last bits with the number of BLAS threads (and
    the difference grows over solver iterations), so every evaluation runs on one thread: scores are then the same
    for any ``--eval-workers``, and parallelism comes from the workers, not from threads fighting over cores.
    """
    with torch_threads(1), threadpool_limits(1):
        yield


#: Held open for a worker's whole life: a forked worker drops to one thread before its first torch op and never
#: grows the pool back (torch's OpenMP pool, inherited from the parent, can hang a child that sets more threads).
_WORKER_THREADS = ExitStack()


def _start_worker() -> None:
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # the sweep decides when workers stop
    _die_with_parent()
    hide_gpus()
    _WORKER_THREADS.enter_context(one_thread())


def _die_with_parent() -> None:
    """A sweep killed with SIGKILL takes its workers with it (Linux), so none writes a result after a rerun began."""
    # not Linux: no prctl; workers still stop once the sweep's pipe to them closes
    with suppress(OSError, AttributeError):
        ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_PDEATHSIG, signal.SIGKILL)


_PR_SET_PDEATHSIG = 1


def _run(layer: int) -> tuple[list[dict], float, LayerWarnings]:
    assert _score_layer is not None
    return _timed(_score_layer, layer, _show_warnings)


def _timed(score_layer: ScoreLayer, layer: int, show_warnings: bool) -> tuple[list[dict], float, LayerWarnings]:
    start = time.perf_counter()
    with counted_warnings(show_warnings) as seen:
        rows = score_layer(layer)
    return rows, time.perf_counter() - start, dict(seen)


def time_record(phases: dict[str, float], wall: float, eval_workers: int, texts_encoded: int) -> dict[str, object]:
    """A task's time breakdown for its ``run.json`` entry.

    ``seconds``: the task's wall time and each phase (``evaluators`` summed over layers, whichever process ran
    them). ``forward_texts_per_second``: texts encoded per second in the model. ``overhead_ratio``: wall time over
    the time the two unavoidable parts would take back to back, the model's forward and the evaluators spread over
    the cores that ran them (1.0 = nothing else costs time); None when nothing was encoded or evaluated.
    ``peak_rss_bytes``: the process's peak so far (and of its finished evaluation workers), not this task's alone.
    """
    from layer_mteb.common.timing import peak_rss_bytes  # loads torch: not before the command line's checks

    seconds = {"wall": wall, **phases}
    forward, evaluators = phases.get("forward", 0.0), phases.get("evaluators", 0.0)
    bare = forward + evaluators / max(1, min(eval_workers, usable_cpus()))
    return {
        "seconds": {phase: round(value, 3) for phase, value in seconds.items()},
        "forward_texts_per_second": round(texts_encoded / forward, 1) if forward > 0 and texts_encoded else None,
        "overhead_ratio": round(wall / bare, 3) if bare > 0 else None,
        "peak_rss_bytes": peak_rss_bytes(),
    }
