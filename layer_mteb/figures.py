"""The report's figures (seaborn, each saved as PNG and PDF): Figure 1 (score vs relative depth),
a task × layer heatmap per model, metric-vs-depth panels and correlation bars when a run has them.

Figures are built on bare ``matplotlib.figure.Figure`` objects (rendered by Agg when saved), never through pyplot:
no GUI backend, no global figure state, nothing left open in a notebook or a long report."""

from __future__ import annotations

import math
import re
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pandas as pd
import seaborn as sns
from matplotlib.axes import Axes
from matplotlib.figure import Figure
from matplotlib.patches import Rectangle

from layer_mteb.curves import MEAN

FORMATS = ("png", "pdf")
PLOTTED_METRIC_COLUMNS = {"model", "layer", "metric", "value"}
PLOTTED_CORRELATION_COLUMNS = {"model", "metric", "method", "value"}


def slug(name: str) -> str:
    """A file-name-safe form of a model label."""
    return re.sub(r"[^A-Za-z0-9._-]+", "_", name).strip("_") or "model"


@contextmanager
def _style(style: str = "whitegrid") -> Iterator[None]:
    """Seaborn's look for the figures built inside the block only (a user's own rcParams stay untouched)."""
    with sns.axes_style(style), sns.plotting_context("notebook"):
        yield


def save(fig: Figure, stem: Path) -> list[Path]:
    """Write ``stem.png`` and ``stem.pdf``."""
    paths = []
    for fmt in FORMATS:
        path = stem.with_suffix(f".{fmt}")
        # no creation date in the PDF: the same results give the same bytes (no noise in version control)
        metadata = {"CreationDate": None} if fmt == "pdf" else None
        fig.savefig(path, dpi=150, bbox_inches="tight", metadata=metadata)
        paths.append(path)
    return paths


def figure1(curves: pd.DataFrame, stem: Path, paper: pd.DataFrame | None = None, paper_note: str = "") -> list[Path]:
    """Average score over tasks vs relative depth, one solid line per model; the paper's curves dashed.

    ``curves`` and ``paper`` are :func:`layer_mteb.report.layer_means` frames; ``paper_note`` says which tasks the
    paper curves average (shown in the title).
    """
    counts = curves.groupby("model")["n_tasks"].max()
    same = counts.nunique() == 1
    label = {m: m if same else f"{m} ({n} tasks)" for m, n in counts.items()}
    with _style():
        fig = Figure(figsize=(7.5, 4.8))
        ax = fig.subplots()
        sns.lineplot(
            data=curves.assign(model=curves["model"].map(label)),
            x="relative_depth",
            y="main_score",
            hue="model",
            marker="o",
            linewidth=2,
            ax=ax,
        )
        if paper is not None and not paper.empty:
            order = paper.groupby("model")["n_layers"].first().sort_values().index
            colours = sns.color_palette("Greys", len(order) + 2)[2:]
            for colour, model in zip(colours, order, strict=True):
                line = paper[paper["model"] == model].sort_values("relative_depth")
                ax.plot(line["relative_depth"], line["main_score"], "--", color=colour, label=model, linewidth=1.6)
        ax.set_xlabel("relative depth (layer / number of layers)")
        ax.set_ylabel(f"average main score over {counts.iloc[0]} tasks" if same else "average main score")
        ax.set_xlim(-0.02, 1.02)
        title = "Average MTEB score by layer depth"
        ax.set_title(f"{title}\n{paper_note}" if paper_note else title, fontsize=11)
        ax.legend(title=None, fontsize=8, loc="center left", bbox_to_anchor=(1.01, 0.5), frameon=False)
        return save(fig, stem)


def heatmap(tasks: pd.DataFrame, best_layers: pd.Series, model: str, stem: Path) -> list[Path]:
    """Main score ×100 per task (rows, grouped by type) and layer (columns); a box marks each task's best layer."""
    order = tasks.drop_duplicates("task").sort_values(["task_type", "task"])["task"]
    grid = tasks.pivot(index="task", columns="layer", values="main_score").reindex(order)
    n_rows, n_cols = grid.shape
    with _style("white"):
        fig = Figure(figsize=(max(5.0, 0.45 * n_cols + 5.0), max(2.5, 0.38 * n_rows + 1.5)))
        ax = fig.subplots()
        sns.heatmap(
            grid * 100,
            ax=ax,
            cmap="viridis",
            annot=n_cols <= 26 and n_rows <= 40,
            fmt=".0f",
            annot_kws={"fontsize": 7},
            cbar_kws={"label": "main score ×100"},
        )
        columns = list(grid.columns)
        for row, task in enumerate(grid.index):
            if best_layers.get(task) in columns:
                ax.add_patch(Rectangle((columns.index(best_layers[task]), row), 1, 1, fill=False, ec="red", lw=1.5))
        types = tasks.drop_duplicates("task").set_index("task")["task_type"]
        if types.nunique() > 1:
            ax.set_yticks(ax.get_yticks(), [f"{t} ({types[t]})" for t in grid.index])
        ax.tick_params(axis="y", rotation=0)
        ax.set_xlabel("layer (0 = embeddings)")
        ax.set_ylabel("")
        ax.set_title(f"{model}: score per task and layer (red box: best layer)", fontsize=10)
        return save(fig, stem)


