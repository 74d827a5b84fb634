"""Figures of the stress tests (the paper's style: one line per level on a sequential colour scale, with a colour
bar) and of bimodality (histograms of per-prompt entropy at the first, the most bimodal and the last layer)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
from matplotlib import colormaps
from matplotlib.cm import ScalarMappable
from matplotlib.colors import Normalize
from matplotlib.figure import Figure

from layer_mteb.analysis.report.figures import save, slug, style
from layer_mteb.analysis.rules import last_layer_of
from layer_mteb.common.run_folder import RunFolder
from layer_mteb.metrics.bimodality import DIP_NORMALIZATION, most_bimodal_layer

TITLES = {"randomness": "randomness p", "repetition": "repetition p", "length": "prompt length (tokens)"}


def stress_curves(values: pd.DataFrame) -> pd.DataFrame:
    """model, readout, test, level, layer, normalization, mean, std (over prompts) of a ``stress.csv`` frame."""
    keys = ["model", "readout", "test", "level", "layer", "normalization"]
    grouped = values.groupby(keys, sort=True)["value"]
    return grouped.agg(mean="mean", std="std").reset_index()


def level_lines(ax, curves: pd.DataFrame, x: str, label: str, cmap: str = "viridis") -> None:
    """One line per level of ``curves`` (columns level, ``x``, mean), coloured by level, with a colour bar."""
    levels = sorted(curves["level"].unique())
    scale = Normalize(min(levels), max(levels) if max(levels) > min(levels) else min(levels) + 1)
    colours = colormaps[cmap]
    for level in levels:
        line = curves[curves["level"] == level].sort_values(x)
        ax.plot(line[x], line["mean"], color=colours(scale(level)), linewidth=1.6)
    ax.figure.colorbar(ScalarMappable(norm=scale, cmap=colours), ax=ax, label=label)


def stress_figure(values: pd.DataFrame, model: str, stem: Path, normalization: str = DIP_NORMALIZATION) -> list[Path]:
    """Mean normalised prompt entropy against layer, one panel per test of ``model``'s rows."""
    curves = stress_curves(values[(values["model"] == model) & (values["normalization"] == normalization)])
    tests = [t for t in TITLES if t in set(curves["test"])]
    with style():
        fig = Figure(figsize=(5 * len(tests), 3.8), layout="constrained")
        axes = np.atleast_1d(fig.subplots(1, len(tests)))
        for ax, test in zip(axes, tests, strict=True):
            level_lines(ax, curves[curves["test"] == test], "layer", TITLES[test])
            ax.set(xlabel="layer", ylabel=f"prompt entropy ({normalization})", title=test)
        fig.suptitle(model)
        return save(fig, stem)


def histograms(values: pd.DataFrame, dips: pd.DataFrame, model: str, stem: Path) -> list[Path]:
    """Per-prompt entropy of the unperturbed prompts at the first, most bimodal and last layer, dip in the title."""
    plain = dips[(dips["model"] == model) & (dips["test"] == "none")]
    if plain.empty:
        return []
    rows = values[
        (values["model"] == model)
        & (values["test"].isin(["randomness", "repetition"]))
        & (values["level"] == 0)
        & (values["normalization"] == DIP_NORMALIZATION)
    ].drop_duplicates(["layer", "prompt"])
    layers = [0, most_bimodal_layer(plain), last_layer_of(rows)]
    with style():
        fig = Figure(figsize=(13, 3.6), layout="constrained")
        for ax, (role, layer) in zip(
            fig.subplots(1, 3), zip(("first", "most bimodal", "last"), layers, strict=True), strict=True
        ):
            ax.hist(rows[rows["layer"] == layer]["value"], bins=30, color="#4c72b0")
            dip = plain[plain["layer"] == layer].iloc[0]
            ax.set(
                title=f"{role}: layer {layer} (dip {dip['dip']:.3f}, p {dip['p_value']:.2g})",
                xlabel=f"prompt entropy ({DIP_NORMALIZATION})",
                ylabel="prompts",
            )
        fig.suptitle(f"{model}: per-prompt entropy of unperturbed prompts")
        return save(fig, stem)


def run_figures(run: Path, output: Path) -> list[Path]:
    """Both figures of every model in a run folder's stress results (nothing when it has none)."""
    values = RunFolder(run).stress(missing_ok=True)
    if values.empty:
        return []
    dips = RunFolder(run).dips(missing_ok=True)
    output.mkdir(parents=True, exist_ok=True)
    written = []
    for model in sorted(values["model"].unique()):
        written += stress_figure(values, model, output / f"stress_{slug(model)}")
        written += histograms(values, dips, model, output / f"bimodality_{slug(model)}")
    return written
