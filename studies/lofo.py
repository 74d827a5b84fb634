"""Leave-one-family-out (LOFO): the ``select --by auto`` policy fitted on some model families and judged on a family
it never saw, over every model whose scores allow it.

The population, the candidates' rows and the ranking are the study engine's (:mod:`.engine`): every model with
enough tasks scored at their last layer and at most layers, metric curves attached where they exist. A candidate is
judged on the models where it is defined: the last layer and the fixed depths on every model, a metric's extremum
only on models with that metric for every task. A rule is one candidate per kind of model
(:mod:`layer_mteb.analysis.selection.auto`), or, in the ``by_type`` variant, a depth per task type (the type is known
without labels), each chosen by its mean gain over the last layer on the training models and kept only when it was
chosen on :data:`MIN_FAMILIES` families and gains at least a margin; the margin and the variant are chosen by
leave-one-family-out inside the training families.
Checkpoints of one model (``name@step``) share one model's weight. The held-out family's scores are read only to
score its picks, after the rule is fixed.
"""

from __future__ import annotations

import dataclasses
import json
from datetime import date
from pathlib import Path

import pandas as pd

from layer_mteb.analysis.rules import PAPER_RULE
from layer_mteb.analysis.selection.auto import KINDS, POLICY_FILE, Policy, Rule
from layer_mteb.analysis.selection.selectors import ModelData, Selector
from layer_mteb.common.files import atomic_write
from layer_mteb.common.package import VERSION
from studies.engine import board, cells, per_model, study_rows, usable_on

#: Abstention margins the nested leave-one-family-out chooses from (mean gain over the last layer, score points).
MARGINS = (0.0, 0.5, 1.0, 2.0)
#: ``fixed``: one selector per kind of model; ``by_type``: a fixed depth per task type.
VARIANTS = ("fixed", "by_type")
#: Fewest training families a rule other than the last layer must be chosen on (one family is no evidence across).
MIN_FAMILIES = 2
_LAST = "last_layer"


def apply_rule(rows: pd.DataFrame, rule: Rule) -> pd.DataFrame:
    """The rows (or cells) of ``rows`` that ``rule`` picks: per task, its type's selector (``by_type``) or the rule's
    own."""
    wanted = rows["task_type"].map(lambda t: rule.by_type.get(t, rule.selector))
    return rows[rows["selector"] == wanted]


def rule_scores(cells: pd.DataFrame, rule: Rule) -> pd.DataFrame:
    """Per model of ``cells``: mean regret and gain of ``rule``'s picks, and the model's weight."""
    per = apply_rule(cells, rule).groupby("model")[["regret", "gain", "n"]].sum()
    per["weight"] = cells.groupby("model")["weight"].first()
    return per.assign(regret=per["regret"] / per["n"], gain=per["gain"] / per["n"])


def _depth_by_type(cells: pd.DataFrame) -> Rule:
    """The fixed depth with the most gain over all training tasks, and per task type the depth with the most gain
    on that type's tasks where :data:`MIN_FAMILIES` training families have that type (else the overall one)."""
    cells = cells[cells["selector"].str.startswith("depth=")]
    overall = str(board(cells)["selector"].iloc[0])
    by_type = {}
    for kind, part in cells.groupby("task_type", sort=True):
        if kind and part["family"].nunique() >= MIN_FAMILIES:
            by_type[str(kind)] = str(board(part)["selector"].iloc[0])
    return Rule(overall, "", {t: name for t, name in by_type.items() if name != overall})


def _best(cells: pd.DataFrame, variant: str) -> tuple[Rule, float]:
    """The best rule of ``variant`` on ``cells`` (one kind's training models, usable selectors) and its mean gain."""
    ranked = board(cells)  # a selector defined on fewer families than the rule needs is no candidate
    ranked = ranked[ranked["families"] >= min(MIN_FAMILIES, cells["family"].nunique())]
    several = cells["family"].nunique() >= MIN_FAMILIES
    best = _depth_by_type(cells) if variant == "by_type" and several else Rule(str(ranked["selector"].iloc[0]), "")
    scored = rule_scores(cells, best)
    return best, float((scored["gain"] * scored["weight"]).sum() / scored["weight"].sum())


