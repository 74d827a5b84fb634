"""Figures of the paper regenerated from the release: Figure 1 (score vs relative depth) and the Pythia-410m training
progression. Every curve of one panel averages the same task set; a layer some of those tasks lack is left out of
its curve (a gap), never averaged over fewer tasks. Saved as PNG and PDF without creation dates."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import seaborn as sns
from matplotlib.figure import Figure

from layer_mteb.analysis.figures import _style, save

#: Share of a model's layers that the common task set must leave complete (dropping tasks until it does).
COVERAGE = 0.75


def tables(scores: pd.DataFrame, models: list[str]) -> dict[str, pd.DataFrame]:
    return {
        m: scores[scores["model"] == m].pivot_table(index="layer", columns="task", values="main_score") for m in models
    }


def common_tasks(tables: dict[str, pd.DataFrame], coverage: float = COVERAGE) -> list[str]:
    """The largest task set found by dropping, one at a time, the task whose removal completes the most layers,
    until every model has at least ``coverage`` of its layers scored on all remaining tasks."""
    tasks = sorted(set.intersection(*(set(t.columns) for t in tables.values())))

    def complete(chosen: list[str]) -> list[float]:
        return [t[chosen].notna().all(axis=1).mean() for t in tables.values()]

    while tasks and min(complete(tasks)) < coverage:
        tasks.remove(max(tasks, key=lambda t: (sum(complete([x for x in tasks if x != t])), t)))
    return tasks


def mean_curves(tables: dict[str, pd.DataFrame], tasks: list[str]) -> pd.DataFrame:
    """model, layer, relative depth, mean score ×100 over ``tasks`` at each layer that has all of them."""
    rows = []
    for model, table in tables.items():
        complete = table[tasks].dropna()
        depth = table.index.max()
        for layer, value in (complete.mean(axis=1) * 100).items():
            rows.append({"model": model, "layer": layer, "relative_depth": layer / depth, "score": value})
    return pd.DataFrame(rows)


def figure1(release: pd.DataFrame, ours: pd.DataFrame, models: list[str], stem: Path) -> list[Path]:
    """Left: the release's models; right: this project's runs; each panel over its own common task set."""
    left_tables = tables(release, models)
    left_tasks = common_tasks(left_tables)
    right_tables = tables(ours, ours["model"].drop_duplicates().tolist())
    right_tasks = common_tasks(right_tables)
    with _style():
        fig = Figure(figsize=(13, 4.8), layout="constrained")
        axes = fig.subplots(1, 2)
        for ax, panel, tasks, title in (
            (axes[0], left_tables, left_tasks, "authors' release"),
            (axes[1], right_tables, right_tasks, "this project's runs"),
        ):
            curves = mean_curves(panel, tasks)
            sns.lineplot(
                data=curves, x="relative_depth", y="score", hue="model", style="model", markers=True, ax=ax, lw=2
            )
            ax.set_xlabel("relative depth (layer / number of layers)")
            ax.set_ylabel(f"mean main score ×100 over {len(tasks)} tasks")
            ax.set_title(f"{title}: {len(tasks)} tasks every curve shares", fontsize=10)
            ax.legend(fontsize=8, frameon=False)
        return save(fig, stem)


def progression(scores: pd.DataFrame, metrics: pd.DataFrame, stem: Path) -> list[Path]:
    """Pythia-410m from step1 to step128000 and the final model: score and own-text prompt entropy vs depth."""
    order = sorted(scores["model"].unique(), key=_step)
    by_step = tables(scores, order)
    tasks = common_tasks(by_step, coverage=1.0)
    curves = mean_curves(by_step, tasks).assign(checkpoint=lambda f: f["model"].map(_label))
    own_texts = metrics["texts"].str.startswith("task:")
    entropy = metrics[metrics["model"].isin(order) & (metrics["metric"] == "prompt_entropy") & own_texts]
    ent_tasks = set.intersection(*(set(p["task"]) for _, p in entropy.groupby("model")))
    entropy = entropy[entropy["task"].isin(ent_tasks)]
    entropy = entropy.groupby(["model", "relative_depth"], as_index=False)["value"].mean()
    entropy = entropy.assign(checkpoint=entropy["model"].map(_label))
    labels = [_label(m) for m in order]
    palette = dict(zip(labels, sns.color_palette("viridis", len(labels)), strict=True))
    with _style():
        fig = Figure(figsize=(13, 4.8), layout="constrained")
        left, right = fig.subplots(1, 2)
        sns.lineplot(
            data=curves,
            x="relative_depth",
            y="score",
            hue="checkpoint",
            hue_order=labels,
            palette=palette,
            ax=left,
            lw=1.8,
            legend=False,
        )
        left.set_ylabel(f"mean main score ×100 over {len(tasks)} tasks")
        left.set_title("Pythia-410m during training: score by depth", fontsize=10)
        sns.lineplot(
            data=entropy,
            x="relative_depth",
            y="value",
            hue="checkpoint",
            hue_order=labels,
            palette=palette,
            ax=right,
            lw=1.8,
        )
        right.set_ylabel(f"prompt entropy ÷ min(ln N, ln D), mean over {len(ent_tasks)} tasks' own texts")
        right.set_title("prompt entropy by depth (raw residual stream)", fontsize=10)
        right.legend(title="training step", fontsize=8, frameon=False, loc="center left", bbox_to_anchor=(1.01, 0.5))
        for ax in (left, right):
            ax.set_xlabel("relative depth (layer / number of layers)")
        return save(fig, stem)


def _step(model: str) -> int:
    return int(model.partition("@step")[2] or 10**9)


def _label(model: str) -> str:
    step = model.partition("@step")[2]
    return f"step {int(step):,}" if step else "final (step 143,000)"
