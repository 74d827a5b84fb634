"""The stress tests reported: figures in the paper's style (a line per level with a colour bar; entropy histograms
at the first, most bimodal and last layers) and per-model findings computed from ``stress.csv`` / ``dip.csv``, so
the documentation quotes numbers a command wrote rather than numbers read off a figure.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
from matplotlib import colormaps
from matplotlib.cm import ScalarMappable
from matplotlib.colors import Normalize
from matplotlib.figure import Figure

from layer_mteb.analysis.report.figures import save, slug, style
from layer_mteb.analysis.report.markdown import integer, markdown_table, number_format, text
from layer_mteb.analysis.rules import last_layer_of
from layer_mteb.common.run_folder import RunFolder
from layer_mteb.metrics.bimodality import DIP_NORMALIZATION, DIPS_TABLE, STRESS_TABLE, most_bimodal_layer

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
    rows = _unperturbed(values[values["model"] == model]).drop_duplicates(["layer", "prompt"])
    layers = {"first": 0, "most bimodal": most_bimodal_layer(plain), "last": last_layer_of(rows)}
    with style():
        fig = Figure(figsize=(13, 3.6), layout="constrained")
        for ax, (role, layer) in zip(fig.subplots(1, 3), layers.items(), strict=True):
            ax.hist(rows[rows["layer"] == layer]["value"], bins=30, color="#4c72b0")
            dip = plain[plain["layer"] == layer].iloc[0]
            ax.set(
                title=f"{role}: layer {layer} (dip {dip['dip']:.3f}, p {dip['p_value']:.2g})",
                xlabel=f"prompt entropy ({DIP_NORMALIZATION})",
                ylabel="prompts",
            )
        fig.suptitle(f"{model}: per-prompt entropy of unperturbed prompts")
        return save(fig, stem)


def _unperturbed(frame: pd.DataFrame) -> pd.DataFrame:
    """The rows of the unperturbed prompts (randomness and repetition at level 0) as the dip test reads them."""
    plain = frame["test"].isin(["randomness", "repetition"]) & (frame["level"] == 0)
    return frame[plain & (frame["normalization"] == DIP_NORMALIZATION)]


def run_figures(folder: Path | RunFolder, output: Path) -> list[Path]:
    """Both figures of every model in a run folder's stress results (nothing when it has none)."""
    folder = RunFolder(folder)
    values = folder.read(STRESS_TABLE, missing_ok=True)
    if values.empty:
        return []
    dips = folder.read(DIPS_TABLE, missing_ok=True)
    output.mkdir(parents=True, exist_ok=True)
    written = []
    for model in sorted(values["model"].unique()):
        written += stress_figure(values, model, output / f"stress_{slug(model)}")
        written += histograms(values, dips, model, output / f"bimodality_{slug(model)}")
    return written


#: (test, normalisation read, the direction the paper reports: +1 rises with the level, -1 falls)
TRENDS = (("randomness", DIP_NORMALIZATION, 1), ("repetition", DIP_NORMALIZATION, -1), ("length", "raw", 1))
#: p-value under which a dip counts as bimodal
ALPHA = 0.05


def trend(curves: pd.DataFrame, test: str, normalization: str, direction: int) -> tuple[int, int]:
    """(layers whose mean moves in ``direction`` from the weakest to the strongest level, layers) of one model."""
    part = curves[(curves["test"] == test) & (curves["normalization"] == normalization)]
    if part.empty:
        return 0, 0
    table = part.pivot(index="layer", columns="level", values="mean").sort_index(axis=1)
    change = table.iloc[:, -1] - table.iloc[:, 0]
    return int((change * direction > 0).sum()), len(table)


