"""The paper's figures regenerated from the release: Figure 1, the WikiText metric curves (Figure 2, Figure 12,
Pythia-410m's checkpoints) and the training progression. A panel's score curves average one task set
(:func:`.rules.common_tasks`); a layer lacking one is a gap. ``metric_extrema.csv`` puts each curve's extremes on
WikiText beside those on the tasks' own texts (which the correlations use: the paper pairs them with scores).
"""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import seaborn as sns
from matplotlib.figure import Figure
from matplotlib.lines import Line2D

from layer_mteb.analysis.report.figures import figure1_panel, save, style
from layer_mteb.analysis.report.markdown import integer, markdown_table, number_format, text
from layer_mteb.analysis.report.table1 import headline_tasks, task_scores
from layer_mteb.analysis.rules import FIGURE1_COVERAGE, tasks_phrase
from layer_mteb.metrics.texts import task_of_label

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
    """``models``' Figure 1 curves (score ×100 over :func:`.rules.common_tasks`, with gaps) and that task set."""
    headline = headline_tasks(task_scores(scores[scores["model"].isin(models)]), coverage=coverage)
    order = {model: i for i, model in enumerate(models)}
    curves = headline.curves.sort_values(["model", "layer"], key=lambda c: c.map(order) if c.name == "model" else c)
    return curves.assign(score=curves["main_score"] * 100), headline.tasks


def figure1(
    release: pd.DataFrame, ours: pd.DataFrame, models: list[str], stem: Path
) -> tuple[list[Path], dict[str, list[str]]]:
    """Left: the release's models; right: this project's runs; each panel over its own common task set. Returns the
    files and, by panel, the tasks it averages."""
    panels = {
        "Figure 1, release panel": (*curves_of(release, models), "authors' release"),
        "Figure 1, our panel": (*curves_of(ours, ours["model"].drop_duplicates().tolist()), "this project's runs"),
    }
    with style():
        fig = Figure(figsize=(13, 4.8), layout="constrained")
        axes = fig.subplots(1, 2)
        for ax, (curves, tasks, title) in zip(axes, panels.values(), strict=True):
            figure1_panel(ax, curves)
            ax.set_ylabel(f"mean main score ×100 over {tasks_phrase(len(tasks))}")
            ax.set_title(f"{title}: mean over the same {tasks_phrase(len(tasks))}", fontsize=10)
            ax.legend(fontsize=8, frameon=False)
        return save(fig, stem), {name: tasks for name, (_, tasks, _) in panels.items()}


def progression(scores: pd.DataFrame, wikitext: pd.DataFrame, stem: Path) -> list[Path]:
    """Pythia-410m's checkpoints: score and WikiText prompt entropy (as the paper measures it) vs depth."""
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
    """One panel per metric, each of ``models``' WikiText curves against relative depth. A missing layer is a gap
    (such a curve marks its points, so a lone value stays visible), never a line drawn across it."""
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
    """Pythia-410m's checkpoints and final model in training order, with labels (none without a checkpoint)."""
    if not any(m.startswith(CHECKPOINT) for m in models):
        return {}
    chosen = [m for m in models if m.startswith(CHECKPOINT) or m == "Pythia/410m"]
    return {m: checkpoint_label(m) for m in sorted(chosen, key=checkpoint_step)}


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


def draw_wikitext(wikitext: pd.DataFrame, output: Path) -> tuple[list[Path], dict[str, dict[str, str]]]:
    """The three WikiText metric figures; returns the files and each figure's models."""
    sets = figure_sets(wikitext)
    output.mkdir(parents=True, exist_ok=True)
    written: list[Path] = []
    for stem, models in sets.items():
        if models:
            written += metric_curves(wikitext, list(models), models, TITLES[stem], output / stem)
    return written, sets


def _extrema(curve: pd.DataFrame) -> dict:
    """The layers (and depths) of one curve's minimum and maximum, layers without a value left out."""
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
            for metric in METRIC_LABELS:
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


_depth = number_format(".2f")


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
    """``summary.md``'s sources of each figure and table, the release's gaps, and prompt entropy's minima."""
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
    keys = ["figure", "model"]
    wiki = entropy[entropy["source"] == "wikitext"].set_index(keys)[["split", "min_layer", "min_depth"]]
    own = entropy[entropy["source"] == "task texts"].set_index(keys)[["min_layer", "min_depth", "tasks"]]
    pairs = (
        entropy[keys].drop_duplicates().join(wiki.add_prefix("wiki_"), on=keys).join(own.add_prefix("own_"), on=keys)
    )
    columns = [("figure", "figure", text), ("model", "model", text), ("wiki_split", "WikiText split", text)]
    columns += [("wiki_min_layer", "min layer (WikiText)", integer), ("wiki_min_depth", "depth", _depth)]
    columns += [("own_min_layer", "min layer (task texts)", integer), ("own_min_depth", "depth", _depth)]
    columns += [("own_tasks", "tasks", integer)]
    return [*lines, markdown_table(pairs, columns)]
