"""Table 1 of "Layer by Layer" for any set of runs: how often an intermediate layer beats the last one, and by how
much (pure pandas, testable to the last digit). Rules, also printed under the Markdown table: a task counts once
(splits and subsets averaged first); ties go to the deeper layer (:mod:`~.rules`); tasks without a last-layer score
are left out and named; the best single layer is among those scored on every compared task.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from typing import NamedTuple

import pandas as pd

from layer_mteb.analysis.rules import (
    FIGURE1_COVERAGE,
    TIE_TOL,
    common_tasks,
    complete_layer_means,
    extremum_layer,
    last_score,
)
from layer_mteb.analysis.selection.curves import MEAN
from layer_mteb.common.errors import UserError

ALL_TYPES = "all"
TABLE1_COLUMNS = ["model", "task_type", "n_layers", "n_tasks", "best_not_last_pct", "avg_last", "avg_best"]
TABLE1_COLUMNS += ["best_layer", "best_layer_avg", "entropy_selector", "entropy_layer", "entropy_layer_avg"]
TABLE1_COLUMNS += ["entropy_per_task_avg"]


def task_scores(scores: pd.DataFrame) -> pd.DataFrame:
    """One score per (model, task, layer): the mean over the task's splits and subsets, so every task counts once."""
    frame = scores.dropna(subset=["main_score"]).copy()
    if frame.empty:
        raise UserError("the runs hold no main scores: let `layer-mteb run` finish at least one layer")
    frame["task_type"] = frame["task_type"].fillna("unknown").astype(str) if "task_type" in frame else "unknown"
    frame["data"] = frame["data"].fillna("unknown").astype(str) if "data" in frame else "unknown"
    out = (
        frame.groupby(["model", "task", "layer"], sort=True)
        .agg(
            task_type=("task_type", "first"),
            main_score=("main_score", "mean"),
            data=("data", lambda d: "local-partial" if (d == "local-partial").any() else d.iloc[0]),
        )
        .reset_index()
    )
    out["n_layers"] = out["model"].map(frame.groupby("model")["n_layers"].max()).astype(int)
    depth = out["layer"] / out["n_layers"].where(out["n_layers"] > 0)
    out["relative_depth"] = depth.fillna(1.0)  # a model without blocks has one layer, its last
    return out


def per_task_summary(tasks: pd.DataFrame, tol: float = TIE_TOL) -> pd.DataFrame:
    """Per (model, task): last-layer score, best layer and score (ties to the deeper layer), and layers missing."""
    model_layers = tasks.groupby("model")["layer"].agg(set)
    rows = []
    for (model, task), group in tasks.groupby(["model", "task"], sort=True):
        n_layers = int(group["n_layers"].iloc[0])
        curve = group.set_index("layer")["main_score"]
        best_layer = extremum_layer(curve, "max", tol)
        best_score, last = float(curve[best_layer]), last_score(curve, n_layers)
        rows.append(
            {
                "model": model,
                "task": task,
                "task_type": group["task_type"].iloc[0],
                "n_layers": n_layers,
                "layers_scored": len(group),
                "missing_layers": sorted(model_layers[model] - set(group["layer"])),
                "last_score": last,
                "best_layer": best_layer,
                "best_score": best_score,
                "best_not_last": pd.NA if math.isnan(last) else best_score > last + tol,
                "gain": best_score - last,
                "data": group["data"].iloc[0],
            }
        )
    frame = pd.DataFrame(rows)
    frame["best_not_last"] = frame["best_not_last"].astype("boolean")
    return frame


def layer_means(tasks: pd.DataFrame) -> pd.DataFrame:
    """The curve of Figure 1: per model and layer, the mean score over the tasks scored at that layer."""
    grouped = tasks.groupby(["model", "layer"], sort=True)
    out = grouped.agg(
        n_layers=("n_layers", "first"),
        relative_depth=("relative_depth", "first"),
        main_score=("main_score", "mean"),
        n_tasks=("task", "nunique"),
    )
    return out.reset_index()


