"""Label-free layer selection and its honest scorecard: for each metric, pick the layer where the metric is best
(prompt entropy: lowest, the paper's selector; see :data:`layer_mteb.metrics.DIRECTIONS`), then compare the chosen
layer's real score with the last layer and with the best layer in hindsight.

``regret = best − chosen`` (≥ 0, 0 is perfect) and ``gain = chosen − last`` (can be negative: a selector can hurt).
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Collection, Mapping, Sequence
from itertools import chain
from pathlib import Path

import pandas as pd

from layer_mteb.analysis.rules import best_line
from layer_mteb.analysis.runs.folders import load_run
from layer_mteb.analysis.selection.agreement import AgreementOptions, agreement_metrics
from layer_mteb.analysis.selection.auto import AUTO, Policy, kind_of, load_policy, pooling_of
from layer_mteb.analysis.selection.curves import MEAN, as_folder, metric_curves, score_curves
from layer_mteb.analysis.selection.selectors import (
    AGREEMENT,
    BASELINES,
    SELECTION_COLUMNS,
    ModelData,
    Selector,
    by_name,
    evaluate,
    metric_selector,
    reads_curves,
)
from layer_mteb.common.errors import UserError
from layer_mteb.common.run_folder import AGREEMENT_FILE, METRIC_COLUMNS, RunFolder, selection_file
from layer_mteb.metrics.texts import ENCODED_TEXTS, task_of_label


def select_layers(
    run: str | Path | RunFolder | None = None,
    *,
    scores: pd.DataFrame | None = None,
    metrics: pd.DataFrame | None = None,
    by: str | list[str] | None = None,
    per_task: bool = False,
    metric_readout: str = "auto",
    agreement: AgreementOptions | None = None,
    write: bool = True,
) -> pd.DataFrame:
    """One row per (task, selector, text source): the chosen layer and how it scores.

    Without ``per_task``, layers are chosen once against the score averaged over tasks (``task == "mean"``); with
    it, separately for every task, using the task's own texts where ``metrics.csv`` has them as well as every
    general source (e.g. WikiText). Baselines ``last_layer``, ``middle_layer`` and ``oracle`` are included.
    ``run`` is a run folder (the command's :class:`RunFolder`, whose tables are then read once); with it (and
    ``write``), writes ``run/selection.csv`` with both scopes (``task`` is ``mean`` for the global pick), or with
    ``by``, ``run/selection.<by>.csv`` beside it (:func:`selection_file`).
    ``metric_readout`` chooses which metrics pick among the scores (:data:`~.runs.METRIC_READOUTS`; the
    default is the paper's pairing, raw-stream metrics where they exist); ``selection.csv`` records it per row.
    ``by`` may name any selector of the registry (:func:`~.selectors.by_name`: a metric, e.g.
    ``dataset_entropy@own:from=0.25`` (one on own texts picks per task), ``agreement``, or a studied one such as
    ``id_min``), or ``auto``: the selector the study chose for the model's kind (:mod:`~.auto`), in rows named
    ``auto``. Ties go to the deeper layer and "last" is layer ``n_layers`` (:mod:`~.rules`): a task without it has no
    ``last_score`` or ``gain``.
    """
    folder = None if run is None else as_folder(run)
    if scores is None:
        if folder is None:
            raise UserError("give a run folder (--run) or both scores and metrics tables")
        scores = folder.scores()
    agreed = _stored_curves(folder, by, agreement or AgreementOptions())
    if metrics is None and folder is not None:  # a missing file is the error naming the command that writes it
        metrics = folder.metrics() if _reads_metrics(by, scores) else pd.DataFrame(columns=METRIC_COLUMNS)
    scores, metrics = load_run(None if folder is None else folder.path, scores, metrics, metric_readout)
    per_task = per_task or needs_own_texts(by)
    frame = _select(scores, metrics, by, per_task, agreed)
    if folder is not None and write:  # the file keeps both scopes, so the report has the global and per-task picks
        both = pd.concat([frame, _select(scores, metrics, by, not per_task, agreed)], ignore_index=True)
        folder.write_table(selection_file(by), both)
    return frame


def _reads_metrics(by: str | list[str] | None, scores: pd.DataFrame) -> bool:
    """Whether what ``by`` applies reads ``metrics.csv``: a run without it may still use a depth, a baseline, the
    stored agreement curves, or ``auto`` whose policy rule for each model of ``scores`` reads none."""
    if by is None or isinstance(by, list):
        return True
    names = [by]
    if by == AUTO:
        policy = load_policy()
        rules = [policy.rule_for(str(model), pooling_of(part)) for model, part in scores.groupby("model")]
        names = [name for rule in rules for name in rule.selector_names()]
    return any(by_name(name).reads == "metrics" for name in names)


def _metric_names(by: str | list[str] | None) -> list[str] | None:
    """The metrics ``by`` picks with on every source they were measured on (``None``: every metric), or ``[]`` when
    ``by`` is ``auto`` or a selector of its own."""
    if by is None or isinstance(by, list):
        return None if by is None else list(by)
    if by == AUTO:
        return []
    selector = by_name(by)
    return [by] if selector.reads == "metrics" and selector.source is None else []


def _stored_curves(folder: RunFolder | None, by: object, options: AgreementOptions) -> pd.DataFrame | None:
    """The stored curves ``by`` reads (``auto`` uses them where the run has them); none are computed here: the
    commands compute the missing ones first (:func:`~.agreement.missing_curves`)."""
    if reads_curves(by):
        if folder is None:
            raise UserError(f"--by {by} needs a run folder: it reads the run's vectors of each task's texts")
        rows = agreement_metrics(folder, options)
        if rows.empty:
            raise UserError(
                f"no agreement curves for these options in {folder.file(AGREEMENT_FILE)}: "
                f"`layer-mteb select --run {folder.path} --by agreement` computes them first"
            )
        return rows
    if by == AUTO and folder is not None and folder.file(AGREEMENT_FILE).is_file():
        return agreement_metrics(folder, options)
    return None


def _model_metrics(metrics: pd.DataFrame, agreed: pd.DataFrame | None, model: str, by: object) -> pd.DataFrame:
    """``model``'s metric rows a pick reads: with agreement curves, those too (measured on the scores' own readout,
    so no raw/final_norm pairing applies); a selector that reads the curves reads them alone."""
    own = metrics[metrics["model"] == model]
    if agreed is None:
        return own
    agreed = agreed[agreed["model"] == model]
    return agreed if by != AUTO else pd.concat([own, agreed], ignore_index=True)


def _select(
    scores: pd.DataFrame,
    metrics: pd.DataFrame,
    by: str | list[str] | None,
    per_task: bool,
    agreed: pd.DataFrame | None = None,
) -> pd.DataFrame:
    policy = load_policy() if by == AUTO else None
    names = _metric_names(by)
    one = by_name(by) if names == [] and policy is None else None  # a selector of its own, e.g. depth=0.8
    frames = []
    for model, model_scores in scores.groupby("model", sort=False):
        curves = score_curves(model_scores)
        model_metrics = _model_metrics(metrics, agreed, str(model), by)
        metric_by = metric_curves(model_metrics, names or None)
        data = ModelData(
            name=str(model),
            n_layers=int(model_scores["n_layers"].iloc[0]),
            scores=pd.DataFrame(curves),
            metrics=metric_by,
            readout=dict(zip(model_metrics["texts"], model_metrics["readout"], strict=True)),
            task_types=task_types(model_scores),
            pooling=pooling_of(model_scores),
        )
        candidates = [by_name(name) for name in BASELINES]
        if policy is not None:
            candidates.append(auto_selector(policy, data))
        elif one is not None:
            candidates.append(one)
        else:
            # a task's own texts are its evaluation splits (task:<name>); the encoded:<name> rows of
            # `run --task-metrics` describe a different text set and are not a selector's source
            general = [(m, t) for m, t in metric_by if not t.startswith(ENCODED_TEXTS)]
            sources = dict.fromkeys((m, "own" if task_of_label(t) is not None else t) for m, t in general)
            # rows named by the bare metric; their texts column says the source
            candidates += [dataclasses.replace(metric_selector(metric), source=source) for metric, source in sources]
        tasks = [t for t in curves if t != MEAN] if per_task else [MEAN]
        frames.append(evaluate([data], candidates, tasks))
    frame = pd.concat(frames, ignore_index=True) if frames else pd.DataFrame(columns=SELECTION_COLUMNS)
    return frame[SELECTION_COLUMNS]


def auto_selector(policy: Policy, data: ModelData) -> Selector:
    """What ``--by auto`` applies: for a base language model whose run has agreement curves on every task, the
    layer of most agreement (the study: docs/agreement.md); otherwise the shipped policy's rule for its kind."""
    if kind_of(data.name, data.pooling) == "base" and uses_agreement(data):
        return dataclasses.replace(by_name(AGREEMENT), name=AUTO)
    return policy.selector_for(data.name, data.pooling)


