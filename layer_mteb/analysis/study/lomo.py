"""Leave-one-model-out (LOMO): across models with own-text metrics, one label-free selector chosen on the other
models and judged on the held-out one, beside the paper's rule and the last layer there.

Population, rows, usable selectors and ranking are the study engine's (:mod:`.engine`), as for leave-one-family-out
(:mod:`.lofo`): a model enters with the tasks that have its own-text prompt entropy, a score at its last layer and
enough of its layers; a selector competes only where it picks on every task of the held-out model (known without its
scores) and of every training model. :func:`model_leaderboard` is the per-model table of ``select``'s ranking.
"""

from __future__ import annotations

import pandas as pd

from layer_mteb.analysis.rules import PAPER_RULE
from layer_mteb.analysis.selection.select import leaderboard
from layer_mteb.analysis.selection.selectors import ModelData, Selector, evaluate, selectors
from layer_mteb.analysis.study.engine import board, cells, per_model, score_models, study_rows, usable_on


def study_models(scores: pd.DataFrame, metrics: pd.DataFrame, *, min_tasks: int = 3) -> list[ModelData]:
    """The engine's population (:func:`~.engine.score_models`) on tasks with own-text prompt entropy."""
    return score_models(scores, metrics, min_tasks=min_tasks, own_metric="prompt_entropy")[0]


def model_leaderboard(models: list[ModelData], candidates: list[Selector] | None = None) -> pd.DataFrame:
    """(model, selector) -> tasks, mean chosen / last / best score, regret and gain, ranked inside each model by
    ``select``'s leaderboard (:func:`~layer_mteb.analysis.selection.select.leaderboard`)."""
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
