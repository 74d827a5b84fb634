"""The selector study: label-free layer pickers scored against each task's real per-layer scores, across models,
and one picker chosen by leave-one-model-out (LOMO) so its quality on a model is measured without that model's scores.

A selector sees only metric curves and the model's depth, never scores. Per (model, task) it picks one layer; the
study reports the chosen layer's score, ``regret = best − chosen`` and ``gain = chosen − last`` (scores ×100).
Every selector of one model is evaluated on the same tasks (those with the model's own-text metrics and a score for
its last layer), each task on the layers it has: a released model lacking some layers keeps its other layers.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from layer_mteb.analysis.selection import leaderboard as leaderboard_of_rows
from layer_mteb.metrics import DIRECTIONS

#: The paper's rule: minimum prompt entropy of each task's own texts.
PAPER_RULE = "prompt_entropy@own"
BASELINES = ("last_layer", "middle_layer")
#: Metrics whose extremum is a candidate (the authors' six; the table's own names).
STUDY_METRICS = ("prompt_entropy", "dataset_entropy", "curvature", "infonce", "lidar", "dime")
WINDOWS = (0.0, 0.25, 0.5, 0.75)
DEPTHS = tuple(round(d, 1) for d in np.arange(0.1, 1.01, 0.1))


@dataclass(frozen=True)
class ModelData:
    """One model as the study sees it: scores (layers × tasks, ×100) and metric curves per (metric, texts)."""

    name: str
    n_layers: int
    scores: pd.DataFrame
    metrics: dict[tuple[str, str], pd.Series] = field(default_factory=dict)

    def layers(self, task: str) -> pd.Index:
        return self.scores[task].dropna().index

    def curve(self, metric: str, source: str, task: str) -> pd.Series | None:
        texts = f"task:{task}" if source == "own" else source
        values = self.metrics.get((metric, texts))
        return None if values is None else values[values.index.isin(self.layers(task))]


@dataclass(frozen=True)
class Selector:
    """A label-free picker: a metric's extremum (in its direction) on layers at relative depth ≥ ``from_depth``, or a
    fixed relative depth, or a baseline. ``name`` is what ``select --by`` and the tables call it:
    ``<metric>@<own|wikitext>[:from=<depth>]``, ``depth=<d>``, ``last_layer``, ``middle_layer``."""

    name: str
    metric: str | None = None
    source: str | None = None
    from_depth: float = 0.0
    depth: float | None = None

    def pick(self, model: ModelData, task: str) -> int | None:
        layers = model.layers(task)
        if self.name == "last_layer":
            return int(layers.max())
        if self.depth is not None or self.name == "middle_layer":
            target = (self.depth if self.depth is not None else 0.5) * model.n_layers
            return int(min(layers, key=lambda k: (abs(k - target), k)))
        values = model.curve(self.metric, self.source, task)
        if values is None:
            return None
        values = values[values.index / model.n_layers >= self.from_depth - 1e-9].dropna()
        if values.empty:
            return None
        best = values.min() if DIRECTIONS[self.metric] == "min" else values.max()
        return int(values.index[values == best].min())


def selectors(sources: tuple[str, ...] = ("own", "wikitext")) -> list[Selector]:
    """Every candidate: baselines, fixed depths, each metric on each source over each depth window."""
    found = [Selector("last_layer"), Selector("middle_layer")]
    found += [Selector(f"depth={d:.1f}", depth=d) for d in DEPTHS]
    for metric in STUDY_METRICS:
        for source in sources:
            for start in WINDOWS:
                suffix = f":from={start:.2f}" if start else ""
                found.append(Selector(f"{metric}@{source}{suffix}", metric, source, start))
    return found


def evaluate(models: list[ModelData], candidates: list[Selector]) -> pd.DataFrame:
    """One row per (model, selector, task): chosen layer and its score, the last and best scores (×100)."""
    rows = []
    for model in models:
        table = model.scores
        for task in table.columns:
            column = table[task].dropna()
            best = float(column.max())
            for selector in candidates:
                layer = selector.pick(model, task)
                if layer is None:
                    continue
                rows.append(
                    {
                        "model": model.name,
                        "selector": selector.name,
                        "task": task,
                        "chosen_layer": layer,
                        "chosen_score": float(column[layer]),
                        "last_score": float(column[int(column.index.max())]),
                        "best_score": best,
                    }
                )
    frame = pd.DataFrame(rows)
    return frame.assign(
        regret=frame["best_score"] - frame["chosen_score"], gain=frame["chosen_score"] - frame["last_score"]
    )


def per_model(evaluation: pd.DataFrame) -> pd.DataFrame:
    """(model, selector) -> tasks, mean chosen / last / best score, regret and gain: the library's one ranking
    (:func:`layer_mteb.analysis.selection.leaderboard`), ranked inside each model."""
    return leaderboard_of_rows(evaluation, by=("selector",), within=("model",))


def complete_selectors(summary: pd.DataFrame, models: list[str]) -> list[str]:
    """Selectors defined on every task of every one of ``models`` (a fair comparison needs the same tasks)."""
    full = summary[summary["model"].isin(models)]
    counts = full.groupby("selector")["model"].nunique()
    return [name for name, n in counts.items() if n == len(models)]


def leaderboard(summary: pd.DataFrame) -> pd.DataFrame:
    """Selectors defined on every model, ranked by regret averaged over models (each model weighs the same)."""
    names = complete_selectors(summary, summary["model"].unique().tolist())
    board = summary[summary["selector"].isin(names)].groupby("selector")
    table = board.agg(
        chosen_score=("chosen_score", "mean"),
        regret=("regret", "mean"),
        gain=("gain", "mean"),
        worst_gain=("gain", "min"),
        models=("model", "nunique"),
    )
    return table.sort_values(["regret", "gain"], ascending=[True, False]).reset_index()


def choose(training: list[ModelData], candidates: list[Selector], all_models: list[str]) -> str:
    """The candidate with the least regret averaged over the ``training`` models (defined on all models)."""
    summary = per_model(evaluate(training, candidates))
    eligible = set(complete_selectors(summary, [m.name for m in training]))
    board = leaderboard(summary[summary["selector"].isin(eligible)])
    del all_models  # eligibility on held-out models is decided by the caller from metrics only
    return str(board["selector"].iloc[0])


def leave_one_model_out(models: list[ModelData], candidates: list[Selector] | None = None) -> pd.DataFrame:
    """For each model: the selector chosen on the others, and how it, the paper's rule and the last layer do there.

    Only selectors defined on the held-out model's metrics compete (known without its scores); the held-out
    model's scores are read only to score the pick after it is made.
    """
    candidates = candidates or selectors()
    names = [m.name for m in models]
    rows = []
    for held in models:
        usable = [s for s in candidates if all(s.pick(held, t) is not None for t in held.scores.columns)]
        training = [m for m in models if m.name != held.name]
        pick = choose(training, usable, names)
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


def study_models(
    scores: pd.DataFrame, metrics: pd.DataFrame, *, min_tasks: int = 3, own_texts_only: bool = True
) -> list[ModelData]:
    """Models with own-text prompt entropy for at least ``min_tasks`` tasks that have the model's last layer,
    restricted to those tasks (scores ×100, missing layers left NaN; metric curves, one per (metric, texts)).
    Without ``own_texts_only``, every scored task is kept (for selectors on general texts such as WikiText)."""
    found = []
    for name, part in scores.groupby("model", sort=False):
        model_metrics = metrics[metrics["model"] == name]
        own_texts = model_metrics["texts"].str.startswith("task:")
        own = model_metrics[(model_metrics["metric"] == "prompt_entropy") & own_texts]
        tasks = sorted(set(own["texts"].str.removeprefix("task:")) & set(part["task"]))
        if not own_texts_only:
            tasks = sorted(set(part["task"]))
        table = part[part["task"].isin(tasks)].pivot_table(index="layer", columns="task", values="main_score")
        n_layers = int(part["n_layers"].iloc[0])
        if n_layers in table.index:
            table = table.loc[:, table.loc[n_layers].notna()]
        table = (table * 100).sort_index()
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


#: The selector the study recommends (least regret over all models with metrics; see results/paper/lomo.csv for its
#: leave-one-model-out record).
RECOMMENDED = "dataset_entropy@own:from=0.25"


def by_name(name: str) -> Selector:
    """The study selector called ``name`` (one clear error naming the forms otherwise)."""
    from layer_mteb.common.errors import UserError

    found = {s.name: s for s in selectors()}
    if name not in found:
        raise UserError(
            f"unknown selector {name!r}: use a metric, or <metric>@<own|wikitext>[:from=0.25|0.50|0.75], "
            f"depth=0.1…1.0, last_layer, middle_layer (recommended: {RECOMMENDED})"
        )
    return found[name]


def select_run(run, name: str, metric_readout: str = "auto") -> pd.DataFrame:
    """Apply the study selector ``name`` to a run folder: one row per task it can pick for (scores ×100)."""
    from layer_mteb.analysis.runs import load_run

    selector = by_name(name)
    scores, metrics = load_run(run, None, None, metric_readout)
    models = study_models(scores, metrics, min_tasks=1, own_texts_only=False)
    return evaluate(models, [selector])
