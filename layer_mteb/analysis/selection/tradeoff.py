"""Cost against quality: per model of a run, the cheapest layer within one point of the best
(:func:`~layer_mteb.analysis.rules.cheapest_within`), for the mean over tasks and for each task type, with what the
cut model costs where the run holds ``cost.csv`` (``layer-mteb cost``).

Without ``cost.csv`` the layer is still named, since every block adds FLOPs and the depth ranks the layers as FLOPs
would, but no cost is claimed: the columns stay empty and ``measured`` is False. ``select`` prints one line per
model (:func:`cheapest_lines`); the report draws the measured runs and tabulates every run.
"""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from layer_mteb.analysis.rules import cheapest_within, extremum_layer
from layer_mteb.analysis.selection.curves import MEAN
from layer_mteb.common.run_folder import COST_FILE, RunFolder
from layer_mteb.common.scores import one_setting_per_model
from layer_mteb.metrics.cost_table import COST_TABLE

CHEAPEST_COLUMNS = [
    "model",
    "scope",
    "n_tasks",
    "layer",
    "n_layers",
    "score",
    "best_layer",
    "best_score",
    "measured",
    "flops_fraction",
    "seconds_per_1000_texts",
    "full_seconds_per_1000_texts",
]
COST_CURVE_COLUMNS = ["model", "layer", "n_layers", "score", "flops_fraction", "seconds_per_1000_texts"]


def _scope_curves(scores: pd.DataFrame) -> dict[str, tuple[int, pd.Series]]:
    """scope -> (number of tasks, mean main score per layer): :data:`MEAN` over every task, then each task type;
    only layers scored for every task of the scope (a layer missing one is never averaged over fewer)."""
    table = scores.pivot_table(index="layer", columns="task", values="main_score", aggfunc="mean")
    types = scores.drop_duplicates("task").set_index("task")["task_type"] if "task_type" in scores else None
    scopes = {MEAN: list(table.columns)}
    if types is not None:
        for kind in sorted(types.astype(str).unique()):
            scopes[kind] = [t for t in table.columns if str(types.get(t)) == kind]
    return {scope: (len(tasks), table[tasks].dropna().mean(axis=1)) for scope, tasks in scopes.items() if tasks}


def _model_cost(cost: pd.DataFrame | None, model: str) -> pd.DataFrame | None:
    if cost is None:
        return None
    rows = cost[cost["model"].astype(str) == model]
    return rows.drop_duplicates("layer", keep="last").set_index("layer").sort_index() if not rows.empty else None


def cheapest_layers(scores: pd.DataFrame, cost: pd.DataFrame | None = None) -> pd.DataFrame:
    """Per model and scope (:data:`MEAN`, each task type) the cheapest layer within one point of the best, its score,
    the best layer's, and its measured cost (FLOPs fraction, seconds per 1,000 texts, the full model's seconds)
    where ``cost`` has the model; without it, layers are ranked by depth and no cost is given."""
    rows = []
    for model, part in scores.groupby("model", sort=True):
        measured = _model_cost(cost, str(model))
        n_layers = int(part["n_layers"].iloc[0])
        for scope, (n_tasks, curve) in _scope_curves(part).items():
            if curve.empty:
                continue
            rank = measured["flops_fraction"] if measured is not None else pd.Series(curve.index, index=curve.index)
            layer, best = cheapest_within(curve, rank), extremum_layer(curve)
            row = {"model": model, "scope": scope, "n_tasks": n_tasks, "layer": layer, "n_layers": n_layers}
            row |= {"score": curve[layer], "best_layer": best, "best_score": curve[best]}
            row["measured"] = measured is not None
            if measured is not None:
                row |= {column: measured.at[layer, column] for column in ("flops_fraction", "seconds_per_1000_texts")}
                row["full_seconds_per_1000_texts"] = measured["seconds_per_1000_texts"].get(n_layers, float("nan"))
            rows.append(row)
    return pd.DataFrame(rows, columns=CHEAPEST_COLUMNS)


def cost_curves(scores: pd.DataFrame, cost: pd.DataFrame | None) -> pd.DataFrame:
    """Per model with a measured cost, the mean score over tasks and the cost of each layer (the figure's points)."""
    frames = []
    for model, part in scores.groupby("model", sort=True):
        measured = _model_cost(cost, str(model))
        curve = _scope_curves(part)[MEAN][1]
        if measured is None or curve.empty:
            continue
        joined = measured.join(curve.rename("score"), how="inner").reset_index()
        frames.append(joined.assign(model=model, n_layers=int(part["n_layers"].iloc[0])))
    if not frames:
        return pd.DataFrame(columns=COST_CURVE_COLUMNS)
    return pd.concat(frames, ignore_index=True)[COST_CURVE_COLUMNS]


def run_cheapest(run: str | Path | RunFolder) -> pd.DataFrame:
    """:func:`cheapest_layers` of a run folder (its ``scores.csv`` and, when present, ``cost.csv``)."""
    folder = RunFolder.of(run)
    return cheapest_layers(one_setting_per_model(folder.scores()), folder.read(COST_TABLE, missing_ok=True))


def cheapest_lines(run: str | Path | RunFolder) -> list[str]:
    """Per model of a run folder, the cheapest layer for the mean over its tasks, its cost and its score against the
    best (mteb's units): what ``select`` and ``cost`` print after their own results. Without a measured cost it says
    so and how to measure it, never a number that was not measured."""
    folder = RunFolder.of(run)
    picks = run_cheapest(folder)
    lines = []
    for _, row in picks[picks["scope"] == MEAN].iterrows():
        if row["measured"]:
            cost = (
                f"{100 * row['flops_fraction']:.1f} % of the FLOPs, {row['seconds_per_1000_texts']:.2f} s per 1,000 "
                f"texts vs {row['full_seconds_per_1000_texts']:.2f} for the full model"
            )
        else:
            blocks = f"{int(row['layer'])}/{int(row['n_layers'])} of the blocks"
            cost = f"{blocks}; cost not measured, no {COST_FILE}: layer-mteb cost --run {folder.path}"
        lines.append(
            f"cheapest layer within 1 point of the best: layer {int(row['layer'])} ({cost}; "
            f"score {row['score']:.4f} vs best {row['best_score']:.4f} at layer {int(row['best_layer'])})"
        )
    return lines