def _decide(cells: pd.DataFrame, best: Rule, gain: float, margin: float) -> Rule:
    """``best`` with why, or the last layer when it is the last layer, was found on fewer than
    :data:`MIN_FAMILIES` families or gains less than ``margin`` (an abstention)."""
    families = sorted(cells["family"].unique())
    where = f"{cells['model'].nunique()} models of {len(families)} famil{'y' if len(families) == 1 else 'ies'}"
    if (best.selector == _LAST and not best.by_type) or gain <= 0:
        return Rule(_LAST, f"the last layer has the least regret on {where}")
    if len(families) < MIN_FAMILIES:
        return Rule(_LAST, f"abstained: {best.label} was best on one family only ({families[0]})")
    if gain < margin:
        return Rule(_LAST, f"abstained: {best.label} gains {gain:.2f} < margin {margin:g} on {where}")
    return dataclasses.replace(best, reason=f"most gain on {where} ({gain:+.2f} >= margin {margin:g})")


def fit_rule(cells: pd.DataFrame, usable: list[str], margin: float, variant: str = "fixed") -> Rule:
    """The rule for one kind of model from its training models' ``cells`` (:func:`cells`): the usable selector
    (``fixed``) or depth per task type (``by_type``) with the most gain over the last layer, unless that is the last
    layer, was chosen on fewer than :data:`MIN_FAMILIES` families, or gains less than ``margin`` (then: abstain)."""
    cells = cells[cells["selector"].isin(usable)]
    if cells.empty:
        return Rule(_LAST, "abstained: no training model of this kind")
    return _decide(cells, *_best(cells, variant), margin)


def fit_policy(
    cells: pd.DataFrame, usable: list[str], margin: float | None = None, variant: str | None = None
) -> Policy:
    """One rule per kind of model (:func:`fit_rule`) from the training models' ``cells``; ``margin`` or ``variant``
    ``None``: chosen by leave-one-family-out inside these models (:func:`choose_settings`)."""
    if margin is None or variant is None:
        margin, variant = choose_settings(cells, usable, (variant,) if variant else VARIANTS)
    rules = {kind: fit_rule(cells[cells["kind"] == kind], usable, margin, variant) for kind in KINDS}
    models = tuple(sorted(cells["model"].unique()))
    return Policy(rules, margin, variant, models, tuple(sorted(cells["family"].unique())))


def choose_settings(cells: pd.DataFrame, usable: list[str], variants: tuple[str, ...] = VARIANTS) -> tuple[float, str]:
    """The (margin, variant) of :data:`MARGINS` × ``variants`` with the least weighted mean regret when each
    family of ``cells`` is held out in turn (ties: the larger, more cautious margin, then ``fixed``)."""
    totals = {(variant, margin): [0.0, 0.0] for variant in variants for margin in MARGINS}
    for family in sorted(cells["family"].unique()):
        held = cells[cells["family"] == family]
        inner = usable_on(held, usable)
        training = cells[(cells["family"] != family) & cells["selector"].isin(inner)]
        for variant in variants:
            fitted = {}
            for kind in held["kind"].unique():
                part = training[training["kind"] == kind]
                fitted[kind] = (part, *_best(part, variant)) if not part.empty else None
            for margin in MARGINS:
                for kind, found in fitted.items():
                    rule = _decide(*found[:3], margin) if found else Rule(_LAST, "")
                    scored = rule_scores(held[held["kind"] == kind], rule)
                    totals[(variant, margin)][0] += float((scored["regret"] * scored["weight"]).sum())
                    totals[(variant, margin)][1] += float(scored["weight"].sum())
    ranked = sorted(totals.items(), key=lambda kv: (round(kv[1][0] / kv[1][1], 9), -kv[0][1], VARIANTS.index(kv[0][0])))
    (variant, margin), _ = ranked[0]
    return margin, variant


def leave_one_family_out(
    models: list[ModelData], candidates: list[Selector] | None = None, variant: str | None = None
) -> pd.DataFrame:
    """For each family (``auto.FAMILIES``): the policy fitted on the other families (margin and, unless ``variant``
    is given, variant chosen inside them), applied to each of its models, beside the last layer and the paper's rule
    there (on the tasks that have its metrics). The held-out family's scores are read only to score its picks, after
    the policy is fixed."""
    rows = study_rows(models, candidates)
    summed = cells(rows)
    usable = list(dict.fromkeys(rows["selector"]))
    found = []
    for family in dict.fromkeys(rows["family"]):
        inside = summed["family"] == family
        policy = fit_policy(summed[~inside], usable_on(summed[inside], usable), variant=variant)
        for _, part in rows[rows["family"] == family].groupby("model", sort=False):
            found.append(_record(part, policy, family))
    return pd.DataFrame(found)


