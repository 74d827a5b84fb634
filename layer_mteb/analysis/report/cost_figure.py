"""The report's cost–quality view: mean score against the cost of the model cut at each layer, and per model the
cheapest layer within one point of the best. Only measured costs are drawn: a run without ``cost.csv`` is left out
of the figure (one line says why) and its table rows have empty cost columns.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from pathlib import Path

import pandas as pd
import seaborn as sns
from matplotlib.figure import Figure

from layer_mteb.analysis.report.figures import save, style
from layer_mteb.analysis.report.markdown import integer, markdown_table, number_format, score, text
from layer_mteb.analysis.selection.curves import MEAN
from layer_mteb.analysis.selection.tradeoff import cheapest_layers, cost_curves
from layer_mteb.common.run_folder import COST_FILE, RunFolder
from layer_mteb.metrics.cost_table import COST_TABLE

logger = logging.getLogger(__name__)

STEM = "cost_quality"
RULE = (
    "Cheapest layer within 1 point of the best: among the layers whose mean main score (×100) is at most 1 below the "
    "best layer's, the one whose cut model has the fewest forward FLOPs (equal: the shallower). Costs are measured by "
    f"`layer-mteb cost` on a sample of each run's own task texts ({COST_FILE}): *FLOPs* is the cut model's share of "
    "the full model's, *s / 1k texts* its forward seconds per 1,000 texts (the full model's beside it). A run without "
    f"{COST_FILE} is ranked by depth, which orders layers as FLOPs do, and shows no cost."
)


_fraction, _seconds = number_format(".0f", 100, " %"), number_format(".1f")


def cost_quality(folders: Sequence[RunFolder], stem: Path) -> list[Path]:
    """Write the figure (when some run has ``cost.csv``) and the table of cheapest layers of ``folders``."""
    scores = [folder.scores() for folder in folders]
    costs = [folder.read(COST_TABLE, missing_ok=True) for folder in folders]
    if all(cost.empty for cost in costs):
        logger.info("no cost figure: no run has %s (`layer-mteb cost --run RUN` measures one)", COST_FILE)
    for folder, run_scores, cost in zip(folders, scores, costs, strict=True):
        if cost.empty and not all(c.empty for c in costs):
            models = ", ".join(sorted(run_scores["model"].astype(str).unique()))
            logger.info(
                "cost figure leaves out %s (%s): no %s; `layer-mteb cost --run %s`", folder, models, COST_FILE, folder
            )
    costs = [cost for cost in costs if not cost.empty]
    all_scores = pd.concat(scores, ignore_index=True)
    all_costs = pd.concat(costs, ignore_index=True) if costs else None
    picks = cheapest_layers(all_scores, all_costs)
    paths = [stem.with_suffix(".csv"), stem.with_suffix(".md")]
    picks.to_csv(paths[0], index=False, float_format="%.6g")
    paths[1].write_text(cost_markdown(picks))
    curves = cost_curves(all_scores, all_costs)
    if not curves.empty:
        paths += cost_figure(curves, picks[picks["scope"] == MEAN], stem)
    return paths


def cost_markdown(picks: pd.DataFrame) -> str:
    """The cheapest layer within one point per model (mean over tasks first, then each task type), and the rule."""
    frame = picks.assign(scope=picks["scope"].where(picks["scope"] != MEAN, "all tasks (mean)"))
    columns = [("model", "model", text), ("scope", "tasks", text), ("n_tasks", "n", integer)]
    columns += [("layer", "layer", integer), ("n_layers", "of", integer), ("score", "score", score)]
    columns += [("best_layer", "best layer", integer), ("best_score", "best", score)]
    columns += [("flops_fraction", "FLOPs", _fraction), ("seconds_per_1000_texts", "s / 1k texts", _seconds)]
    columns += [("full_seconds_per_1000_texts", "full model", _seconds)]
    title = "# Cost against quality: the cheapest layer within 1 point of the best"
    return f"{title}\n\n{markdown_table(frame, columns)}\n\n{RULE}\n"


def cost_figure(curves: pd.DataFrame, picks: pd.DataFrame, stem: Path) -> list[Path]:
    """Mean score ×100 against the FLOPs fraction (left) and seconds per 1,000 texts (right), one line per model;
    a ringed marker on each model's cheapest layer within one point of the best."""
    data = curves.assign(score=curves["score"] * 100)
    chosen = data.merge(picks[["model", "layer"]], on=["model", "layer"])
    with style():
        fig = Figure(figsize=(11, 4.6))
        axes = fig.subplots(1, 2, sharey=True)
        models = sorted(data["model"].unique())
        palette = dict(zip(models, sns.color_palette(n_colors=len(models)), strict=True))
        labels = {
            "flops_fraction": "fraction of the full model's forward FLOPs",
            "seconds_per_1000_texts": "seconds per 1,000 texts (measured, forward only)",
        }
        for ax, (x, label) in zip(axes, labels.items(), strict=True):
            # joined in layer order: measured seconds need not rise with every block on a busy machine
            sns.lineplot(
                data, x=x, y="score", hue="model", palette=palette, marker="o", sort=False, ax=ax, legend=ax is axes[0]
            )
            for _, row in chosen.iterrows():
                ax.scatter(row[x], row["score"], s=180, facecolors="none", edgecolors=palette[row["model"]], lw=2)
            ax.set_xlabel(label)
        axes[0].set_ylabel("mean main score ×100")
        axes[0].legend(fontsize=8, loc="lower right", frameon=False)
        fig.suptitle(
            "Score against cost of the model cut at each layer (ring: cheapest layer within 1 point of the best)",
            fontsize=10,
        )
        return save(fig, stem)