def _panels(n: int, width: float, height: float, wrap: int) -> tuple[Figure, list[Axes]]:
    cols = min(wrap, n)
    rows = math.ceil(n / cols)
    fig = Figure(figsize=(width * cols, height * rows), layout="constrained")
    axes = fig.subplots(rows, cols, squeeze=False).ravel().tolist()
    for ax in axes[n:]:
        ax.set_visible(False)
    return fig, axes[:n]


def _figure_legend(fig: Figure, ax: Axes, title: str | None = None) -> None:
    """Move ``ax``'s legend outside the panels, so it never covers a line or a bar."""
    legend = ax.get_legend()
    if legend is None:
        return
    handles, labels = ax.get_legend_handles_labels()
    legend.remove()
    fig.legend(handles, labels, loc="outside right center", title=title, frameon=False)


def metric_panels(metrics: pd.DataFrame, stem: Path) -> list[Path]:
    """Each representation metric vs relative depth, one panel per metric, one line per model (paper Figure 2).

    Prefers WikiText prompts when several text sets were measured, as the paper's Figure 2 does; otherwise the
    mean over text sets. Returns no paths when the frame lacks the expected columns.
    """
    if not set(metrics.columns) >= PLOTTED_METRIC_COLUMNS:
        return []
    frame = metrics.dropna(subset=["value"])
    if "relative_depth" not in frame:
        if "n_layers" not in frame:
            return []
        frame = frame.assign(relative_depth=frame["layer"] / frame["n_layers"].where(frame["n_layers"] > 0, 1))
    note = ""
    if "texts" in frame and frame["texts"].nunique() > 1:
        wiki = [t for t in frame["texts"].astype(str).unique() if "wiki" in t.lower()]
        note = f" on {wiki[0]}" if wiki else f" (mean over {frame['texts'].nunique()} text sets)"
        frame = frame[frame["texts"].astype(str) == wiki[0]] if wiki else frame
    curves = frame.groupby(["model", "metric", "layer"], as_index=False)[["relative_depth", "value"]].mean()
    if curves.empty:
        return []
    names = sorted(curves["metric"].unique())
    with _style():
        fig, axes = _panels(len(names), 3.4, 2.8, wrap=4)
        for i, (ax, name) in enumerate(zip(axes, names, strict=True)):
            data = curves[curves["metric"] == name]
            sns.lineplot(data=data, x="relative_depth", y="value", hue="model", marker="o", ax=ax, legend=i == 0)
            ax.set_title(str(name), fontsize=10)
            ax.set_xlabel("relative depth")
            ax.set_ylabel("")
        _figure_legend(fig, axes[0])
        fig.suptitle(f"Representation metrics by layer depth{note}")
        return save(fig, stem)


def correlation_bars(correlation: pd.DataFrame, stem: Path) -> list[Path]:
    """Correlation of each metric with the score across layers, bars per method, one panel per model (Figure 3/8).

    Uses the ``mean`` scope (score averaged over tasks) when present, else the mean over per-task scopes.
    """
    if not set(correlation.columns) >= PLOTTED_CORRELATION_COLUMNS:
        return []
    frame = correlation.dropna(subset=["value"])
    note = ""
    if "scope" in frame:
        is_mean = frame["scope"].astype(str) == MEAN
        frame, note = (frame[is_mean], "") if is_mean.any() else (frame, " (mean over per-task correlations)")
    methods = list(dict.fromkeys(frame["method"]))  # the file's order (dCor, Spearman, Kendall), not alphabetical
    frame = frame.groupby(["model", "metric", "method"], as_index=False)["value"].mean()
    if frame.empty:
        return []
    models = sorted(frame["model"].unique())
    with _style():
        n_metrics = frame["metric"].nunique()
        fig, axes = _panels(len(models), max(4.0, 0.9 * n_metrics + 1.5), 3.4, wrap=2)
        for i, (ax, model) in enumerate(zip(axes, models, strict=True)):
            data = frame[frame["model"] == model]
            sns.barplot(data=data, x="metric", y="value", hue="method", hue_order=methods, ax=ax, legend=i == 0)
            ax.axhline(0, color="black", linewidth=0.8)
            ax.tick_params(axis="x", rotation=40)
            ax.set_title(model, fontsize=10)
            ax.set_xlabel("")
            ax.set_ylabel("correlation with score")
        _figure_legend(fig, axes[0], "method")
        fig.suptitle(f"Metric vs score correlation across layers{note}")
        return save(fig, stem)
