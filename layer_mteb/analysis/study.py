"""The selector study: every label-free selector of :mod:`~.selectors` scored against each task's real per-layer
scores across models, and one selector chosen by leave-one-model-out (LOMO), so its quality on a model is measured
without that model's scores.

The study applies the same engine as ``layer-mteb select`` (:func:`~.selectors.evaluate`) to tables ×100. Every
selector of one model is evaluated on the same tasks (those with the model's own-text metrics and a score at its last
layer, :mod:`~.rules`), each task on the layers it has: a released model lacking some layers keeps its other layers.
"""

from __future__ import annotations

import dataclasses

import pandas as pd

from layer_mteb.analysis.auto import KINDS, Policy, Rule, kind_of
from layer_mteb.analysis.families import family_of
from layer_mteb.analysis.selection import leaderboard as rank
from layer_mteb.analysis.selectors import PAPER_RULE, ModelData, Selector, evaluate, selectors


def per_model(evaluation: pd.DataFrame) -> pd.DataFrame:
    """(model, selector) -> tasks, mean chosen / last / best score, regret and gain: the library's one ranking
    (:func:`layer_mteb.analysis.selection.leaderboard`), ranked inside each model."""
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
        own_texts = model_metrics["texts"].str.startswith("task:")
        own = model_metrics[(model_metrics["metric"] == "prompt_entropy") & own_texts]
        tasks = sorted(set(own["texts"].str.removeprefix("task:")) & set(part["task"]))
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


#: Abstention margins the nested leave-one-family-out chooses from (mean gain over the last layer, score points).
MARGINS = (0.0, 0.5, 1.0, 2.0)
#: Fewest training families a rule other than the last layer must be chosen on (one family is no evidence across).
MIN_FAMILIES = 2


def _families(models: list[str] | pd.Series) -> dict[str, str]:
    return {str(m): family_of(str(m)).name for m in pd.Series(models).unique()}


def fit_rule(summary: pd.DataFrame, usable: list[str], margin: float) -> Rule:
    """The rule for one kind of model from its training models' ``summary`` (:func:`per_model` rows): the usable
    selector with the least mean regret, unless it is the last layer, was chosen on fewer than
    :data:`MIN_FAMILIES` families, or beats the last layer by less than ``margin`` on average (then: abstain)."""
    rows = summary[summary["selector"].isin(usable)]
    families = sorted(set(_families(rows["model"]).values()))
    if rows.empty:
        return Rule("last_layer", "abstained: no training model of this kind")
    board = across_models(rows)
    best = board.iloc[0]
    where = f"{rows['model'].nunique()} models of {len(families)} famil{'y' if len(families) == 1 else 'ies'}"
    if best["selector"] == "last_layer" or best["regret"] >= board.set_index("selector").loc["last_layer", "regret"]:
        return Rule("last_layer", f"the last layer has the least regret on {where}")
    if len(families) < MIN_FAMILIES:
        return Rule("last_layer", f"abstained: {best['selector']} was best on one family only ({families[0]})")
    if best["gain"] < margin:
        return Rule(
            "last_layer", f"abstained: {best['selector']} gains {best['gain']:.2f} < margin {margin:g} on {where}"
        )
    return Rule(str(best["selector"]), f"least regret on {where} (gain {best['gain']:+.2f} >= margin {margin:g})")


def fit_policy(summary: pd.DataFrame, usable: list[str], margin: float | None = None) -> Policy:
    """One rule per kind of model (:func:`fit_rule`) from the training models' ``summary``; ``margin`` ``None``
    chooses it by leave-one-family-out inside these models (:func:`choose_margin`)."""
    if margin is None:
        margin = choose_margin(summary, usable)
    kinds = summary["model"].map(kind_of)
    rules = {kind: fit_rule(summary[kinds == kind], usable, margin) for kind in KINDS}
    families = _families(summary["model"])
    return Policy(rules, margin, tuple(families), tuple(sorted(set(families.values()))))


