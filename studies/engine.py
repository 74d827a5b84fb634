"""The one study engine both selector studies use (leave one model out, here; leave one family out,
:mod:`.lofo`): the population of models, every candidate's rows on every model, per-model sums, which selectors are
usable on a model (known without its scores) and the one ranking.

A candidate is judged on the models where it is defined: it must pick on every task of a model. Rankings are by
weighted mean regret over models (each model weighs 1; checkpoints of one model share its weight), then gain, then
name; over the same tasks, least regret and most gain over the last layer are the same order.

Leave-one-model-out (LOMO): across models with own-text metrics, one label-free selector chosen on the other models
and judged on the held-out one, beside the paper's rule and the last layer there. A model enters with the tasks that
have its own-text prompt entropy, a score at its last layer and enough of its layers; a selector competes only where
it picks on every task of the held-out model (known without its scores) and of every training model.
:func:`model_leaderboard` is the per-model table of ``select``'s ranking.
"""

from __future__ import annotations

from collections.abc import Iterable

import pandas as pd

from layer_mteb.analysis.rules import PAPER_RULE
from layer_mteb.analysis.selection.auto import family_of, kind_of
from layer_mteb.analysis.selection.leaderboard import leaderboard
from layer_mteb.analysis.selection.selectors import ModelData, Selector, evaluate, pooling_of, selectors
from layer_mteb.metrics.texts import task_of_label
from layer_mteb.tasks.catalog import task_type

#: Least share of a task's layers (0 … last) that must be scored for the task to be judged.
STUDY_COVERAGE = 0.5
MIN_TASKS = 3
#: what the per-model sums carry (means are sums ÷ n)
_SUMMED = ["regret", "gain", "chosen_score", "last_score", "best_score"]


def score_models(
    scores: pd.DataFrame,
    metrics: pd.DataFrame | None = None,
    *,
    coverage: float = STUDY_COVERAGE,
    min_tasks: int = MIN_TASKS,
    own_metric: str | None = None,
) -> tuple[list[ModelData], pd.DataFrame]:
    """Every model with at least ``min_tasks`` tasks scored at its last layer and at ``coverage`` of its layers
    (and, with ``own_metric``, measured with that metric on the task's own texts), restricted to those tasks
    (scores ×100), with its metric curves, task types and pooling; and the models left out, each with why
    (``model, reason``)."""
    kept, excluded = [], []
    for name, part in scores.groupby("model", sort=False):
        n_layers = int(part["n_layers"].iloc[0])
        table = part.pivot_table(index="layer", columns="task", values="main_score").reindex(range(n_layers + 1))
        judged = table.loc[n_layers].notna() & (table.notna().mean() >= coverage)
        if own_metric is not None:
            judged &= table.columns.isin(_own_metric_tasks(metrics, str(name), own_metric))
        if judged.sum() < min_tasks:
            excluded.append({"model": name, "reason": _why_not(table, n_layers, int(judged.sum()), coverage)})
            continue
        table = table.loc[:, judged].dropna(how="all") * 100
        types = part.dropna(subset=["task_type"]).groupby("task")["task_type"].first().to_dict()
        kept.append(
            ModelData(
                name=str(name),
                n_layers=n_layers,
                scores=table,
                metrics=_curves(metrics, str(name)),
                task_types={task: types.get(task) or task_type(task) or "" for task in table.columns},
                pooling=pooling_of(part),
            )
        )
    return kept, pd.DataFrame(excluded, columns=["model", "reason"])


def _why_not(table: pd.DataFrame, n_layers: int, judged: int, coverage: float) -> str:
    present = table.index[table.notna().any(axis=1)]
    scored = f"layers {present.min()}–{present.max()} of 0–{n_layers} scored"
    if table.loc[n_layers].isna().all():
        return f"no task has its last layer ({scored})"
    return f"{judged} task(s) with the last layer and ≥ {coverage:.0%} of the layers ({scored})"


def _own_metric_tasks(metrics: pd.DataFrame | None, name: str, metric: str) -> set[str]:
    if metrics is None or metrics.empty:
        return set()
    own = metrics[(metrics["model"] == name) & (metrics["metric"] == metric)]["texts"].map(task_of_label)
    return set(own.dropna())


def _curves(metrics: pd.DataFrame | None, name: str) -> dict[tuple[str, str], pd.Series]:
    if metrics is None or metrics.empty:
        return {}
    own = metrics[metrics["model"] == name]
    curves = own.pivot_table(index="layer", columns=["metric", "texts"], values="value", aggfunc="mean")
    return {key: curves[key].dropna() for key in curves.columns}


def weights(names: Iterable[str]) -> dict[str, float]:
    """Each model weighs 1; the checkpoints of one model (``name@step``, with ``name`` itself) share its weight."""
    names = list(dict.fromkeys(names))
    base = pd.Series({n: n.partition("@")[0] for n in names})
    return {n: 1 / int((base == base[n]).sum()) for n in names}


def study_rows(models: list[ModelData], candidates: list[Selector] | None = None) -> pd.DataFrame:
    """:func:`~.selectors.evaluate` rows of every candidate on every model, with each model's family, kind,
    weight (:func:`weights`) and each task's type."""
    rows = evaluate(models, candidates or selectors())
    by_name = {m.name: m for m in models}
    w = weights(by_name)
    return rows.assign(
        family=rows["model"].map(lambda n: family_of(n).name),
        kind=rows["model"].map(lambda n: kind_of(n, by_name[n].pooling)),
        weight=rows["model"].map(w),
        task_type=[by_name[m].task_types.get(t, "") for m, t in zip(rows["model"], rows["task"], strict=True)],
    )


