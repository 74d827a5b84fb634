"""The report's figures (seaborn, saved as PNG and PDF): Figure 1, a task × layer heatmap per model, metric panels
and correlation bars. Built on bare ``Figure`` objects, never pyplot: no GUI backend, no global state left open."""

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
from matplotlib.lines import Line2D
from matplotlib.patches import Rectangle

from layer_mteb.analysis.rules import tasks_phrase
from layer_mteb.analysis.selection.curves import MEAN

FORMATS = ("png", "pdf")
PLOTTED_METRIC_COLUMNS = {"model", "layer", "metric", "value"}
PLOTTED_CORRELATION_COLUMNS = {"model", "metric", "method", "value"}


def slug(name: str) -> str:
    """A file-name-safe form of a model label."""
    return re.sub(r"[^A-Za-z0-9._-]+", "_", name).strip("_") or "model"


@contextmanager
def style(look: str = "whitegrid") -> Iterator[None]:
    """Seaborn's look for the figures built inside the block only (a user's own rcParams stay untouched)."""
    with sns.axes_style(look), sns.plotting_context("notebook"):
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


# the (dash pattern, marker) of each of the paper's curves (drawn beside the runs'): one grey each, dark enough to see,
# told apart by dash pattern and marker as well
_PAPER_CURVE_STYLES = [((0, (5, 2)), "s"), ((0, (1, 1.5)), "^"), ((0, (6, 2, 1, 2)), "D"), ((0, (2, 2)), "v")]


def figure1(
    curves: pd.DataFrame,
    stem: Path,
    paper: pd.DataFrame | None = None,
    paper_note: str = "",
    task_note: str = "",
    n_tasks: int | None = None,
) -> list[Path]:
    """Average score ×100 vs relative depth, a solid line per model, the paper's curves dashed; the title counts the
    tasks every curve averages (``n_tasks``; 0: each its own), the notes under it name them."""
    with style():
        fig = Figure(figsize=(7.5, 4.8))
        ax = fig.subplots()
        figure1_panel(ax, curves, paper)
        notes = "\n".join(textwrap.fill(n, 95) for n in (task_note, paper_note) if n)
        title = "Average MTEB score by layer depth"
        if n_tasks is not None:
            title += f": mean over the same {tasks_phrase(n_tasks)}" if n_tasks else ": each curve over its own tasks"
        ax.set_title(f"{title}\n{notes}" if notes else title, fontsize=9)
        ax.legend(title=None, fontsize=8, loc="center left", bbox_to_anchor=(1.01, 0.5), frameon=False)
        return save(fig, stem)


def figure1_panel(ax: Axes, curves: pd.DataFrame, paper: pd.DataFrame | None = None) -> None:
    """The one Figure 1 drawer (report and paper panels): ``curves`` solid per model, ``paper``'s grey and dashed."""
    data = curves.assign(main_score=curves["main_score"] * 100)
    sns.lineplot(data, x="relative_depth", y="main_score", hue="model", marker="o", linewidth=2, ax=ax)
    if paper is not None and not paper.empty:
        order = list(paper.groupby("model")["n_layers"].first().sort_values().index)
        greys = sns.color_palette("Greys", len(order) + 3)[3:]
        for i, model in enumerate(order):
            dash, marker = _PAPER_CURVE_STYLES[i % len(_PAPER_CURVE_STYLES)]
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


def heatmap(tasks: pd.DataFrame, best_layers: pd.Series, model: str, stem: Path) -> list[Path]:
    """Main score ×100 per task (rows, grouped by type) and layer (columns); a box marks each task's best layer."""
    order = tasks.drop_duplicates("task").sort_values(["task_type", "task"])["task"]
    grid = tasks.pivot(index="task", columns="layer", values="main_score").reindex(order)
    n_rows, n_cols = grid.shape
    with style("white"):
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