def uses_agreement(data: ModelData) -> bool:
    """Whether every task of ``data`` has an agreement curve."""
    tasks = [t for t in data.scores.columns if t != MEAN]
    return bool(tasks) and all(data.curve(AGREEMENT, "own", task) is not None for task in tasks)


def task_types(scores: pd.DataFrame) -> dict[str, str]:
    """task -> mteb task type, as the scores record it (a policy rule may pick a depth per type)."""
    if "task_type" not in scores.columns:
        return {}
    return scores.dropna(subset=["task_type"]).groupby("task")["task_type"].first().astype(str).to_dict()


def needs_own_texts(by: str | list[str] | None) -> bool:
    """Whether ``by`` names a selector on each task's own texts (or is ``auto`` with a rule that applies one, or
    picks per task type), which can pick only per task."""
    if by == AUTO:
        rules = load_policy().rules.values()
        return any(by_name(name).source == "own" or rule.by_type for rule in rules for name in rule.selector_names())
    return isinstance(by, str) and by_name(by).source == "own"


def leaderboard(
    picks: pd.DataFrame,
    by: Sequence[str] = ("selector", "texts"),
    within: Sequence[str] = (),
    mean_tasks: Mapping[str, Collection[str]] | None = None,
) -> pd.DataFrame:
    """Selectors ranked by mean regret, then mean gain: the one ranking behind ``layer-mteb select`` and the report.

    Rows are grouped by ``within`` + ``by`` and ranked inside each ``within`` group (say, per model and scope);
    per-task own-text sources (``task:<name>``) are pooled as ``own texts``. ``chosen_layer`` is the layer every
    grouped row chose, else ``varies``; ``n_tasks`` counts distinct tasks, a model's ``mean`` row counting as the
    tasks it averages when ``mean_tasks`` (model -> task names, :func:`tasks_in_mean`) gives them; ``beats_last`` is
    the share with gain > 0.
    """
    frame = picks
    counted = [[t] for t in frame["task"]]
    if mean_tasks is not None:
        rows = zip(frame["model"].astype(str), frame["task"], strict=True)
        counted = [list(mean_tasks.get(m, [t])) if t == MEAN else [t] for m, t in rows]
    frame = frame.assign(counted=counted)
    if "texts" in frame.columns:
        frame = frame.assign(texts=frame["texts"].where(frame["texts"].map(task_of_label).isna(), "own texts"))
    frame = frame.assign(beats_last=frame["gain"] > 0)
    board = frame.groupby([*within, *by], sort=False).agg(
        n_tasks=("counted", lambda s: len(set(chain.from_iterable(s)))),
        chosen_layer=("chosen_layer", lambda s: s.iloc[0] if s.nunique() == 1 else "varies"),
        chosen_score=("chosen_score", "mean"),
        last_score=("last_score", "mean"),
        best_score=("best_score", "mean"),
        regret=("regret", "mean"),
        gain=("gain", "mean"),
        beats_last=("beats_last", "mean"),
    )
    board = board.reset_index()
    order = [*within, "regret", "gain"]
    ascending = [True] * len(within) + [True, False]
    return board.sort_values(order, ascending=ascending, kind="stable").reset_index(drop=True)


