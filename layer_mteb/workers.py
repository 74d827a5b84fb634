"""Layers of one task evaluated in parallel processes, results handed back in layer order.

Once the forward pass is done, a sweep's time goes to mteb's evaluators, one layer after another. Workers are
forked from the sweep after the task's vectors are in the cache, so each one reads them from the parent's memory
(copy-on-write, never written) or from the per-layer files on disk: nothing is pickled but the layer number going
out and the score rows coming back. Each worker evaluates a layer exactly as the sweep would in-process (same task
object, same per-layer preparation), so scores are bit-identical to one worker. Ctrl-C stops the workers (they ignore
the signal themselves and are terminated by the sweep) and leaves the rows of finished layers written.
"""

from __future__ import annotations

import logging
import multiprocessing
import os
import signal
from collections.abc import Callable, Iterator, Sequence

import torch
from threadpoolctl import threadpool_limits

from layer_mteb.errors import UserError

logger = logging.getLogger(__name__)

ScoreLayer = Callable[[int], list[dict]]

_score_layer: ScoreLayer | None = None  # set in the sweep just before forking; read by the forked workers


def usable_cpus() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not Linux
        return os.cpu_count() or 1


def default_eval_workers() -> int:
    """One worker per usable CPU core, each evaluator on one thread: no core runs two BLAS/torch threads."""
    return usable_cpus()


def check_eval_workers(workers: int | None) -> int:
    if workers is None:
        return default_eval_workers()
    if workers < 1:
        raise UserError(f"--eval-workers must be a positive integer, got {workers}")
    return workers


def score_layers(score_layer: ScoreLayer, layers: Sequence[int], workers: int) -> Iterator[tuple[int, list[dict]]]:
    """(layer, score rows) for each of ``layers``, in that order; ``workers`` > 1 evaluates them in forked processes.

    ``score_layer`` must not need anything a forked child lacks (a CUDA context, open GPU tensors): the sweep moves
    the task's vectors to host memory before asking for more than one worker.
    """
    workers = min(workers, len(layers))
    if workers <= 1 or "fork" not in multiprocessing.get_all_start_methods():
        for layer in layers:
            yield layer, score_layer(layer)
        return
    global _score_layer
    _score_layer = score_layer
    threads = max(1, usable_cpus() // workers)
    pool = multiprocessing.get_context("fork").Pool(workers, initializer=_start_worker, initargs=(threads,))
    try:
        yield from zip(layers, pool.imap(_run, layers), strict=True)
        pool.close()
    except BaseException:  # Ctrl-C or a failing layer: stop every worker before passing it on
        pool.terminate()
        raise
    finally:
        pool.join()
        _score_layer = None


def _start_worker(threads: int) -> None:
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # the sweep decides when workers stop
    torch.set_num_threads(threads)
    threadpool_limits(threads)


def _run(layer: int) -> list[dict]:
    assert _score_layer is not None
    return _score_layer(layer)
