"""Figures of the paper regenerated from the release: Figure 1 (score vs relative depth) and the Pythia-410m training
progression. Every curve of one panel averages the same task set (the library's Figure 1 rule,
:func:`.rules.common_tasks`); a layer some of those tasks lack is a gap, never averaged over fewer
tasks. Saved as PNG and PDF without creation dates."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import seaborn as sns
from matplotlib.figure import Figure

from layer_mteb.analysis.report.figures import figure1_panel, save, style
from layer_mteb.analysis.report.table1 import headline_tasks, task_scores
from layer_mteb.analysis.rules import FIGURE1_COVERAGE, tasks_phrase
from layer_mteb.metrics.texts import source_task


def curves_of(
    scores: pd.DataFrame, models: list[str], coverage: float = FIGURE1_COVERAGE
) -> tuple[pd.DataFrame, list[str]]:
    """``models``' Figure 1 curves (score ×100 per layer, over :func:`.rules.common_tasks`, gaps
    where a layer lacks one of them) and that task set."""
    headline = headline_tasks(task_scores(scores[scores["model"].isin(models)]), coverage=coverage)
    order = {model: i for i, model in enumerate(models)}
    curves = headline.curves.sort_values(["model", "layer"], key=lambda c: c.map(order) if c.name == "model" else c)
    return curves.assign(score=curves["main_score"] * 100), headline.tasks


def figure1(release: pd.DataFrame, ours: pd.DataFrame, models: list[str], stem: Path) -> list[Path]:
    """Left: the release's models; right: this project's runs; each panel over its own common task set."""
    panels = [
        (*curves_of(release, models), "authors' release"),
        (*curves_of(ours, ours["model"].drop_duplicates().tolist()), "this project's runs"),
    ]
    with style():
        fig = Figure(figsize=(13, 4.8), layout="constrained")
        axes = fig.subplots(1, 2)
        for ax, (curves, tasks, title) in zip(axes, panels, strict=True):
            figure1_panel(ax, curves)
            ax.set_ylabel(f"mean main score ×100 over {tasks_phrase(len(tasks))}")
            ax.set_title(f"{title}: mean over the same {tasks_phrase(len(tasks))}", fontsize=10)
            ax.legend(fontsize=8, frameon=False)
        return save(fig, stem)


def progression(scores: pd.DataFrame, metrics: pd.DataFrame, stem: Path) -> list[Path]:
    """Pythia-410m from step1 to step128000 and the final model: score and own-text prompt entropy vs depth."""
    order = sorted(scores["model"].unique(), key=_step)
    curves, tasks = curves_of(scores, order, coverage=1.0)
    curves = curves.assign(checkpoint=curves["model"].map(_label))
    own_texts = metrics["texts"].map(source_task).notna()
    entropy = metrics[metrics["model"].isin(order) & (metrics["metric"] == "prompt_entropy") & own_texts]
    ent_tasks = set.intersection(*(set(p["task"]) for _, p in entropy.groupby("model")))
    entropy = entropy[entropy["task"].isin(ent_tasks)]
    entropy = entropy.groupby(["model", "relative_depth"], as_index=False)["value"].mean()
    entropy = entropy.assign(checkpoint=entropy["model"].map(_label))
    labels = [_label(m) for m in order]
    palette = dict(zip(labels, sns.color_palette("viridis", len(labels)), strict=True))
    with style():
        fig = Figure(figsize=(13, 4.8), layout="constrained")
        left, right = fig.subplots(1, 2)
        for ax, data, y, legend in ((left, curves, "score", False), (right, entropy, "value", "auto")):
            sns.lineplot(
                data=data,
                x="relative_depth",
                y=y,
                hue="checkpoint",
                hue_order=labels,
                palette=palette,
                ax=ax,
                lw=1.8,
                legend=legend,
            )
        left.set_ylabel(f"mean main score ×100 over {len(tasks)} tasks")
        left.set_title("Pythia-410m during training: score by depth", fontsize=10)
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