def is_selector(board: pd.DataFrame, name: str) -> pd.Series:
    """Which rows of a :func:`leaderboard` (``selector``, ``texts``) are the study selector ``name``
    (``<metric>@<own|source>``, :func:`~.selectors.by_name`) or a baseline of that name."""
    metric, _, source = name.partition("@")
    if not source:
        return board["selector"] == name
    texts = "own texts" if source == "own" else source
    return (board["selector"] == metric) & (board["texts"] == texts)


def tasks_in_mean(scores: pd.DataFrame) -> dict[str, list[str]]:
    """model -> the tasks its ``mean`` score curve averages (every task it scored, :func:`~.curves.score_curves`)."""
    return {str(model): sorted(part["task"].astype(str).unique()) for model, part in scores.groupby("model")}


def run_leaderboard(
    folder: RunFolder, picks: pd.DataFrame, by: str | list[str] | None = None
) -> tuple[pd.DataFrame, str | None]:
    """``layer-mteb select``'s table for ``picks`` (read from ``folder``), its ``mean`` rows counting the tasks
    they average, and a line saying where the metric selectors are when only per-task picks have them: a run whose
    metrics are all on each task's own texts (an imported release, say) has only baselines for the mean over tasks
    (a general source such as WikiText would pick in both scopes)."""
    within = ["model"] if picks["model"].nunique() > 1 else []  # a run of several models: ranked per model
    board = leaderboard(picks, within=within, mean_tasks=tasks_in_mean(folder.scores()))
    if not (picks["task"] == MEAN).all() or not picks["selector"].isin(BASELINES).all():
        return board, None
    both = folder.picks(by)
    per_task = both[(both["task"] != MEAN) & ~both["selector"].isin(BASELINES)]
    if per_task.empty:
        return board, None
    names = ", ".join(dict.fromkeys(per_task["selector"].astype(str)))
    return board, (
        "only the baselines pick for the mean over tasks (this run's metrics are on each task's own texts); "
        f"--per-task shows the metric selectors: {names}"
    )