def metric_panels(metrics: pd.DataFrame, stem: Path) -> list[Path]:
    """Each metric vs relative depth, a panel per metric, a line per model (paper Figure 2); no paths without data.
    Sources: :func:`metric_sources`; what every line shares is named in the
    title, readouts or text sets that differ in each panel's (a dash pattern per readout)."""
    if not set(metrics.columns) >= PLOTTED_METRIC_COLUMNS:
        return []
    frame = metrics.dropna(subset=["value"])
    if "relative_depth" not in frame:
        if "n_layers" not in frame:
            return []
        frame = frame.assign(relative_depth=frame["layer"] / frame["n_layers"].where(frame["n_layers"] > 0, 1))
    curves = metric_sources(frame)
    if curves.empty:
        return []
    mixed = [c for c in ("texts", "readout") if curves[c].nunique() > 1]
    shared = [f"on {curves['texts'].iloc[0]}"] if "texts" not in mixed else []
    if "arithmetic" in frame:  # which arithmetic made the values: one per run (merged.load_runs)
        shared += [f"[{' / '.join(sorted(frame['arithmetic'].astype(str).unique()))} arithmetic]"]
    shared += [f"({curves['readout'].iloc[0]} readout)"] if "readout" not in mixed and curves["readout"].any() else []
    names = sorted(curves["metric"].unique())
    models = sorted(curves["model"].unique())
    palette = dict(zip(models, sns.color_palette(n_colors=len(models)), strict=True))
    readouts = sorted(curves["readout"].unique(), key=lambda r: (r != "raw", r))
    dashes = dict(zip(readouts, _DASHES, strict=False)) if "readout" in mixed else None
    drawn = {"hue": "model", "palette": palette, "marker": "o", "legend": False}
    drawn |= {"style": "readout", "dashes": dashes} if dashes else {}
    with style():
        cols, height = min(4, len(names)), 2.8 + 0.3 * len(mixed)  # at most four panels a row
        fig = Figure(figsize=(3.4 * cols, height * math.ceil(len(names) / cols)), layout="constrained")
        axes = fig.subplots(math.ceil(len(names) / cols), cols, squeeze=False).ravel().tolist()
        for ax in axes[len(names) :]:
            ax.set_visible(False)
        for ax, name in zip(axes, names, strict=False):
            data = curves[curves["metric"] == name]
            sns.lineplot(data, x="relative_depth", y="value", ax=ax, **drawn)
            ax.set_title("\n".join([str(name), *_panel_sources(data, mixed, dashes)]), fontsize=9)
            ax.set_xlabel("relative depth")
            ax.set_ylabel("")
        handles = [Line2D([], [], color=colour, marker="o", label=model) for model, colour in palette.items()]
        handles += [
            Line2D([], [], color="0.2", linestyle=(0, d) if d else "-", label=f"{r} readout")
            for r, d in (dashes or {}).items()
        ]
        fig.legend(handles=handles, loc="outside right center", frameon=False)
        fig.suptitle(" ".join(["Representation metrics by layer depth", *shared]))
        return save(fig, stem)


#: Line patterns of the readouts when a metric figure mixes them: solid for the raw stream (listed first), then dashed.
_DASHES = ("", (4, 2), (1, 1.5))
_DASH_NAMES = dict(zip(_DASHES, ("solid", "dashed", "dotted"), strict=True))


def metric_sources(frame: pd.DataFrame) -> pd.DataFrame:
    """One curve per (model, metric): on WikiText where measured (as the paper), else the mean over text sets; the
    raw stream where measured, else the readout there is. ``texts`` and ``readout`` say which, as shown."""
    if "texts" not in frame:
        frame = frame.assign(texts="")
    frame = frame.assign(readout=frame["readout"].fillna("").astype(str) if "readout" in frame else "")
    parts = []
    for (model, metric), part in frame.groupby(["model", "metric"], sort=True):
        texts = part["texts"].astype(str)
        wiki = sorted(t for t in texts.unique() if "wiki" in t.lower())
        part = part[texts == wiki[0]] if wiki else part
        n_sets = part["texts"].nunique()
        label = wiki[0] if wiki else str(part["texts"].iloc[0]) if n_sets == 1 else f"mean over {n_sets} text sets"
        readouts = set(part["readout"])
        readout = "raw" if "raw" in readouts else sorted(readouts)[0]
        part = part[part["readout"] == readout]
        curve = part.groupby("layer", as_index=False)[["relative_depth", "value"]].mean()
        parts.append(curve.assign(model=model, metric=metric, texts=label, readout=readout))
    columns = ["model", "metric", "layer", "relative_depth", "value", "texts", "readout"]
    return pd.concat(parts, ignore_index=True)[columns] if parts else pd.DataFrame(columns=columns)


def _panel_sources(data: pd.DataFrame, mixed: list[str], dashes: dict | None) -> list[str]:
    """A panel's title lines naming what differs between lines: its readouts (and patterns) and text sets."""
    lines = []
    if "readout" in mixed and dashes is not None:
        present = [r for r in dashes if r in set(data["readout"])]
        if len(present) == 1:
            lines.append(f"{present[0]} readout")
        else:
            lines.append(", ".join(f"{r} ({_DASH_NAMES[dashes[r]]})" for r in present))
    if "texts" in mixed:
        lines.append("texts: " + ", ".join(sorted(data["texts"].astype(str).unique())))
    return lines