class Headline(NamedTuple):
    """Figure 1's rows and curves, the task set they share (empty: none is shared) and the caption naming it."""

    rows: pd.DataFrame
    curves: pd.DataFrame
    tasks: list[str]
    caption: str


def headline_tasks(tasks: pd.DataFrame, left_out: Iterable[str] = (), coverage: float = FIGURE1_COVERAGE) -> Headline:
    """Figure 1's rows, curves and caption, the one path to them: the models not ``left_out`` (random-weight
    controls) over :func:`~layer_mteb.analysis.rules.common_tasks`; a layer lacking one of those tasks is a gap."""
    frame = tasks[~tasks["model"].isin(set(left_out))]
    if frame.empty:
        frame = tasks
    names = common_tasks(frame, coverage)
    if not names:
        caption = "each curve averages its own model's tasks (no task was scored by every model)"
        return Headline(frame, layer_means(frame), [], caption)
    listed = ", ".join(names) if len(names) <= 12 else ", ".join(names[:12]) + f", ... ({len(names) - 12} more)"
    rows = frame[frame["task"].isin(names)]
    return Headline(rows, complete_layer_means(rows, names), names, f"tasks: {listed}")


def best_single_layer(tasks: pd.DataFrame, tol: float = TIE_TOL) -> tuple[float, float]:
    """(layer, average) of the best layer among those scored on every task of ``tasks`` (one model); ties deeper."""
    means = tasks.pivot(index="layer", columns="task", values="main_score").dropna().mean(axis=1)
    if means.empty:
        return math.nan, math.nan
    layer = extremum_layer(means, "max", tol)
    return float(layer), float(means[layer])


def entropy_picks(picks: pd.DataFrame | None, selector: str | None = None) -> dict[str, tuple[str, dict]]:
    """model -> (selector, {scope: chosen layer}) for the entropy selector (``selector``, else the first one whose
    name says entropy, prompt entropy first); models without picks are absent."""
    needed = {"model", "selector", "scope", "chosen_layer"}
    if picks is None or not needed <= set(picks.columns):
        return {}
    frame = picks.dropna(subset=["chosen_layer"]).astype({"selector": str, "scope": str})
    if selector is not None and selector not in set(frame["selector"]):
        raise UserError(f"selector {selector!r} is not in selection.csv (it has {sorted(set(frame['selector']))})")
    found = {}
    for model, rows in frame.groupby("model", sort=False):
        names = sorted(n for n in rows["selector"].unique() if "entropy" in n.lower())
        names.sort(key=lambda n: "prompt" not in n.lower())
        name = selector or (names[0] if names else None)
        chosen = rows[rows["selector"] == name]
        if name is not None and not chosen.empty:
            found[model] = (name, dict(zip(chosen["scope"], chosen["chosen_layer"].astype(int), strict=True)))
    return found


def build_table1(
    scores: pd.DataFrame,
    picks: pd.DataFrame | None = None,
    *,
    entropy_selector: str | None = None,
    tol: float = TIE_TOL,
) -> pd.DataFrame:
    """Table 1, one row per model (``task_type == "all"``) followed by one row per model and task type."""
    tasks = task_scores(scores)
    summary = per_task_summary(tasks, tol)
    entropy = entropy_picks(picks, entropy_selector)
    rows = []
    for model, model_summary in summary.groupby("model", sort=True):
        compared = model_summary[model_summary["last_score"].notna()]
        groups = [(ALL_TYPES, compared), *compared.groupby("task_type", sort=True)]
        for task_type, group in groups:
            group_tasks = tasks[(tasks["model"] == model) & tasks["task"].isin(group["task"])]
            row = _summarise(group, group_tasks, entropy.get(model), tol)
            rows.append({"model": model, "task_type": task_type, "n_layers": model_summary["n_layers"].iloc[0], **row})
    table = pd.DataFrame(rows, columns=TABLE1_COLUMNS)
    return table.astype({"n_tasks": int, "best_layer": "Int64", "entropy_layer": "Int64"})