def best_lines(folder: RunFolder, picks: pd.DataFrame) -> list[str]:
    """Per model of ``folder``, what best and regret compare in the table ``select`` prints for ``picks``
    (:func:`~layer_mteb.analysis.rules.best_line`): every mode prints the same two bests, one layer for every task
    and each task's own best layer, and says which of them its regret is against."""
    per_task = not (picks["task"] == MEAN).all()
    scores = folder.scores()
    return [
        best_line(str(model), part.pivot_table(index="layer", columns="task", values="main_score"), per_task)
        for model, part in scores.groupby("model", sort=False)
    ]


LEADERBOARD_COLUMNS = ["model", "selector", "scope", "layer", "n_tasks", "score", "last", "best", "gain", "regret"]


def selector_leaderboard(picks: pd.DataFrame | None) -> pd.DataFrame | None:
    """:func:`leaderboard` per model: one global layer each (scope ``mean``), and per-task
    picks averaged over tasks (scope ``per task``), in the report's column names.

    Numbers are the selection file's own (``chosen_score``, ``last_score``, ...); ``None`` when it is absent or lacks
    ``model, selector, scope, chosen_layer, chosen_score``.
    """
    needed = {"model", "selector", "scope", "chosen_layer", "chosen_score"}
    if picks is None or not needed <= set(picks.columns):
        return None
    frame = picks.astype({"scope": str})
    for column in ("last_score", "best_score", "gain", "regret"):
        if column not in frame:
            frame = frame.assign(**{column: math.nan})
    scope = frame["scope"].where(frame["scope"] == MEAN, "per task")
    board = leaderboard(frame.assign(task=frame["scope"], scope=scope), by=["selector"], within=["model", "scope"])
    board = board.rename(columns=dict(chosen_layer="layer", chosen_score="score", last_score="last", best_score="best"))
    global_pick = board["scope"] == MEAN
    board["layer"] = pd.to_numeric(board["layer"].where(global_pick), errors="coerce").astype("Int64")
    board["n_tasks"] = board["n_tasks"].where(~global_pick).astype("Int64")
    return board[LEADERBOARD_COLUMNS]