def cells(rows: pd.DataFrame) -> pd.DataFrame:
    """:func:`study_rows` summed per (model, selector, task type): regret, gain, the chosen, last and best scores
    and the task count ``n``, with the model's family, kind and weight; every fit reads only these sums."""
    sums = rows.groupby(["model", "selector", "task_type"], sort=True)[_SUMMED].sum()
    sums["n"] = rows.groupby(["model", "selector", "task_type"], sort=True).size()
    info = rows.groupby("model")[["family", "kind", "weight"]].first()
    return sums.reset_index().join(info, on="model")


def per_model(cells: pd.DataFrame) -> pd.DataFrame:
    """(selector, model) -> mean regret, gain, chosen, last and best score over the model's tasks (``n_tasks``), for
    selectors that picked on every task of the model in ``cells``."""
    per = cells.groupby(["selector", "model"], sort=True)[[*_SUMMED, "n"]].sum().reset_index()
    n_tasks = per.groupby("model")["n"].max()
    per = per[per["n"] == per["model"].map(n_tasks)]
    info = cells.groupby("model")[["family", "weight"]].first()
    per = per.join(info, on="model")
    return per.assign(**{c: per[c] / per["n"] for c in _SUMMED}).rename(columns={"n": "n_tasks"})


def board(cells: pd.DataFrame) -> pd.DataFrame:
    """The one ranking of both studies: selectors by weighted mean gain over the last layer on the models where each
    is defined (gain compares selectors defined on different models; on the same ones it orders as regret does),
    then by regret, then name; with the mean chosen score, the worst model's gain and how many models and
    families that is."""
    per = per_model(cells)
    numbers = ["regret", "gain", "chosen_score"]
    per = per.assign(**{f"w{c}": per[c] * per["weight"] for c in numbers})
    grouped = per.groupby("selector")
    out = grouped[[*(f"w{c}" for c in numbers), "weight"]].sum()
    out["models"], out["families"] = grouped["model"].nunique(), grouped["family"].nunique()
    out["worst_gain"] = grouped["gain"].min()
    out = out.assign(**{c: out[f"w{c}"] / out["weight"] for c in numbers}).reset_index()
    out = out.sort_values(["gain", "regret", "selector"], ascending=[False, True, True], kind="stable")
    return out[["selector", "chosen_score", "regret", "gain", "worst_gain", "models", "families"]].reset_index(
        drop=True
    )


def usable_on(cells: pd.DataFrame, names: list[str]) -> list[str]:
    """The selectors of ``names`` that pick on every task of every model of ``cells`` (known without its scores)."""
    counts = per_model(cells).groupby("selector")["model"].nunique()
    return [name for name in names if counts.get(name, 0) == cells["model"].nunique()]


def study_models(scores: pd.DataFrame, metrics: pd.DataFrame, *, min_tasks: int = 3) -> list[ModelData]:
    """The engine's population (:func:`~.engine.score_models`) on tasks with own-text prompt entropy."""
    return score_models(scores, metrics, min_tasks=min_tasks, own_metric="prompt_entropy")[0]


def model_leaderboard(models: list[ModelData], candidates: list[Selector] | None = None) -> pd.DataFrame:
    """(model, selector) -> tasks, mean chosen / last / best score, regret and gain, ranked inside each model by
    ``select``'s leaderboard (:func:`~layer_mteb.analysis.selection.leaderboard.leaderboard`)."""
    return leaderboard(evaluate(models, candidates or selectors()), by=("selector",), within=("model",))


def across_models(models: list[ModelData], candidates: list[Selector] | None = None) -> pd.DataFrame:
    """Selectors defined on every model, ranked by the engine (:func:`~.engine.board`)."""
    ranked = board(cells(study_rows(models, candidates)))
    return ranked[ranked["models"] == len(models)].drop(columns="families").reset_index(drop=True)


def leave_one_model_out(models: list[ModelData], candidates: list[Selector] | None = None) -> pd.DataFrame:
    """For each model: the selector the engine ranks first on the others, and how it, the paper's rule and the last
    layer do there. The held-out model's scores are read only to score the pick after it is made."""
    rows = study_rows(models, candidates)
    summed = cells(rows)
    names = list(dict.fromkeys(rows["selector"]))
    found = []
    for held in models:
        inside = summed["model"] == held.name
        training = summed[~inside & summed["selector"].isin(usable_on(summed[inside], names))]
        ranked = board(training)
        pick = str(ranked[ranked["models"] == training["model"].nunique()]["selector"].iloc[0])
        result = per_model(summed[inside]).set_index("selector")
        found.append(
            {
                "held_out": held.name,
                "chosen_selector": pick,
                "n_tasks": int(result.loc[pick, "n_tasks"]),
                **{c: result.loc[pick, c] for c in ("chosen_score", "last_score", "best_score", "regret", "gain")},
                "paper_rule_score": result.loc[PAPER_RULE, "chosen_score"],
                "paper_rule_regret": result.loc[PAPER_RULE, "regret"],
                "paper_rule_gain": result.loc[PAPER_RULE, "gain"],
            }
        )
    return pd.DataFrame(found)
