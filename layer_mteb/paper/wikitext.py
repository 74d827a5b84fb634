"""The paper's WikiText analyses from the release: the six metrics across depth for BERT, Pythia and Mamba (the
paper's Figure 2), across Pythia sizes with Llama3 8B (Figure 12) and across Pythia-410m's training checkpoints, each
drawn from the metrics the authors measured on WikiText-103 prompts, as the paper draws them.

Beside the figures, ``metric_extrema.csv`` places each curve's minimum and maximum (layer and relative depth) for
both sources, WikiText and the tasks' own texts (mean over the tasks a model has at every layer), so what changes
between the two is a table, not an impression. The correlations and the selector study stay on the task-text
metrics: the paper pairs each task's metrics with that task's score.
"""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from layer_mteb.analysis.report.markdown import integer, markdown_table, text
from layer_mteb.common.files import atomic_write
from layer_mteb.metrics.texts import task_of_label
from layer_mteb.paper import paper_figures

#: Figure 2: the architectures of Figure 1 (encoder, decoder, state space), on WikiText.
FIGURE2_MODELS = {"bert/base": "BERT-base", "Pythia/410m": "Pythia-410m", "mamba/370m": "Mamba-370m"}
#: Figure 12: every Pythia size with WikiText metrics, and Llama3 8B, smallest first.
SIZE_MODELS = {
    **{f"Pythia/{size}": f"Pythia-{size}" for size in ("14m", "70m", "160m", "410m", "1b", "1.4b", "2.8b", "6.9b")},
    "Llama3/8B": "Llama3-8B",
}
CHECKPOINT = "Pythia/410m@step"
EXTREMA_COLUMNS = ["figure", "model", "metric", "source", "split", "tasks", "min_layer", "min_depth", "max_layer"]
EXTREMA_COLUMNS += ["max_depth", "layers"]


def checkpoint_models(models: list[str]) -> dict[str, str]:
    """Pythia-410m's checkpoints and its final model, in training order, with their labels (none without a
    checkpoint)."""
    if not any(m.startswith(CHECKPOINT) for m in models):
        return {}
    chosen = [m for m in models if m.startswith(CHECKPOINT) or m == "Pythia/410m"]
    return {m: paper_figures.checkpoint_label(m) for m in sorted(chosen, key=paper_figures.checkpoint_step)}


def figure_sets(wikitext: pd.DataFrame) -> dict[str, dict[str, str]]:
    """Each WikiText figure's file stem -> its models (those the release has WikiText metrics for) and labels."""
    present = set(wikitext["model"])
    sets = {
        "figure2_wikitext": FIGURE2_MODELS,
        "figure12_wikitext": SIZE_MODELS,
        "progression_wikitext": checkpoint_models(sorted(present)),
    }
    return {stem: {m: label for m, label in models.items() if m in present} for stem, models in sets.items()}


TITLES = {
    "figure2_wikitext": "Figure 2: metrics on WikiText by depth, encoder / decoder / state-space model",
    "figure12_wikitext": "Figure 12: metrics on WikiText by depth across Pythia sizes (and Llama3 8B)",
    "progression_wikitext": "Pythia-410m during training: metrics on WikiText by depth",
}


def draw(wikitext: pd.DataFrame, output: Path) -> tuple[list[Path], dict[str, dict[str, str]]]:
    """The three WikiText metric figures; returns the files and each figure's models."""
    sets = figure_sets(wikitext)
    output.mkdir(parents=True, exist_ok=True)
    written: list[Path] = []
    for stem, models in sets.items():
        if models:
            written += paper_figures.metric_curves(wikitext, list(models), models, TITLES[stem], output / stem)
    return written, sets


def _extrema(curve: pd.DataFrame) -> dict:
    curve = curve.dropna(subset=["value"]).sort_values("layer")
    low, high = curve.loc[curve["value"].idxmin()], curve.loc[curve["value"].idxmax()]
    return {
        "min_layer": int(low["layer"]),
        "min_depth": round(float(low["relative_depth"]), 3),
        "max_layer": int(high["layer"]),
        "max_depth": round(float(high["relative_depth"]), 3),
        "layers": int(curve["n_layers"].iloc[0]),
    }


def task_text_curves(metrics: pd.DataFrame, model: str) -> tuple[pd.DataFrame, dict[str, int]]:
    """Per metric, ``model``'s own-text metric averaged over the tasks that have every layer (and their count)."""
    own = metrics[(metrics["model"] == model) & metrics["texts"].map(task_of_label).notna()]
    curves, counts = [], {}
    for metric, part in own.groupby("metric", sort=False):
        complete = part.groupby("task")["layer"].nunique()
        tasks = complete[complete == part["layer"].nunique()].index
        if len(tasks):
            kept = part[part["task"].isin(tasks)]
            curves.append(kept.groupby(["layer", "relative_depth", "n_layers"], as_index=False)["value"].mean())
            curves[-1]["metric"], counts[metric] = metric, len(tasks)
    return (pd.concat(curves, ignore_index=True) if curves else pd.DataFrame()), counts