def correlation_bars(correlation: pd.DataFrame, stem: Path) -> list[Path]:
    """Correlation of each metric with the score across layers (Figure 3/8), a row of panels per model: dCor (0 to 1)
    apart from the signed Spearman and Kendall; stars give permutation p-values, "n/a" a missing value. The ``mean``
    scope when present, else the mean over per-task scopes."""
    if not set(correlation.columns) >= PLOTTED_CORRELATION_COLUMNS:
        return []
    frame = correlation
    note = ""
    if "scope" in frame:
        is_mean = frame["scope"].astype(str) == MEAN
        frame, note = (frame[is_mean], "") if is_mean.any() else (frame, " (mean over per-task correlations)")
    if "p_value" not in frame:
        frame = frame.assign(p_value=float("nan"))
    signed = [m for m in dict.fromkeys(frame["method"]) if m != "dcor"]  # the file's order (Spearman, Kendall)
    frame = frame.groupby(["model", "metric", "method"], as_index=False)[["value", "p_value"]].mean()
    if frame["value"].isna().all():
        return []
    models = sorted(frame["model"].unique())
    metrics = sorted(frame["metric"].unique())
    kinds = [("distance correlation (dCor)", ["dcor"], (0, 1.15))]
    if signed:
        kinds.append(("signed: " + ", ".join(signed), signed, (-1.15, 1.15)))
    kinds = [k for k in kinds if frame["method"].isin(k[1]).any()]
    palette = dict(zip(["dcor", *signed], sns.color_palette("colorblind", len(signed) + 1), strict=True))
    with style():
        fig = Figure(figsize=(5.2 * len(kinds) + 1.5, (0.32 * len(metrics) + 1.2) * len(models)), layout="constrained")
        axes = fig.subplots(len(models), len(kinds), squeeze=False, sharey=True)
        for row, model in enumerate(models):
            for col, (title, methods, limits) in enumerate(kinds):
                ax = axes[row][col]
                data = frame[(frame["model"] == model) & frame["method"].isin(methods)]
                _correlation_panel(ax, data, metrics, methods, palette, legend=row == 0)
                ax.set_xlim(*limits)
                ax.set_title(f"{model}\n{title}" if col == 0 else title, fontsize=9, loc="left")
        fig.suptitle(
            f"Metric vs score correlation across layers{note}\n* p < 0.05, ** p < 0.01 (permutation test over layers)",
            fontsize=10,
        )
        return save(fig, stem)


def _correlation_panel(
    ax: Axes, data: pd.DataFrame, metrics: list[str], methods: list[str], palette: dict, *, legend: bool
) -> None:
    """One model's bars for ``methods``, one row per metric: starred p-values, "n/a" where a value is missing."""
    shown = data.dropna(subset=["value"])
    sns.barplot(
        data=shown,
        y="metric",
        x="value",
        hue="method",
        hue_order=methods,
        order=metrics,
        palette=palette,
        orient="h",
        ax=ax,
        legend=legend and len(methods) > 1,
    )
    _star_p_values(ax, shown, metrics, methods)
    _mark_missing(ax, data, metrics, methods)
    ax.axvline(0, color="black", linewidth=0.8)
    ax.set_xlabel("")
    ax.set_ylabel("")
    if legend and ax.get_legend() is not None:
        ax.legend(fontsize=8, loc="lower right", frameon=True)


def _mark_missing(ax: Axes, data: pd.DataFrame, metrics: list[str], methods: list[str]) -> None:
    """Write "n/a" where a method has no value, so a missing correlation is never read as a zero-length bar."""
    present = set(data.dropna(subset=["value"])[["metric", "method"]].itertuples(index=False, name=None))
    for row, metric in enumerate(metrics):
        missing = [m for m in methods if (metric, m) not in present]
        if missing:
            label = "n/a" if len(missing) == len(methods) else "n/a: " + ", ".join(missing)
            ax.text(0.02, row, label, transform=ax.get_yaxis_transform(), va="center", fontsize=7, color="0.35")


def _star_p_values(ax: Axes, data: pd.DataFrame, metrics: list[str], methods: list[str]) -> None:
    """Stars at each bar's end; a bar's row comes from its position, so a metric missing for one method shifts none."""
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
