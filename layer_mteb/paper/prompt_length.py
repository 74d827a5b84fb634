"""The paper's prompt-length stress test regenerated from the authors' release (Pythia-410m, 1000 random-token
prompts per length) beside this project's models' curves: ``prompt_length.csv``, its figure, each run's stress
figures and ``stress.md`` (per model the trends, minima and most bimodal layer).
"""

from __future__ import annotations

from pathlib import Path

import pandas as pd
from matplotlib.figure import Figure

from layer_mteb.analysis.report.figures import save, style
from layer_mteb.analysis.report.stress_report import (
    length_minima,
    level_lines,
    model_summary,
    run_figures,
    stress_curves,
    stress_markdown,
)
from layer_mteb.analysis.rules import last_layer_of
from layer_mteb.common.files import atomic_write
from layer_mteb.common.run_folder import RunFolder
from layer_mteb.metrics.bimodality import DIPS_TABLE, STRESS_TABLE

RELEASE_FILE = "official_prompt_length_entropy.csv.gz"
COLUMNS = ["model", "prompt_length", "layer", "normalization", "mean", "std"]


def release_curves(release: Path | pd.DataFrame) -> pd.DataFrame:
    """Mean and std over prompts of the released per-prompt values (the table, or a folder of extracted tables)."""
    frame = release if isinstance(release, pd.DataFrame) else pd.read_csv(release / RELEASE_FILE)
    grouped = frame.groupby(["model", "prompt_length", "layer", "normalization"], sort=True)["value"]
    return grouped.agg(mean="mean", std="std").reset_index()[COLUMNS]


def our_curves(stress: list[pd.DataFrame]) -> pd.DataFrame:
    """The length test of every run's ``stress`` table that has one, in the release's normalisations."""
    parts = []
    for values in stress:
        values = values[(values["test"] == "length") & values["normalization"].isin(["raw", "maxEntropy"])]
        if not values.empty:
            curves = stress_curves(values).rename(columns={"level": "prompt_length"})
            parts.append(curves.assign(prompt_length=curves["prompt_length"].astype(int))[COLUMNS])
    return pd.concat(parts, ignore_index=True) if parts else pd.DataFrame(columns=COLUMNS)


def reproduce(release: Path | pd.DataFrame | None, runs: list[Path], output: Path) -> list[Path]:
    """The length curves of the release (none when it lacks the adhoc pickle) and of every run that has them."""
    stress = [RunFolder(run).read(STRESS_TABLE, missing_ok=True) for run in runs]
    parts = [our_curves(stress)] if release is None else [release_curves(release), our_curves(stress)]
    curves = pd.concat(parts, ignore_index=True)
    path = output / "prompt_length.csv"
    atomic_write(path, lambda tmp: curves.to_csv(tmp, index=False, float_format="%.10g"))
    written = [path, *_figure(curves, output / "prompt_length")]
    for run in runs:
        written += run_figures(run, output / "stress")
    stressed = [(run, values) for run, values in zip(runs, stress, strict=True) if not values.empty]
    if not stressed:  # ``stress.md`` only when some run has stress tests
        return written
    values = pd.concat([values for _, values in stressed], ignore_index=True)
    dips = pd.concat([RunFolder(run).read(DIPS_TABLE, missing_ok=True) for run, _ in stressed], ignore_index=True)
    markdown = stress_markdown(model_summary(values, dips), length_minima(curves))
    atomic_write(output / "stress.md", lambda tmp: Path(tmp).write_text(markdown + "\n"))
    return [*written, output / "stress.md"]


def _figure(curves: pd.DataFrame, stem: Path) -> list[Path]:
    """Mean entropy against relative depth, a column per model, raw (top) and ÷ max entropy (bottom), a line per
    prompt length."""
    models = list(dict.fromkeys(curves["model"]))
    with style():
        fig = Figure(figsize=(4.2 * len(models), 6.5), layout="constrained")
        axes = fig.subplots(2, len(models), squeeze=False)
        for column, model in enumerate(models):
            part = curves[curves["model"] == model]
            part = part.assign(depth=part["layer"] / last_layer_of(part), level=part["prompt_length"])
            for row, normalization in enumerate(("raw", "maxEntropy")):
                ax = axes[row, column]
                level_lines(ax, part[part["normalization"] == normalization], "depth", "tokens", cmap="magma_r")
                ax.set(title=model if row == 0 else "", xlabel="relative depth", ylabel=f"entropy ({normalization})")
        return save(fig, stem)
