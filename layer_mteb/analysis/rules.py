"""The analysis rules, each defined once and used by every consumer: Table 1, ``select`` (every ``--by``),
``select --labels`` and the label-budget curve, the selector studies, correlation, the stress figures, the report and
the paper reproduction; ``docs/report.md`` says why. It sits below every other analysis module so all can use it.

- **Last layer**: the model's final hidden state, layer ``n_layers``. A task without a score there has no last layer:
  it is left out of every comparison with the last layer (and named), never compared with a shallower layer. A table
  that does not record ``n_layers`` holds every layer by construction (stress tests, dip tests), so its deepest layer
  is its last (:func:`last_layer_of`).
- **Ties go to the deeper layer**: among layers within :data:`TIE_TOL` of the best value (a score, a metric in its
  direction, or a count of labelled draws), the deepest wins; so does the deeper of two layers equally near a target
  depth.
- **The paper's selector** (:data:`PAPER_RULE`): the layer of lowest prompt entropy on each task's own texts.
- **No usable signal** (labels that rank nothing): keep the last layer, or the deepest scored one in a run of fewer
  layers (:func:`default_layer`), what a user without the signal would take.
- **Cheapest layer within one point of the best** (:func:`cheapest_within`): among the layers whose score is at
  least the best layer's less :data:`ONE_POINT` (0.01 of mteb's main score, one point on the report's ×100 scale),
  the one whose cut model costs least; equal costs go to the shallower layer. The cost is the forward FLOPs fraction
  of ``cost.csv`` (not its seconds: timing on a shared machine is noisy, and noise must not pick the layer); every
  block adds FLOPs, so this is the shallowest such layer, and without ``cost.csv`` the depth ranks the same way.
- **The best, in both of ``select``'s scopes** (:func:`best_of`): one layer for every task (``select``, scope
  ``mean``) compares the mean over tasks at the layers every task has, and its best is the layer of the highest mean;
  a layer per task (``--per-task``, and every ``--by`` that picks per task, ``auto`` included) compares each task at
  its own scored layers, and its best is each task's best layer, averaged. ``regret = best − chosen`` within the scope
  the table shows; ``select`` prints both bests in every mode (:func:`best_line`), so two modes never report different
  bests without saying which is which.
- **Correlations** need :data:`MIN_LAYERS` layers with both a metric value and a score, both varying.
- **Figure 1's tasks**: :func:`common_tasks`; a curve is drawn only at layers holding every one of them; when they
  are fewer than some model scored, :func:`fewer_shared_tasks` says so.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Iterable
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # the rules take the caller's frames; the selector registry imports them without pandas
    import pandas as pd

TIE_TOL = 1e-9
#: The paper's selector (Skean et al. 2025): lowest prompt entropy of each task's own texts, picked per task.
PAPER_RULE = "prompt_entropy@own"
#: Fewest layers a correlation is computed over (with fewer, every rank statistic is nearly arbitrary).
MIN_LAYERS = 3
#: "Within one point of the best": 0.01 of mteb's main score (one point on the ×100 scale tables and figures show).
ONE_POINT = 0.01
#: Share of each model's layers Figure 1's task set must leave complete.
FIGURE1_COVERAGE = 0.75


def extremum_layer(values: pd.Series, direction: str = "max", tol: float = TIE_TOL) -> int:
    """The layer (index) of the best value, ``max`` or ``min``; ties (within ``tol``) go to the deeper layer."""
    best = values.max() if direction == "max" else values.min()
    near = values >= best - tol if direction == "max" else values <= best + tol
    return int(values.index[near].max())


def cheapest_within(scores: pd.Series, cost: pd.Series, tol: float = ONE_POINT) -> int:
    """The cheapest layer (index of ``scores``) scoring within ``tol`` of the best: lowest ``cost`` (per layer, same
    index) among the layers with a score at least best − ``tol``; equal costs (within :data:`TIE_TOL`) go to the
    shallower layer. Layers without a score or a cost are never picked."""
    both = scores.rename("score").to_frame().join(cost.rename("cost"), how="outer").dropna()
    if both.empty:
        raise ValueError("no layer has both a score and a cost")
    near = both[both["score"] >= both["score"].max() - tol - TIE_TOL]
    return int(near.index[near["cost"] <= near["cost"].min() + TIE_TOL].min())


def most_frequent_layer(picks: Iterable[int]) -> int:
    """The layer picked most often; ties go to the deeper layer."""
    counts = Counter(int(layer) for layer in picks)
    most = max(counts.values())
    return max(layer for layer, count in counts.items() if count == most)


def default_layer(layers: Iterable[int], n_layers: int) -> int:
    """The layer kept when a signal cannot rank the layers: the last layer where it is scored, else the deepest."""
    layers = list(layers)
    return n_layers if n_layers in layers else int(max(layers))


def from_depth(layers: pd.Index, n_layers: int, depth: float) -> pd.Index:
    """The ``layers`` at relative depth ``depth`` or deeper (a float depth compared within :data:`TIE_TOL`)."""
    return layers[layers / n_layers >= depth - TIE_TOL]


def last_layer_of(table: pd.DataFrame) -> int:
    """The last layer of a (one-model) table: its ``n_layers`` where it records one, else its deepest layer (tables
    without ``n_layers`` hold every layer: stress and dip tests, released metrics)."""
    if "n_layers" in table.columns and table["n_layers"].notna().any():
        return int(table["n_layers"].dropna().iloc[0])
    return int(table["layer"].max())


def nearest_layer(layers: Iterable[int], target: float) -> int:
    """The layer nearest ``target`` (a layer number, possibly fractional); the deeper of two equally near."""
    return int(min(layers, key=lambda k: (abs(k - target), -k)))


def last_score(curve: pd.Series, n_layers: int) -> float:
    """The score at the last layer (``n_layers``), NaN when the curve has none there."""
    return float(curve[n_layers]) if n_layers in curve.index else math.nan


def common_tasks(scores: pd.DataFrame, coverage: float = FIGURE1_COVERAGE) -> list[str]:
    """Figure 1's task set over the models of ``scores`` (``model, task, layer, main_score``): start from the tasks
    every model scored and drop, one at a time, the task whose removal completes the most layers (ties: the later
    name), until every model has at least ``coverage`` of its scored layers holding all remaining tasks."""
    tables = [
        part.pivot_table(index="layer", columns="task", values="main_score") for _, part in scores.groupby("model")
    ]
    if not tables:
        return []
    tasks = sorted(set.intersection(*(set(t.columns) for t in tables)))

    def complete(chosen: list[str]) -> list[float]:
        return [t[chosen].notna().all(axis=1).mean() for t in tables]

    while tasks and min(complete(tasks)) < coverage:
        tasks.remove(max(tasks, key=lambda t: (sum(complete([x for x in tasks if x != t])), t)))
    return tasks


def fewer_shared_tasks(scores: pd.DataFrame, chosen: list[str], what: str = "Figure 1") -> str | None:
    """One line when ``chosen`` (:func:`common_tasks`) has fewer tasks than some model of ``scores`` scored, naming
    every model with its count; ``None`` when no model loses a task."""
    own = scores.groupby("model", sort=True)["task"].nunique()
    if own.empty or own.max() <= len(chosen):
        return None
    counts = ", ".join(f"{model} {n}" for model, n in own.items())
    names = ", ".join(chosen)
    shared = f"only the {tasks_phrase(len(chosen))} every run shares ({names})"
    if set.intersection(*(set(p["task"]) for _, p in scores.groupby("model"))) != set(chosen):
        shared = f"only {tasks_phrase(len(chosen))} ({names}: shared by every run, less those missing at many layers)"
    if not chosen:
        shared = "each run's own tasks (no task is shared)"
    return f"{what} averages {shared}; tasks per run: {counts} (Table 1 averages each run's own)"


def best_of(table: pd.DataFrame) -> dict[str, object]:
    """The best of one model's (layers × tasks) score table in both of ``select``'s scopes (the module's rules):
    ``layer``/``single`` the one layer of the highest mean over tasks at the ``complete`` layers (those every task
    has), ``per_task`` the mean over tasks of each task's best; ``partial`` names each task lacking a scored layer."""
    table = table.dropna(how="all")
    complete = table.dropna()
    mean = complete.mean(axis=1)
    layer = extremum_layer(mean, "max") if len(mean) else None
    lacking = {str(t): int(table[t].isna().sum()) for t in table.columns if table[t].isna().any()}
    return {
        "n_tasks": table.shape[1],
        "layer": layer,
        "single": float(mean[layer]) if layer is not None else math.nan,
        "per_task": float(table.max().mean()),
        "complete": [int(k) for k in complete.index],
        "layers": [int(k) for k in table.index],
        "partial": lacking,
    }


def best_line(model: str, table: pd.DataFrame, per_task: bool) -> str:
    """One line saying what ``best`` and ``regret`` compare in the table ``select`` printed (``per_task``: a layer
    per task, else one layer for every task), with the other scope's best beside it, and, in a partial run, which
    layers the mean over tasks compares."""
    best = best_of(table)
    single = (
        f"one layer for every task: layer {best['layer']}, mean {best['single']:.4f}"
        if best["layer"] is not None
        else "one layer for every task: none (no layer is scored on every task)"
    )
    own = f"each task at its own best layer: mean {best['per_task']:.4f}"
    shown = "each task's own best layer (a layer per task)" if per_task else "that one layer"
    line = f"best of {model} over {tasks_phrase(int(best['n_tasks']))}: {single}; {own}; the table's best_score "
    line += f"and regret are against {shown}"
    if best["partial"]:
        compared = _span(best["complete"]) if best["complete"] else "none"
        lacking = ", ".join(f"{t} ({n})" for t, n in best["partial"].items())
        line += (
            f"; the mean over tasks compares layers {compared} of {_span(best['layers'])}, the ones every task has "
            f"(tasks lacking layers: {lacking})"
        )
    return line


def _span(layers: list[int]) -> str:
    contiguous = layers == list(range(layers[0], layers[-1] + 1))
    return f"{layers[0]}-{layers[-1]}" if contiguous and len(layers) > 2 else ", ".join(map(str, layers))


def tasks_phrase(n: int) -> str:
    return f"{n} task" if n == 1 else f"{n} tasks"


def complete_layer_means(tasks: pd.DataFrame, chosen: list[str]) -> pd.DataFrame:
    """Per model and layer, the mean score over ``chosen`` tasks at the layers that hold all of them (a layer lacking
    one is a gap in the curve, never an average over fewer tasks); ``tasks`` has one score per (model, task, layer)
    and ``n_layers`` (:func:`~.table1.task_scores`)."""
    rows = tasks[tasks["task"].isin(chosen)]
    grouped = rows.groupby(["model", "layer"], sort=True).agg(
        n_layers=("n_layers", "first"), main_score=("main_score", "mean"), n_tasks=("task", "nunique")
    )
    out = grouped[grouped["n_tasks"] == len(chosen)].reset_index()
    depth = out["layer"] / out["n_layers"].where(out["n_layers"] > 0)
    return out.assign(relative_depth=depth.fillna(1.0))
