"""Figures of the paper regenerated from the release: Figure 1 (score vs relative depth), the metric curves on
WikiText (the paper's Figure 2 across architectures, Figure 12 across Pythia sizes, and across Pythia-410m's
training checkpoints) and the training progression (score and WikiText prompt entropy). Every score curve of one
panel averages the same task set (the library's Figure 1 rule, :func:`.rules.common_tasks`); a layer some of those
tasks lack is a gap, never averaged over fewer tasks. Saved as PNG and PDF without creation dates."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import seaborn as sns
from matplotlib.figure import Figure
from matplotlib.lines import Line2D

from layer_mteb.analysis.report.figures import figure1_panel, save, style
from layer_mteb.analysis.report.table1 import headline_tasks, task_scores
from layer_mteb.analysis.rules import FIGURE1_COVERAGE, tasks_phrase

#: The six metrics in the paper's panel order, with the normalisation its figures show (``PAPER_NORMALIZATION``).
METRIC_LABELS = {
    "prompt_entropy": "prompt entropy ÷ min(ln N, ln D)",
    "dataset_entropy": "dataset entropy ÷ min(ln N, ln D)",
    "curvature": "curvature (radians)",
    "lidar": "LiDAR ÷ min(ln N, ln D)",
    "dime": "DiME",
    "infonce": "InfoNCE loss",
}


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


def progression(scores: pd.DataFrame, wikitext: pd.DataFrame, stem: Path) -> list[Path]:
    """Pythia-410m from step1 to step128000 and the final model: score and WikiText prompt entropy vs depth (the
    paper's training analysis measures its metrics on WikiText)."""
    order = sorted(scores["model"].unique(), key=checkpoint_step)
    curves, tasks = curves_of(scores, order, coverage=1.0)
    curves = curves.assign(checkpoint=curves["model"].map(checkpoint_label))
    entropy = wikitext[wikitext["model"].isin(order) & (wikitext["metric"] == "prompt_entropy")]
    entropy = entropy.assign(checkpoint=entropy["model"].map(checkpoint_label))
    labels = [checkpoint_label(m) for m in order]
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
        right.set_ylabel(METRIC_LABELS["prompt_entropy"])
        right.set_title("prompt entropy on WikiText by depth (raw residual stream)", fontsize=10)
        right.legend(title="training step", fontsize=8, frameon=False, loc="center left", bbox_to_anchor=(1.01, 0.5))
        for ax in (left, right):
            ax.set_xlabel("relative depth (layer / number of layers)")
        return save(fig, stem)


def metric_curves(
    wikitext: pd.DataFrame, models: list[str], labels: dict[str, str], title: str, stem: Path
) -> list[Path]:
    """One panel per metric (the paper's six, those any model has), each ``models``' WikiText curve against relative
    depth, the models named by ``labels`` in that order. A layer the release has no value for is a gap (a curve with
    gaps also marks its points, so a lone value stays visible), never a line drawn across it."""
    data = wikitext[wikitext["model"].isin(models)]
    shown = [m for m in METRIC_LABELS if m in set(data["metric"])]
    order = [m for m in models if m in set(data["model"])]
    colours = dict(zip(order, sns.color_palette("viridis" if len(order) > 4 else "deep", len(order)), strict=True))
    with style():
        columns = 3
        rows = -(-len(shown) // columns)
        fig = Figure(figsize=(4.4 * columns, 3.4 * rows + 0.6), layout="constrained")
        axes = fig.subplots(rows, columns, squeeze=False).ravel()
        for ax, metric in zip(axes, shown, strict=False):
            for model in order:
                curve = data[(data["model"] == model) & (data["metric"] == metric)].sort_values("layer")
                if curve.empty:
                    continue
                gaps = bool(curve["value"].isna().any())
                ax.plot(curve["relative_depth"], curve["value"], color=colours[model], lw=1.8,
                        marker="o" if gaps else None, ms=3.5, label=labels[model])  # fmt: skip
            ax.set(xlabel="relative depth", title=METRIC_LABELS[metric])
        for ax in axes[len(shown) :]:
            ax.set_axis_off()
        handles = [Line2D([], [], color=colours[m], lw=1.8) for m in order]
        fig.legend(handles, [labels[m] for m in order], loc="outside right center", fontsize=8, frameon=False)
        fig.suptitle(title, fontsize=11)
        return save(fig, stem)


def checkpoint_step(model: str) -> int:
    """The training step of a ``@step<n>`` checkpoint; the final model sorts last."""
    return int(model.partition("@step")[2] or 10**9)


def checkpoint_label(model: str) -> str:
    """``Pythia/410m@step1000`` -> ``step 1,000``; the final model -> ``final (step 143,000)``."""
    step = model.partition("@step")[2]
    return f"step {int(step):,}" if step else "final (step 143,000)"