def model_summary(values: pd.DataFrame, dips: pd.DataFrame) -> pd.DataFrame:
    """One row per (model, readout) of a stress table and its dip table (see the module docstring)."""
    rows = []
    for (model, readout), part in values.groupby(["model", "readout"], sort=True):
        curves = stress_curves(part)
        row: dict[str, object] = {"model": model, "readout": readout, "layers": int(part["layer"].max())}
        for test, normalization, direction in TRENDS:
            moved, layers = trend(curves, test, normalization, direction)
            row[test] = f"{moved}/{layers}" if layers else None
        plain = _unperturbed(curves).drop_duplicates("layer")
        if not plain.empty:
            low = plain.sort_values(["mean", "layer"], kind="stable").iloc[0]
            row.update(min_layer=int(low["layer"]), min_value=float(low["mean"]))
            row["min_depth"] = row["min_layer"] / row["layers"]
        row.update(_bimodality(dips[(dips["model"] == model) & (dips["readout"] == readout)]))
        rows.append(row)
    return pd.DataFrame(rows)


def _bimodality(dips: pd.DataFrame) -> dict[str, object]:
    """The most bimodal layer of the unperturbed prompts, and how many perturbed levels × layers have p < ALPHA."""
    out: dict[str, object] = {}
    plain = dips[dips["test"] == "none"]
    if not plain.empty:
        layer = most_bimodal_layer(plain)
        top = plain[plain["layer"] == layer].iloc[0]
        out.update(dip_layer=layer, dip=float(top["dip"]), dip_p=float(top["p_value"]), dip_n=int(top["n"]))
    # randomness and repetition at level 0 are the unperturbed prompts again: not a stress level
    unperturbed = dips["test"].isin(["randomness", "repetition"]) & (dips["level"] == 0)
    stressed = dips[(dips["test"] != "none") & ~unperturbed]
    out["bimodal_levels"] = f"{int((stressed['p_value'] < ALPHA).sum())}/{len(stressed)}"
    return out


def length_minima(curves: pd.DataFrame, normalization: str = DIP_NORMALIZATION) -> pd.DataFrame:
    """Where each ``prompt_length.csv`` curve's mean entropy is lowest and how far it falls from layer 0."""
    rows = []
    chosen = curves[curves["normalization"] == normalization]
    for (model, length), part in chosen.groupby(["model", "prompt_length"], sort=False):
        part = part.sort_values("layer")
        low = part.sort_values(["mean", "layer"], kind="stable").iloc[0]
        layers, first = int(part["layer"].max()), float(part["mean"].iloc[0])
        rows.append(
            {
                "model": model,
                "prompt_length": int(length),
                "layers": layers,
                "min_layer": int(low["layer"]),
                "min_depth": int(low["layer"]) / layers,
                "first": first,
                "min_value": float(low["mean"]),
                "drop": first - float(low["mean"]),
            }
        )
    return pd.DataFrame(rows)


_f3, _f2, _p = number_format(".3f"), number_format(".2f"), number_format(".2g")


def stress_markdown(summary: pd.DataFrame, minima: pd.DataFrame) -> str:
    """The two tables of ``stress.md``: per model, and per model and prompt length."""
    s = [("model", "model", text), ("readout", "readout", text), ("layers", "L", integer)]
    s += [("randomness", "rises with randomness", text), ("repetition", "falls with repetition", text)]
    s += [("length", "raw rises with length", text), ("min_layer", "min layer", integer)]
    s += [("min_depth", "depth", _f2), ("min_value", "min entropy", _f3), ("dip_layer", "most bimodal", integer)]
    s += [("dip", "dip", _f3), ("dip_p", "p", _p), ("dip_n", "prompts", integer)]
    s += [("bimodal_levels", f"stress levels × layers with p < {ALPHA}", text)]
    m = [("model", "model", text), ("prompt_length", "tokens", integer), ("min_layer", "min layer", integer)]
    m += [("min_depth", "depth", _f2), ("first", "layer 0", _f3), ("min_value", "minimum", _f3), ("drop", "drop", _f3)]
    return "\n\n".join(
        [
            "## Stress tests per model",
            "Entropy ÷ min(log N, log D) unless marked raw; trends count layers (of L + 1) whose mean over prompts "
            "moves that way from the weakest to the strongest level; minimum and dip on the unperturbed prompts.",
            markdown_table(summary, s),
            "## Prompt length: where each model compresses random-token prompts most (÷ min(log N, log D))",
            markdown_table(minima, m),
        ]
    )
