"""The report's figures (seaborn, each saved as PNG and PDF): Figure 1 (score vs relative depth),
a task × layer heatmap per model, metric-vs-depth panels and correlation bars when a run has them.

Figures are built on bare ``matplotlib.figure.Figure`` objects (rendered by Agg when saved), never through pyplot:
no GUI backend, no global figure state, nothing left open in a notebook or a long report."""

from __future__ import annotations

import math
import re
import textwrap
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pandas as pd
import seaborn as sns
from matplotlib.axes import Axes
from matplotlib.figure import Figure
from matplotlib.patches import Rectangle

from layer_mteb.analysis.curves import MEAN

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


# the reference curves: one grey each, dark enough to see, told apart by dash pattern and marker as well
_REFERENCE_STYLES = [((0, (5, 2)), "s"), ((0, (1, 1.5)), "^"), ((0, (6, 2, 1, 2)), "D"), ((0, (2, 2)), "v")]


def figure1(
    curves: pd.DataFrame,
    stem: Path,
    paper: pd.DataFrame | None = None,
    paper_note: str = "",
    task_note: str = "",
) -> list[Path]:
    """Average score ×100 (as Table 1) vs relative depth, one solid line per model; the paper's curves dashed.

    ``curves`` and ``paper`` are :func:`~.table1.layer_means` frames; ``task_note`` names the tasks the
    curves average and ``paper_note`` those of the paper curves (both printed under the title).
    """
    with _style():
        fig = Figure(figsize=(7.5, 4.8))
        ax = fig.subplots()
        sns.lineplot(
            data=curves.assign(main_score=curves["main_score"] * 100),
            x="relative_depth",
            y="main_score",
            hue="model",
            marker="o",
            linewidth=2,
            ax=ax,
        )
        if paper is not None and not paper.empty:
            order = list(paper.groupby("model")["n_layers"].first().sort_values().index)
            greys = sns.color_palette("Greys", len(order) + 3)[3:]
            for i, model in enumerate(order):
                dash, marker = _REFERENCE_STYLES[i % len(_REFERENCE_STYLES)]
                line = paper[paper["model"] == model].sort_values("relative_depth")
                ax.plot(
                    line["relative_depth"],
                    line["main_score"] * 100,
                    linestyle=dash,
                    marker=marker,
                    markersize=4,
                    color=greys[i],
                    label=model,
                    linewidth=1.6,
                )
        ax.set_xlabel("relative depth (layer / number of layers)")
        ax.set_ylabel("average main score ×100")
        ax.set_xlim(-0.02, 1.02)
        notes = "\n".join(textwrap.fill(n, 95) for n in (task_note, paper_note) if n)
        title = "Average MTEB score by layer depth"
        ax.set_title(f"{title}\n{notes}" if notes else title, fontsize=9)
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
    """Correlation of each metric with the score across layers (Figure 3/8), one row of panels per model: distance
    correlation (0 to 1, unsigned) apart from the signed Spearman ρ and Kendall τ (−1 to 1); stars give the
    permutation p-values. Horizontal bars, so every metric name sits beside its own bars.

    Uses the ``mean`` scope (score averaged over tasks) when present, else the mean over per-task scopes.
    """
    if not set(correlation.columns) >= PLOTTED_CORRELATION_COLUMNS:
        return []
    frame = correlation.dropna(subset=["value"])
    note = ""
    if "scope" in frame:
        is_mean = frame["scope"].astype(str) == MEAN
        frame, note = (frame[is_mean], "") if is_mean.any() else (frame, " (mean over per-task correlations)")
    if "p_value" not in frame:
        frame = frame.assign(p_value=float("nan"))
    signed = [m for m in dict.fromkeys(frame["method"]) if m != "dcor"]  # the file's order (Spearman, Kendall)
    frame = frame.groupby(["model", "metric", "method"], as_index=False)[["value", "p_value"]].mean()
    if frame.empty:
        return []
    models = sorted(frame["model"].unique())
    metrics = sorted(frame["metric"].unique())
    kinds = [("distance correlation (dCor)", ["dcor"], (0, 1.15))]
    if signed:
        kinds.append(("signed: " + ", ".join(signed), signed, (-1.15, 1.15)))
    kinds = [k for k in kinds if frame["method"].isin(k[1]).any()]
    palette = dict(zip(["dcor", *signed], sns.color_palette("colorblind", len(signed) + 1), strict=True))
    with _style():
        fig = Figure(figsize=(5.2 * len(kinds) + 1.5, (0.32 * len(metrics) + 1.2) * len(models)), layout="constrained")
        axes = fig.subplots(len(models), len(kinds), squeeze=False, sharey=True)
        for row, model in enumerate(models):
            for col, (title, methods, limits) in enumerate(kinds):
                ax = axes[row][col]
                data = frame[(frame["model"] == model) & frame["method"].isin(methods)]
                sns.barplot(
                    data=data,
                    y="metric",
                    x="value",
                    hue="method",
                    hue_order=methods,
                    order=metrics,
                    palette=palette,
                    orient="h",
                    ax=ax,
                    legend=row == 0 and len(methods) > 1,
                )
                _star_p_values(ax, data, metrics, methods)
                ax.axvline(0, color="black", linewidth=0.8)
                ax.set_xlim(*limits)
                ax.set_title(f"{model}\n{title}" if col == 0 else title, fontsize=9, loc="left")
                ax.set_xlabel("")
                ax.set_ylabel("")
                if row == 0 and ax.get_legend() is not None:
                    ax.legend(fontsize=8, loc="lower right", frameon=True)
        fig.suptitle(
            f"Metric vs score correlation across layers{note}\n* p < 0.05, ** p < 0.01 (permutation test over layers)",
            fontsize=10,
        )
        return save(fig, stem)


def _star_p_values(ax: Axes, data: pd.DataFrame, metrics: list[str], methods: list[str]) -> None:
    """Write significance stars at the end of each bar (seaborn draws one container of bars per method; a bar's
    row is read from its position, so a metric missing for one method cannot shift the others)."""
    for container, method in zip(ax.containers, methods, strict=False):
        rows = data[data["method"] == method].set_index("metric")
        for bar in container:
            centre = bar.get_y() + bar.get_height() / 2
            metric = metrics[round(centre)] if 0 <= round(centre) < len(metrics) else None
            if metric not in rows.index or pd.isna(rows.loc[metric, "p_value"]):
                continue
            p_value, value = rows.loc[metric, "p_value"], rows.loc[metric, "value"]
            stars = "**" if p_value < 0.01 else "*" if p_value < 0.05 else ""
            if stars:
                ax.text(value, centre, f" {stars} ", va="center", ha="left" if value >= 0 else "right", fontsize=7)