def _record(part: pd.DataFrame, policy: Policy, family: str) -> dict:
    first = part.iloc[0]
    rule = policy.rules[first["kind"]]
    picked = apply_rule(part, rule)
    paper = part[part["selector"] == PAPER_RULE]
    return {
        "held_out_family": family,
        "model": first["model"],
        "kind": first["kind"],
        "weight": first["weight"],
        "selector": rule.label,
        "variant": policy.variant,
        "margin": policy.margin,
        "n_tasks": picked["task"].nunique(),
        **{c: picked[c].mean() for c in ("chosen_score", "last_score", "best_score", "regret", "gain")},
        "last_regret": (picked["best_score"] - picked["last_score"]).mean(),
        "paper_rule_tasks": paper["task"].nunique(),
        "paper_rule_regret": paper["regret"].mean(),
        "paper_rule_gain": paper["gain"].mean(),
        "reason": rule.reason,
    }


def candidate_table(models: list[ModelData], candidates: list[Selector] | None = None) -> pd.DataFrame:
    """Every candidate on every model where it is defined (all tasks): mean regret and gain, with the family and
    kind; no fitting, so no family needs holding out (a fixed depth's regret on each model, say)."""
    rows = study_rows(models, candidates)
    per = per_model(cells(rows)).join(rows.groupby("model")["kind"].first(), on="model")
    return per[["model", "family", "kind", "weight", "selector", "regret", "gain"]].sort_values(["model", "selector"])


def lofo_means(lofo: pd.DataFrame) -> pd.DataFrame:
    """The record on average, four ways: over models (checkpoints left out), over families (their models averaged),
    over every folder, and over every folder with checkpoints sharing their model's weight."""
    numbers = ["regret", "gain", "last_regret"]
    final = lofo[~lofo["model"].str.contains("@")]
    views = {
        "models": final,
        "families": final.groupby("held_out_family", sort=False)[numbers].mean().reset_index(),
        "folders": lofo,
    }
    found = []
    for name, frame in views.items():
        found.append({"mean_over": name, "n": len(frame), **frame[numbers].mean().to_dict()})
    w = lofo["weight"]
    found.append(
        {"mean_over": "folders_weighted", "n": len(lofo)} | {c: (lofo[c] * w).sum() / w.sum() for c in numbers}
    )
    out = pd.DataFrame(found)
    worst = {"models": final["gain"].min(), "families": final["gain"].min()}
    return out.assign(worst_gain=out["mean_over"].map(worst).fillna(lofo["gain"].min()))


def train_policy(models: list[ModelData], lofo: pd.DataFrame, candidates: list[Selector] | None = None) -> Policy:
    """The policy ``select --by auto`` ships: fitted on every model (margin and variant by leave-one-family-out
    inside them), with its provenance and the leave-one-family-out record ``lofo`` it was judged by."""
    rows = study_rows(models, candidates)
    policy = fit_policy(cells(rows), list(dict.fromkeys(rows["selector"])))
    means = lofo_means(lofo).set_index("mean_over")
    record = {
        "lofo_mean_regret": round(float(means.loc["models", "regret"]), 4),
        "lofo_worst_gain": round(float(means.loc["models", "worst_gain"]), 4),
        "last_layer_mean_regret": round(float(means.loc["models", "last_regret"]), 4),
        "lofo_family_mean_regret": round(float(means.loc["families", "regret"]), 4),
        "lofo_models": int(means.loc["models", "n"]),
    }
    return dataclasses.replace(policy, date=date.today().isoformat(), package_version=VERSION, record=record)


def write_policy(policy: Policy, path: str | Path = POLICY_FILE) -> Path:
    """Write ``policy`` as JSON; a file that differs only in its date is left as it is (same inputs, same bytes)."""
    path = Path(path)
    if path.is_file():
        try:
            old = json.loads(path.read_text())
            if {**old, "date": ""} == {**policy.to_json(), "date": ""}:
                return path
        except ValueError:
            pass
    text = json.dumps(policy.to_json(), indent=2) + "\n"
    atomic_write(path, lambda tmp: Path(tmp).write_text(text))
    return path