def choose_margin(summary: pd.DataFrame, usable: list[str]) -> float:
    """The margin of :data:`MARGINS` with the least mean regret when each training family is held out in turn
    (ties: the larger, more cautious margin)."""
    families = _families(summary["model"])
    results = []
    for margin in MARGINS:
        regrets = []
        for family in sorted(set(families.values())):
            held = [m for m, f in families.items() if f == family]
            present = summary[summary["model"].isin(held)].groupby("selector")["model"].nunique()
            inner = [name for name in usable if present.get(name, 0) == len(held)]
            policy = fit_policy(summary[~summary["model"].isin(held)], inner, margin)
            for model in held:
                rows = summary[(summary["model"] == model) & (summary["selector"] == policy.rule_for(model).selector)]
                regrets.append(float(rows["regret"].iloc[0]) if len(rows) else float("nan"))
        results.append((pd.Series(regrets).mean(), -margin))
    return -min(results)[1]


def _usable(candidates: list[Selector], held: list[ModelData]) -> list[str]:
    """Selectors that can pick on every task of every held-out model (known from its metrics, not its scores)."""
    return [s.name for s in candidates if all(s.pick(m, t) is not None for m in held for t in m.scores.columns)]


def leave_one_family_out(models: list[ModelData], candidates: list[Selector] | None = None) -> pd.DataFrame:
    """For each family (:mod:`~.families`): the policy fitted on the other families (margin chosen inside them),
    applied to each of the family's models, beside the last layer and the paper's rule there.

    The held-out family's scores are read only to score its picks, after the policy is fixed.
    """
    candidates = candidates or selectors()
    summary = per_model(evaluate(models, candidates))
    family = _families([m.name for m in models])
    by = {s.name: s for s in candidates}
    rows = []
    for held_family in dict.fromkeys(family[m.name] for m in models):
        held = [m for m in models if family[m.name] == held_family]
        policy = fit_policy(summary[~summary["model"].isin([m.name for m in held])], _usable(candidates, held))
        for model in held:
            rule = policy.rule_for(model.name)
            picked = per_model(evaluate([model], [by[rule.selector], by[PAPER_RULE]])).set_index("selector")
            chosen, paper = picked.loc[rule.selector], picked.loc[PAPER_RULE]
            rows.append(
                {
                    "held_out_family": held_family,
                    "model": model.name,
                    "kind": kind_of(model.name),
                    "selector": rule.selector,
                    "margin": policy.margin,
                    "n_tasks": int(chosen["n_tasks"]),
                    **{c: chosen[c] for c in ("chosen_score", "last_score", "best_score", "regret", "gain")},
                    "last_regret": chosen["best_score"] - chosen["last_score"],
                    "paper_rule_score": paper["chosen_score"],
                    "paper_rule_regret": paper["regret"],
                    "paper_rule_gain": paper["gain"],
                    "reason": rule.reason,
                }
            )
    return pd.DataFrame(rows)


def train_policy(models: list[ModelData], lofo: pd.DataFrame, candidates: list[Selector] | None = None) -> Policy:
    """The policy ``select --by auto`` ships: fitted on every model (margin by leave-one-family-out inside them),
    with its provenance and the leave-one-family-out record ``lofo`` it was judged by."""
    from datetime import date

    from layer_mteb import __version__

    candidates = candidates or selectors()
    summary = per_model(evaluate(models, candidates))
    policy = fit_policy(summary, _usable(candidates, models))
    record = {
        "lofo_mean_regret": round(float(lofo["regret"].mean()), 4),
        "lofo_worst_gain": round(float(lofo["gain"].min()), 4),
        "last_layer_mean_regret": round(float(lofo["last_regret"].mean()), 4),
        "paper_rule_mean_regret": round(float(lofo["paper_rule_regret"].mean()), 4),
    }
    return dataclasses.replace(policy, date=date.today().isoformat(), package_version=__version__, record=record)
