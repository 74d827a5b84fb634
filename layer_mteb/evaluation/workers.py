"""Layers of one task evaluated in forked processes, results handed back in layer order.

Workers fork once the task's vectors are in the cache and read them from the parent's memory or the layer files: only
layer numbers and score rows are pickled, and scores are bit-identical to one worker. Ctrl-C keeps finished rows.
A worker hides every GPU (:func:`~layer_mteb.common.gpus.hide_gpus`): CUDA fails in a fork, and mteb's similarity
functions move to ``cuda`` whenever it looks available.
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
    """The CPU cores this process may run on."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not Linux
        return os.cpu_count() or 1


def check_eval_workers(workers: int | None) -> int:
    """``--eval-workers``; by default one per usable core (this process's share under ``accelerate launch``)."""
    if workers is None:
        return host_share(usable_cpus())
    if workers < 1:
        raise UserError(f"--eval-workers must be a positive integer, got {workers}")
    return workers


def affordable_workers(requested: int, n_layers: int, cache) -> int:
    """At most ``requested``, one per layer, and what this process's share of host memory holds, measured with the
    vectors in it: a worker holds a layer's vectors ``_COPIES`` times (mteb's rows and the evaluator's copies)."""
    per_worker = _COPIES * store_bytes(max(len(cache), 1), 1, cache.model.hidden_size)
    return max(1, min(requested, n_layers, host_share(host_available()) // per_worker))


_COPIES = 4


class ScoredLayer(NamedTuple):
    """One layer's score rows, evaluation seconds and the warnings it raised."""

    layer: int
    rows: list[dict]
    seconds: float
    warnings: LayerWarnings


def score_layers(
    score_layer: ScoreLayer, layers: Sequence[int], workers: int, show_warnings: bool = False
) -> Iterator[ScoredLayer]:
    """A :class:`ScoredLayer` per layer, in order; ``workers`` > 1 forks. ``score_layer`` must not need what a fork
    lacks (a CUDA context, GPU tensors): the sweep moves the vectors to the host first."""
    workers = min(workers, len(layers))
    if workers <= 1 or "fork" not in multiprocessing.get_all_start_methods():
        for layer in layers:
            with one_thread():
                yield _timed(score_layer, layer, show_warnings)
        return
    global _score_layer, _show_warnings
    _score_layer, _show_warnings = score_layer, show_warnings
    pool = multiprocessing.get_context("fork").Pool(workers, initializer=_start_worker)
    try:
        yield from pool.imap(_run, layers)
        pool.close()
    except BaseException:  # Ctrl-C or a failing layer: stop every worker before passing it on
        pool.terminate()
        raise
    finally:
        pool.join()
        _score_layer = None


@contextmanager
def one_thread() -> Iterator[None]:
    """Evaluators on one BLAS/OpenMP and torch thread: results can differ in their last bits with the thread count,
    so scores are then the same for any ``--eval-workers``."""
    with torch_threads(1), threadpool_limits(1):
        yield


#: Held open for a worker's life: torch's inherited OpenMP pool can hang a child that sets more threads.
_WORKER_THREADS = ExitStack()


def _start_worker() -> None:
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # the sweep decides when workers stop
    _die_with_parent()
    hide_gpus()
    _WORKER_THREADS.enter_context(one_thread())


def _die_with_parent() -> None:
    """A sweep killed with SIGKILL takes its workers with it (Linux; elsewhere they stop when the pipe closes)."""
    with suppress(OSError, AttributeError):
        ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_PDEATHSIG, signal.SIGKILL)


_PR_SET_PDEATHSIG = 1


def _run(layer: int) -> ScoredLayer:
    assert _score_layer is not None
    return _timed(_score_layer, layer, _show_warnings)


def _timed(score_layer: ScoreLayer, layer: int, show_warnings: bool) -> ScoredLayer:
    start = time.perf_counter()
    with counted_warnings(show_warnings) as seen:
        rows = score_layer(layer)
    return ScoredLayer(layer, rows, time.perf_counter() - start, dict(seen))


def time_record(phases: dict[str, float], wall: float, eval_workers: int, texts_encoded: int) -> dict[str, object]:
    """A task's time breakdown for ``run.json``: ``seconds`` per phase, forward throughput, ``overhead_ratio`` (wall
    over forward plus evaluators spread over their cores; 1.0: nothing else costs) and the process's peak RSS."""
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
