"""The selector study: every label-free selector of :mod:`~.selectors` scored against each task's real per-layer
scores across models with own-text metrics, and one selector chosen by leave-one-model-out (LOMO), so its quality on
a model is measured without that model's scores (leave-one-family-out and the ``auto`` policy: :mod:`~.lofo`).

The study applies the same engine as ``layer-mteb select`` (:func:`~.selectors.evaluate`) to tables ×100. Every
selector of one model is evaluated on the same tasks (those with the model's own-text metrics and a score at its last
layer, :mod:`~.rules`), each task on the layers it has: a released model lacking some layers keeps its other layers.
"""

from __future__ import annotations

import pandas as pd

from layer_mteb.analysis.selection.select import leaderboard as rank
from layer_mteb.analysis.selection.selectors import PAPER_RULE, ModelData, Selector, evaluate, selectors
from layer_mteb.metrics.texts import source_task


def per_model(evaluation: pd.DataFrame) -> pd.DataFrame:
    """(model, selector) -> tasks, mean chosen / last / best score, regret and gain: the library's one ranking
    (:func:`layer_mteb.analysis.selection.select.leaderboard`), ranked inside each model."""
    return rank(evaluation, by=("selector",), within=("model",))


def complete_selectors(summary: pd.DataFrame, models: list[str]) -> list[str]:
    """Selectors defined on every task of every one of ``models`` (a fair comparison needs the same tasks)."""
    full = summary[summary["model"].isin(models)]
    counts = full.groupby("selector")["model"].nunique()
    return [name for name, n in counts.items() if n == len(models)]


def across_models(summary: pd.DataFrame) -> pd.DataFrame:
    """Selectors defined on every model, ranked by :func:`~.selection.leaderboard` over models (regret averaged per
    model, each model weighs the same), with the worst model's gain."""
    names = complete_selectors(summary, summary["model"].unique().tolist())
    rows = summary[summary["selector"].isin(names)].sort_values("selector", kind="stable")
    board = rank(rows.assign(task=rows["model"]), by=("selector",))
    board["worst_gain"] = board["selector"].map(rows.groupby("selector")["gain"].min())
    board = board.rename(columns={"n_tasks": "models"})
    return board[["selector", "chosen_score", "regret", "gain", "worst_gain", "models"]]


def choose(training: list[ModelData], candidates: list[Selector]) -> str:
    """The candidate with the least regret averaged over the ``training`` models (defined on all of them)."""
    return str(across_models(per_model(evaluate(training, candidates)))["selector"].iloc[0])


def leave_one_model_out(models: list[ModelData], candidates: list[Selector] | None = None) -> pd.DataFrame:
    """For each model: the selector chosen on the others, and how it, the paper's rule and the last layer do there.

    Only selectors defined on the held-out model's metrics compete (known without its scores); the held-out
    model's scores are read only to score the pick after it is made.
    """
    candidates = candidates or selectors()
    rows = []
    for held in models:
        usable = [s for s in candidates if all(s.pick(held, t) is not None for t in held.scores.columns)]
        training = [m for m in models if m.name != held.name]
        pick = choose(training, usable)
        by_name = {s.name: s for s in candidates}
        result = per_model(evaluate([held], [by_name[pick], by_name[PAPER_RULE]])).set_index("selector")
        rows.append(
            {
                "held_out": held.name,
                "chosen_selector": pick,
                "n_tasks": int(result.loc[pick, "n_tasks"]),
                "chosen_score": result.loc[pick, "chosen_score"],
                "last_score": result.loc[pick, "last_score"],
                "best_score": result.loc[pick, "best_score"],
                "regret": result.loc[pick, "regret"],
                "gain": result.loc[pick, "gain"],
                "paper_rule_score": result.loc[PAPER_RULE, "chosen_score"],
                "paper_rule_regret": result.loc[PAPER_RULE, "regret"],
                "paper_rule_gain": result.loc[PAPER_RULE, "gain"],
            }
        )
    return pd.DataFrame(rows)


def study_models(scores: pd.DataFrame, metrics: pd.DataFrame, *, min_tasks: int = 3) -> list[ModelData]:
    """Models with own-text prompt entropy for at least ``min_tasks`` tasks that have the model's last layer,
    restricted to those tasks (scores ×100, missing layers left NaN; metric curves, one per (metric, texts))."""
    found = []
    for name, part in scores.groupby("model", sort=False):
        model_metrics = metrics[metrics["model"] == name]
        own_texts = model_metrics["texts"].map(source_task).notna()
        own = model_metrics[(model_metrics["metric"] == "prompt_entropy") & own_texts]
        tasks = sorted(set(own["texts"].map(source_task)) & set(part["task"]))
        table = part[part["task"].isin(tasks)].pivot_table(index="layer", columns="task", values="main_score")
        n_layers = int(part["n_layers"].iloc[0])
        if n_layers not in table.index:
            continue  # no task has a last layer to compare with
        table = (table.loc[:, table.loc[n_layers].notna()] * 100).sort_index()
        if table.shape[1] < min_tasks or len(table) < 3:
            continue
        curves = model_metrics.pivot_table(index="layer", columns=["metric", "texts"], values="value", aggfunc="mean")
        found.append(
            ModelData(
                name=str(name),
                n_layers=n_layers,
                scores=table,
                metrics={key: curves[key].dropna() for key in curves.columns},
            )
        )
    return found
