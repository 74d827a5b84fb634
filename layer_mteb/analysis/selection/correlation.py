"""How well each metric tracks the real score across layers: distance correlation (any dependence, 0…1), Spearman ρ
and Kendall τ (monotone association, −1…1), each with a seeded permutation p-value.

One point per layer: the metric of that layer against its score averaged over tasks (``task == "mean"``) and
against each task's score. A task's own-text metrics are correlated with that task only, and, averaged over the
tasks that have them, with the mean score over those tasks (``texts == "own texts"``). The one correlation
pipeline: ``layer-mteb correlate`` and ``layer-mteb reproduce`` both call :func:`correlate`.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from pathlib import Path
from typing import Literal, TypedDict, get_args

import numpy as np
import pandas as pd

from layer_mteb.analysis.rules import MIN_LAYERS
from layer_mteb.analysis.runs.folders import load_run
from layer_mteb.analysis.selection.curves import MEAN, metric_curves, score_curves, sources_for
from layer_mteb.common.errors import UserError
from layer_mteb.common.run_folder import CORRELATION_FILE, RunFolder
from layer_mteb.common.table import Table
from layer_mteb.metrics import METRICS_TABLE
from layer_mteb.metrics.texts import task_of_label

logger = logging.getLogger(__name__)

Method = Literal["dcor", "spearman", "kendall"]
METHODS: tuple[str, ...] = get_args(Method)
#: ``texts`` of the rows correlating the mean score with a metric averaged over each task's own texts
OWN_TEXTS = "own texts"


class CorrelationRow(TypedDict):
    """One row of ``correlation.csv``: a metric against a task's (or the ``mean``) score across ``n_layers`` layers."""

    model: str
    metric: str
    texts: str
    arithmetic: str
    task: str
    method: str
    statistic: float
    p_value: float
    n_layers: int


CORRELATION_COLUMNS = list(CorrelationRow.__annotations__)
CORRELATION_TABLE = Table(
    ["model", "metric", "task", "method"],
    "run `layer-mteb correlate --run {folder}`",
    key=("model", "metric", "texts", "arithmetic", "task", "method"),
    file=CORRELATION_FILE,
)


def association(x: np.ndarray, y: np.ndarray, method: Method) -> float:
    """The statistic alone: ``dcor.distance_correlation``, ``scipy.stats.spearmanr`` or ``kendalltau``."""
    x, y = np.asarray(x, dtype=float), np.asarray(y, dtype=float)
    if method == "dcor":
        import dcor  # slow to import (numba); only when asked for

        return float(dcor.distance_correlation(x, y))
    from scipy import stats

    rank_test = {"spearman": stats.spearmanr, "kendall": stats.kendalltau}.get(method)
    if rank_test is None:
        raise UserError(f"--method must be one of {', '.join(METHODS)} or all; got {method!r}")
    return float(rank_test(x, y).statistic)


def permutation_test(
    x: np.ndarray, y: np.ndarray, method: Method, *, n_permutations: int = 1000, seed: int = 0
) -> tuple[float, float]:
    """(statistic, p-value): the share of seeded shuffles of ``y`` at least as extreme, (1 + hits) / (1 + n).

    Two-sided for ρ and τ (|statistic|); one-sided for dCor, which is never negative (``dcor``'s own
    permutation test). The shuffled ρ and τ are computed for all permutations at once, in numpy.
    """
    x, y = np.asarray(x, dtype=float), np.asarray(y, dtype=float)
    observed = association(x, y, method)
    if method == "dcor":
        import dcor

        test = dcor.independence.distance_covariance_test(x, y, num_resamples=n_permutations, random_state=seed)
        return observed, float(test.pvalue)
    rng = np.random.default_rng(seed)
    order = rng.permuted(np.tile(np.arange(len(y)), (n_permutations, 1)), axis=1)
    null = _spearman_null(x, y, order) if method == "spearman" else _kendall_null(x, y, order)
    hits = int((np.abs(null) >= abs(observed) - 1e-9).sum())
    return observed, (1 + hits) / (1 + n_permutations)


def _spearman_null(x: np.ndarray, y: np.ndarray, order: np.ndarray) -> np.ndarray:
    """Spearman ρ of x with every row-permutation of y: Pearson correlation of (average) ranks."""
    from scipy.stats import rankdata

    rx = rankdata(x) - rankdata(x).mean()
    ry = rankdata(y)[order]
    ry = ry - ry.mean(axis=1, keepdims=True)
    return (ry @ rx) / (np.linalg.norm(rx) * np.linalg.norm(ry, axis=1))


def _kendall_null(x: np.ndarray, y: np.ndarray, order: np.ndarray) -> np.ndarray:
    """Kendall τ-b of x with every row-permutation of y: (concordant − discordant) / √(untied_x · untied_y)."""
    i, j = np.triu_indices(len(x), k=1)
    sx = np.sign(x[i] - x[j])
    shuffled = y[order]
    sy = np.sign(shuffled[:, i] - shuffled[:, j])
    return (sy @ sx) / np.sqrt(np.count_nonzero(sx) * np.count_nonzero(sy, axis=1))


