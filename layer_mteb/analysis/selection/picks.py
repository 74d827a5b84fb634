"""Label-free layer selection and its honest scorecard: for each metric, pick the layer where the metric is best
(prompt entropy: lowest, the paper's selector; see :data:`layer_mteb.metrics.DIRECTIONS`), then compare the chosen
layer's real score with the last layer and with the best layer in hindsight.

``regret = best − chosen`` (≥ 0, 0 is perfect) and ``gain = chosen − last`` (can be negative: a selector can hurt).
"""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pandas as pd

from layer_mteb.analysis.rules import best_line
from layer_mteb.analysis.runs.folders import load_run
from layer_mteb.analysis.selection.agreement import AgreementOptions, StoredCurves, options_of, stored_curves
from layer_mteb.analysis.selection.curves import MEAN, metric_curves, score_curves
from layer_mteb.analysis.selection.leaderboard import leaderboard
from layer_mteb.analysis.selection.registry import by_name
from layer_mteb.analysis.selection.selectors import (
    BASELINES,
    PICKS_TABLE,
    SELECTION_COLUMNS,
    CurveSource,
    ModelData,
    Selector,
    evaluate,
    metric_selector,
    metric_selector_named,
    pooling_of,
    task_types,
)
from layer_mteb.common.errors import UserError
from layer_mteb.common.run_folder import SELECTION_FILE, RunFolder
from layer_mteb.metrics import METRIC_COLUMNS, METRICS_FILE, METRICS_TABLE, stored_in
from layer_mteb.metrics.agreement import AGREEMENT_FILE
from layer_mteb.metrics.texts import ENCODED_TEXTS, task_of_label


def select_layers(
    run: str | Path | RunFolder | None = None,
    *,
    scores: pd.DataFrame | None = None,
    metrics: pd.DataFrame | None = None,
    by: str | Selector | list[str] | None = None,
    per_task: bool = False,
    metric_readout: str = "auto",
    arithmetic: str | None = None,
    agreement: AgreementOptions | None = None,
    source: CurveSource | None = None,
    write: bool = True,
) -> pd.DataFrame:
    """One row per (task, selector, text source): the chosen layer and how it scores, beside the baselines
    ``last_layer``, ``middle_layer`` and ``oracle``.

    Without ``per_task``, one layer against the score averaged over tasks (``task == "mean"``); with it, one per task,
    on the task's own texts and every general source (WikiText). ``run`` (a path or the command's :class:`RunFolder`)
    gets ``selection.csv`` with both scopes, or ``selection.<by>.csv`` beside it (:func:`selection_file`).
    ``metric_readout``: which metrics pick among the scores (:data:`~.runs.METRIC_READOUTS`); ``arithmetic``: of
    which arithmetic (default: the one ``metrics.csv`` holds, the paper's where it holds both). ``by`` is a selector
    or a name :func:`~.registry.by_name` knows (``dataset_entropy@own:from=0.25``, ``agreement``, ``auto``, ...);
    the curves it needs and the run lacks are computed first through ``source``. Ties: the deeper layer (:mod:`~.rules`)
    """
    folder = None if run is None else RunFolder.of(run)
    if scores is None:
        if folder is None:
            raise UserError("give a run folder (--run) or both scores and metrics tables")
        scores = folder.scores()
    selector = by_name(by) if isinstance(by, str) else by if isinstance(by, Selector) else None
    names = list(by) if isinstance(by, list) else None  # metrics picking, each on every source it was measured on
    needs = selector.needs(scores) if selector is not None else None
    options = agreement or options_of(source)
    stored = None if selector is None or needs is None else stored_curves(folder, selector, needs, options, source)
    if metrics is None and folder is not None:  # a missing file is the error naming the command that writes it
        reads = needs is None or bool(needs.reads & set(stored_in(METRICS_FILE)))
        metrics = folder.read(METRICS_TABLE) if reads else pd.DataFrame(columns=METRIC_COLUMNS)
    scores, metrics = load_run(folder, scores, metrics, metric_readout, arithmetic)
    per_task = per_task or (selector is not None and selector.per_task())
    picks = _select(scores, metrics, selector, names, stored)
    mean = picks["task"] == MEAN
    frame = picks[mean != per_task].reset_index(drop=True)
    if folder is not None and write:  # the file keeps both scopes, so the report has the global and per-task picks
        both = pd.concat([frame, picks[mean == per_task]], ignore_index=True)
        folder.write_table(selection_file(selector.name if selector else names), both)
    return frame


def metric_texts(folder: RunFolder) -> tuple[bool, bool]:
    """Whether the run's metrics are on its tasks' own texts (``metrics --run``'s default), and whether on shared
    texts (WikiText, a file): the own texts' selectors pick only per task, so ``select`` without ``--by`` shows a
    layer per task where they are all there is, rather than the baselines alone (``encoded:`` rows are no source)."""
    texts = folder.read(METRICS_TABLE)["texts"].astype(str)
    texts = texts[~texts.str.startswith(ENCODED_TEXTS)]
    own = texts.map(task_of_label).notna()
    return bool(own.any()), bool((~own).any())