def _summarise(summary: pd.DataFrame, tasks: pd.DataFrame, pick: tuple[str, dict] | None, tol: float) -> dict:
    best_layer, best_avg = best_single_layer(tasks, tol) if len(tasks) else (math.nan, math.nan)
    row = {
        "n_tasks": len(summary),
        "best_not_last_pct": 100 * float(summary["best_not_last"].mean()) if len(summary) else math.nan,
        "avg_last": float(summary["last_score"].mean()),
        "avg_best": float(summary["best_score"].mean()),
        "best_layer": best_layer,
        "best_layer_avg": best_avg,
        "entropy_selector": None,
        "entropy_layer": math.nan,
        "entropy_layer_avg": math.nan,
        "entropy_per_task_avg": math.nan,
    }
    if pick is None or not len(tasks):
        return row
    name, layers = pick
    by_layer = tasks.pivot(index="layer", columns="task", values="main_score")
    row["entropy_selector"] = name
    if MEAN in layers:
        row["entropy_layer"] = layers[MEAN]
        if layers[MEAN] in by_layer.index:
            row["entropy_layer_avg"] = float(by_layer.loc[layers[MEAN]].mean())
    per_task = [by_layer.at[layers[t], t] for t in by_layer.columns if layers.get(t) in by_layer.index]
    per_task = [s for s in per_task if not math.isnan(s)]
    row["entropy_per_task_avg"] = sum(per_task) / len(per_task) if per_task else math.nan
    return row


def table1_notes(summary: pd.DataFrame) -> list[str]:
    """Plain-language caveats: tasks left out, tasks that used fewer layers, one-layer runs, partial data."""
    notes = []
    for model, rows in summary.groupby("model", sort=True):
        no_last = rows.loc[rows["last_score"].isna(), "task"].tolist()
        if no_last:
            n_layers = rows["n_layers"].iloc[0]
            notes.append(f"{model}: left out (no score at the last layer, {n_layers}): {', '.join(no_last)}")
        kept = rows[rows["last_score"].notna()]
        missing = zip(kept["task"], kept["missing_layers"], strict=True)
        gaps = [f"{task} (no layer {', '.join(map(str, layers))})" for task, layers in missing if layers]
        if gaps:
            notes.append(f"{model}: best layer taken over the layers present: {'; '.join(gaps)}")
        if rows["layers_scored"].max() == 1:
            notes.append(f"{model}: one layer scored per task, so there is no other layer to compare with")
        partial = rows.loc[rows["data"] == "local-partial", "task"].tolist()
        if partial:
            notes.append(f"{model}: partial local data, not comparable to published mteb scores: {', '.join(partial)}")
    return notes


def run_summary(scores: pd.DataFrame) -> list[str]:
    """One line per (model, revision) of a run: the best single layer by mean score over the run's tasks
    (:func:`best_single_layer`) and the last layer's mean over the same tasks, on the scale of the layer table printed
    above it (mteb's 0–1 main scores, four decimals), so the line and the table read the same numbers."""
    lines = []
    scored = scores.dropna(subset=["main_score"])
    by = [c for c in ("model", "revision") if c in scored.columns]
    for key, part in scored.groupby(by, sort=False, dropna=False):
        model, revision = (key, None) if len(by) == 1 else key
        several = "revision" in scored and scored.loc[scored["model"] == model, "revision"].nunique() > 1
        label = f"{model} @ {revision}" if several else str(model)
        tasks = task_scores(part)
        layer, mean = best_single_layer(tasks)
        if math.isnan(layer):
            lines.append(f"{label}: no layer was scored on all {tasks['task'].nunique()} tasks")
            continue
        n_layers = int(tasks["n_layers"].iloc[0])
        last = tasks[tasks["layer"] == n_layers]
        complete = last["task"].nunique() == tasks["task"].nunique()
        last_text = f"{last['main_score'].mean():.4f}" if complete else "not scored on every task"
        lines.append(
            f"{label}: best layer {int(layer)} (mean {mean:.4f} over {tasks['task'].nunique()} tasks), "
            f"last layer {n_layers}: {last_text}"
        )
    return lines