def extrema(wikitext: pd.DataFrame, metrics: pd.DataFrame, sets: dict[str, dict[str, str]]) -> pd.DataFrame:
    """Minimum and maximum of each figure's curves, on WikiText and, where the model has them, on task texts."""
    rows = []
    for stem, models in sets.items():
        for model in models:
            wiki = wikitext[wikitext["model"] == model]
            own, counts = task_text_curves(metrics, model)
            for metric in paper_figures.METRIC_LABELS:
                curve = wiki[wiki["metric"] == metric]
                if not curve.empty:
                    split = curve["split"].fillna("").iloc[0] if "split" in curve else ""
                    rows.append({"figure": stem, "model": model, "metric": metric, "source": "wikitext",
                                 "split": split or "unrecorded", "tasks": pd.NA, **_extrema(curve)})  # fmt: skip
                if not own.empty and metric in counts:
                    rows.append({"figure": stem, "model": model, "metric": metric, "source": "task texts",
                                 "split": "test", "tasks": counts[metric],
                                 **_extrema(own[own["metric"] == metric])})  # fmt: skip
    return pd.DataFrame(rows, columns=EXTREMA_COLUMNS)


def write_extrema(table: pd.DataFrame, path: Path) -> Path:
    atomic_write(path, lambda tmp: table.to_csv(tmp, index=False))
    return path


def _depth(value: object) -> str:
    return "—" if pd.isna(value) else f"{float(value):.2f}"


def release_caveats(wikitext: pd.DataFrame) -> list[str]:
    """One line per drawn WikiText curve the release left incomplete or out of range: layers without a value, and
    entropies (÷ min(ln N, ln D)) above their bound of 1, which the newer files never exceed."""
    lines = []
    for model, part in wikitext.groupby("model", sort=True):
        notes = []
        for metric, curve in part.groupby("metric", sort=False):
            missing = int(curve["value"].isna().sum())
            if missing:
                notes.append(f"{metric} at {len(curve) - missing} of {len(curve)} layers")
            if metric in ("prompt_entropy", "dataset_entropy", "lidar") and curve["value"].max() > 1:
                notes.append(f"{metric} up to {curve['value'].max():.2f}")
        if notes:
            lines.append(f"- {model} ({part['split'].fillna('').iloc[0] or 'no split folder'}): {'; '.join(notes)}")
    return lines


def sources_markdown(sets: dict[str, dict[str, str]], table: pd.DataFrame, wikitext: pd.DataFrame) -> list[str]:
    """``summary.md``'s record of which source each figure and table uses, what the release left incomplete there,
    and where the prompt-entropy curves reach their minimum on WikiText against the tasks' own texts."""
    listed = {stem: ", ".join(models.values()) or "none in the release" for stem, models in sets.items()}
    lines = [
        "## Sources of each figure and table",
        "- `figure1.*`: per-layer mteb scores (release: 9 shared tasks; runs: 19 offline tasks).",
        f"- `figure2_wikitext.*`: the six metrics on WikiText ({listed['figure2_wikitext']}).",
        f"- `figure12_wikitext.*`: the six metrics on WikiText ({listed['figure12_wikitext']}).",
        "- `progression.*`: mean score over the 32 tasks (left) and prompt entropy on WikiText (right), "
        "Pythia-410m checkpoints; `progression_wikitext.*`: all six WikiText metrics of the same checkpoints.",
        "- `correlation.csv`, `selectors.csv`, `selector_leaderboard.csv`, `lomo.csv`, `lofo*.csv`: the metrics on "
        "each task's own texts (test split), paired with that task's score.",
        "- `prompt_length.*`: the release's per-prompt entropies of random-token prompts (adhoc pickle), beside runs.",
        "- WikiText metrics come from the release's `metrics/wikitext/train/` where a model has it, else from the "
        "folder without a split (`unrecorded` below), else `test/`; the paper's normalisation (entropies and LiDAR "
        "÷ min(ln N, ln D), the others raw). `metric_extrema.csv` holds every curve's minimum and maximum.",
    ]
    drawn = wikitext[wikitext["model"].isin({m for models in sets.values() for m in models})]
    caveats = release_caveats(drawn)
    if caveats:
        lines += [
            "WikiText curves the release left incomplete or above the normalised bound of 1 (kept as released; "
            "a missing layer is a gap in the figures):",
            "\n".join(caveats),
        ]
    lines.append("## Prompt entropy: where the curve is lowest, WikiText against the tasks' own texts")
    entropy = table[table["metric"] == "prompt_entropy"]
    pairs = []
    for (stem, model), part in entropy.groupby(["figure", "model"], sort=False):
        wiki = part[part["source"] == "wikitext"]
        own = part[part["source"] == "task texts"]
        pairs.append(
            {
                "figure": stem,
                "model": model,
                "split": wiki["split"].iloc[0] if len(wiki) else "—",
                "wiki_layer": wiki["min_layer"].iloc[0] if len(wiki) else pd.NA,
                "wiki_depth": wiki["min_depth"].iloc[0] if len(wiki) else pd.NA,
                "own_layer": own["min_layer"].iloc[0] if len(own) else pd.NA,
                "own_depth": own["min_depth"].iloc[0] if len(own) else pd.NA,
                "tasks": own["tasks"].iloc[0] if len(own) else pd.NA,
            }
        )
    columns = [("figure", "figure", text), ("model", "model", text), ("split", "WikiText split", text)]
    columns += [("wiki_layer", "min layer (WikiText)", integer), ("wiki_depth", "depth", _depth)]
    columns += [("own_layer", "min layer (task texts)", integer), ("own_depth", "depth", _depth)]
    columns += [("tasks", "tasks", integer)]
    return [*lines, markdown_table(pd.DataFrame(pairs), columns)]