def correlate(
    run: str | Path | RunFolder | None = None,
    *,
    scores: pd.DataFrame | None = None,
    metrics: pd.DataFrame | None = None,
    method: Method | Literal["all"] = "all",
    n_permutations: int = 1000,
    seed: int = 0,
    metric_readout: str = "auto",
    arithmetic: str | None = None,
) -> pd.DataFrame:
    """One row per (metric, text source, task or mean, method). With ``run`` (a path, or the command's
    :class:`RunFolder`, whose tables are then read once), writes ``run/correlation.csv``.

    Metrics are paired with scores as in selection (``metric_readout``, default the paper's: raw-stream metrics;
    ``arithmetic``, default the one ``metrics.csv`` holds, the paper's where it holds both); each row names it.

    Pairs with fewer than :data:`~.rules.MIN_LAYERS` layers, or a metric or score that does not vary across layers
    (correlation undefined), are skipped with a warning rather than written as NaN.
    """
    methods = _methods(method, n_permutations)
    folder = None if run is None else RunFolder.of(run)
    if folder is not None:
        scores = folder.scores() if scores is None else scores
        metrics = folder.read(METRICS_TABLE) if metrics is None else metrics
    scores, metrics = load_run(folder, scores, metrics, metric_readout, arithmetic)
    used = str(metrics["arithmetic"].iloc[0]) if not metrics.empty else "paper"
    rows: list[CorrelationRow] = []
    for model, model_scores in scores.groupby("model", sort=False):
        skipped = []
        for metric, texts, task, values, score in _pairs(model_scores, metrics[metrics["model"] == model]):
            layers = values.dropna().index.intersection(score.dropna().index)
            x, y = values[layers].to_numpy(), score[layers].to_numpy()
            if len(layers) < MIN_LAYERS or np.ptp(x) == 0 or np.ptp(y) == 0:
                skipped.append(f"{metric} ({texts}) vs {task}")
                continue
            key = {"model": model, "metric": metric, "texts": texts, "arithmetic": used, "task": task}
            for name in methods:
                statistic, p_value = permutation_test(x, y, name, n_permutations=n_permutations, seed=seed)
                rows.append(CorrelationRow(**key, method=name, statistic=statistic, p_value=p_value, n_layers=len(x)))
        if skipped:
            listed = "; ".join([*skipped[:3], *(["..."] if len(skipped) > 3 else [])])
            message = "%s: %d pair(s) skipped, fewer than %d layers or no variation (%s)"
            logger.warning(message, model, len(skipped), MIN_LAYERS, listed)
    if not rows:
        raise UserError(f"nothing to correlate: scores and metrics share fewer than {MIN_LAYERS} layers that vary")
    frame = pd.DataFrame(rows, columns=CORRELATION_COLUMNS)
    if folder is not None:
        folder.write_table(CORRELATION_TABLE.file, frame)
    return frame


def _methods(method: str, n_permutations: int) -> list[str]:
    """The methods ``method`` names (``all``: every one), the options checked."""
    methods = list(METHODS) if method == "all" else [method]
    for name in methods:
        if name not in METHODS:
            raise UserError(f"--method must be one of {', '.join(METHODS)} or all; got {name!r}")
    if n_permutations < 1:
        raise UserError(f"--permutations must be at least 1, got {n_permutations}")
    return methods


def _pairs(scores: pd.DataFrame, metrics: pd.DataFrame) -> Iterator[tuple[str, str, str, pd.Series, pd.Series]]:
    """(metric, texts, task, metric curve, score curve) for one model: each task (and the ``mean`` score) against
    every general source and the task's own texts; then the ``mean`` score over the tasks with own-text metrics
    against each metric averaged over those tasks' own texts (texts ``own texts``), on layers holding all of them."""
    curves = score_curves(scores)
    by_metric = metric_curves(metrics)
    all_texts = sorted({texts for _, texts in by_metric})
    for task in sorted(curves, key=lambda name: (name != MEAN, name)):
        usable = sources_for(task, all_texts)
        yield from ((m, t, task, v, curves[task]) for (m, t), v in by_metric.items() if t in usable)
    for metric in dict.fromkeys(m for m, _ in by_metric):
        own = {t: v for (m, t), v in by_metric.items() if m == metric and task_of_label(t) in curves.keys() - {MEAN}}
        if own:
            tasks = pd.DataFrame({t: curves[task_of_label(t)] for t in own}).dropna().mean(axis=1)
            yield metric, OWN_TEXTS, MEAN, pd.DataFrame(own).dropna().mean(axis=1), tasks


def correlation_table(frame: pd.DataFrame, task: str = MEAN) -> pd.DataFrame:
    """Metrics as rows, methods as columns (statistic and p-value) for one ``task`` (default: the mean score)."""
    chosen = frame[frame["task"] == task]
    table = chosen.pivot_table(index=["metric", "texts"], columns="method", values=["statistic", "p_value"])
    table.columns = [f"{method} {'p' if kind == 'p_value' else ''}".strip() for kind, method in table.columns]
    ordered = [c for m in METHODS for c in (m, f"{m} p") if c in table.columns]
    return table[ordered]