def selection_file(by: str | list[str] | None = None) -> str:
    """``selection.csv`` for every metric (what the report reads); a narrower ``by`` writes beside it, as
    ``selection.<by>.csv``, so picking by one never drops the other selectors' picks."""
    if by is None:
        return SELECTION_FILE
    return f"selection.{by if isinstance(by, str) else '+'.join(by)}.csv"


def explained(
    folder: RunFolder, picks: pd.DataFrame, selector: Selector | None, source: CurveSource | None
) -> list[str]:
    """What ``selector`` read and why it picked so, per model, and where the curves it computed (or read back) are
    kept."""
    kept = [f"agreement curves: {folder.file(AGREEMENT_FILE)}"] if selector and selector.reads_curves_alone() else []
    return [] if selector is None else [*selector.describe(folder, picks, options_of(source)), *kept]


def _select(
    scores: pd.DataFrame,
    metrics: pd.DataFrame,
    selector: Selector | None,
    names: list[str] | None,
    stored: StoredCurves | None = None,
) -> pd.DataFrame:
    """The picks of both scopes: each task's, and those for the mean over tasks (``task == "mean"``)."""
    bare = selector is None or (selector.source is None and selector.metric in stored_in(METRICS_FILE))
    names = [str(selector.metric)] if selector is not None and bare else None if selector else names
    frames = []
    for model, model_scores in scores.groupby("model", sort=False):
        curves = score_curves(model_scores)
        own = metrics[metrics["model"] == model]
        readout = dict(zip(own["texts"], own["readout"], strict=True))
        metric_by = metric_curves(own, names) if selector is None or not selector.reads_curves_alone() else {}
        if stored is not None:
            metric_by |= stored.curves.get(str(model), {})
            readout |= stored.readout.get(str(model), {})
        data = ModelData(
            name=str(model),
            n_layers=int(model_scores["n_layers"].iloc[0]),
            scores=pd.DataFrame(curves),
            metrics=metric_by,
            readout=readout,
            task_types=task_types(model_scores),
            pooling=pooling_of(model_scores),
            arithmetic=str(own["arithmetic"].iloc[0]) if not own.empty else "paper",
        )
        candidates = [metric_selector_named(name) for name in BASELINES]
        if selector is not None and not bare:
            candidates.append(selector)
        else:
            # a task's own texts are its evaluation splits (task:<name>); the encoded:<name> rows of
            # `run --task-metrics` describe a different text set and are not a selector's source
            general = [(m, t) for m, t in metric_by if not t.startswith(ENCODED_TEXTS)]
            sources = dict.fromkeys((m, "own" if task_of_label(t) is not None else t) for m, t in general)
            # rows named by the bare metric; their texts column says the source
            candidates += [dataclasses.replace(metric_selector(metric), source=source) for metric, source in sources]
        frames.append(evaluate([data], candidates))  # every task, then the mean over tasks
    frame = pd.concat(frames, ignore_index=True) if frames else pd.DataFrame(columns=SELECTION_COLUMNS)
    return frame[SELECTION_COLUMNS]


def run_leaderboard(
    folder: RunFolder, picks: pd.DataFrame, by: str | list[str] | None = None
) -> tuple[pd.DataFrame, list[str]]:
    """``layer-mteb select``'s table for ``picks`` (read from ``folder``), its ``mean`` rows counting the tasks they
    average, and the lines under it: per model, the two bests it compares against (:func:`~.rules.best_line`: one
    layer for every task, each task's own best layer), and where the metric selectors are when only per-task picks
    have them (a run whose metrics are all on each task's own texts, an imported release say, has only baselines
    for the mean over tasks)."""
    file = selection_file(by)
    per_task = not (picks["task"] == MEAN).all()
    only_baselines = not per_task and picks["selector"].isin(BASELINES).all()
    scores = folder.scores()
    both = folder.read(PICKS_TABLE._replace(file=file)) if only_baselines else picks.iloc[:0]
    within = ["model"] if picks["model"].nunique() > 1 else []  # a run of several models: ranked per model
    board = leaderboard(picks, within=within, scores=scores)
    lines = [
        best_line(str(model), part.pivot_table(index="layer", columns="task", values="main_score"), per_task)
        for model, part in scores.groupby("model", sort=False)
    ]
    hidden = both[(both["task"] != MEAN) & ~both["selector"].isin(BASELINES)]
    if not hidden.empty:
        names = ", ".join(dict.fromkeys(hidden["selector"].astype(str)))
        lines.append(
            "only the baselines pick for the mean over tasks (this run's metrics are on each task's own texts); "
            f"--per-task shows the metric selectors: {names}"
        )
    return board, lines
