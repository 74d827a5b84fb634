"""The paper's tables. Table 1 from per-layer scores: the library's Table 1 (one tie rule, one last layer: see
:mod:`layer_mteb.analysis.rules`) ×100, with the printed values beside the recomputed ones; and
``results/paper/summary.md``, the tables the README's "Reproducing the paper" section embeds, as markdown."""

from __future__ import annotations

import pandas as pd

from layer_mteb.analysis.report.markdown import integer, markdown_table, number_format, text
from layer_mteb.analysis.report.table1 import build_table1, per_task_summary, table1_notes, task_scores

number, signed = number_format(".1f"), number_format("+.1f")


#: Table 1 as printed (workshop version): best ≠ last (%), avg last, avg best.
PAPER_TABLE1 = {
    "LLM2Vec-mntp-unsup-simcse/8B": ("LLM2Vec 8B", 100.0, 64.7, 66.8),
    "Pythia/410m": ("Pythia 410M", 96.6, 49.8, 53.3),
    "mamba/130m": ("Mamba 130M", 100.0, 46.9, 50.9),
}
#: The heading after which ``summary.md`` lists the task sets (the selector study's sections go before it).
TASK_SETS = "## Task sets"
COLUMNS = ["model", "n_tasks", "last_layer", "best_not_last", "avg_last", "avg_best", "note"]


def table1(scores: pd.DataFrame, models: list[str] | None = None) -> pd.DataFrame:
    """The library's Table 1 (:func:`~layer_mteb.analysis.report.table1.build_table1`, all task types) for ``models``
    (default: every model, in order of appearance), ×100 as the paper prints it; ``note`` names the tasks left out
    for lack of a last-layer score and the layers other tasks miss."""
    names = models or scores["model"].drop_duplicates().tolist()
    part = scores[scores["model"].isin(names)]
    table = build_table1(part).query("task_type == 'all'").set_index("model").loc[names]
    summary = per_task_summary(task_scores(part))
    notes = [table1_notes(summary[summary["model"] == name]) for name in names]
    rows = {
        "model": names,
        "n_tasks": table["n_tasks"].astype(int).to_numpy(),
        "last_layer": table["n_layers"].astype(int).to_numpy(),
        "best_not_last": table["best_not_last_pct"].to_numpy(),
        "avg_last": 100.0 * table["avg_last"].to_numpy(),
        "avg_best": 100.0 * table["avg_best"].to_numpy(),
        "note": ["; ".join(n.removeprefix(f"{name}: ") for n in ns) for name, ns in zip(names, notes, strict=True)],
    }
    return pd.DataFrame(rows, columns=COLUMNS)


def with_last_layer(scores: pd.DataFrame, model: str, last_layer: int) -> pd.DataFrame:
    """``model``'s scores cut at ``last_layer``: how the paper counted a model whose output layer it did not score."""
    part = scores[(scores["model"] == model) & (scores["layer"] <= last_layer)]
    return part.assign(n_layers=last_layer)


def versus_paper(release: pd.DataFrame, reasons: dict[str, str]) -> pd.DataFrame:
    """The paper's three rows: printed, recomputed from the release, difference, and why they differ."""
    rows = []
    for model, (label, pct, last, best) in PAPER_TABLE1.items():
        ours = release[release["model"] == model].iloc[0]
        rows.append(
            {
                "paper row": label,
                "release model": model,
                "paper": f"{pct:.1f} % / {last:.1f} / {best:.1f}",
                "release": f"{number(ours.best_not_last)} % / {number(ours.avg_last)} / {number(ours.avg_best)}",
                "difference": f"{signed(ours.best_not_last - pct)} / {signed(ours.avg_last - last)} / "
                f"{signed(ours.avg_best - best)}",
                "why": reasons.get(model, ""),
            }
        )
    return pd.DataFrame(rows)


def summary_markdown(
    versus: pd.DataFrame,
    rows: pd.DataFrame,
    figure_tasks: dict[str, list[str]],
    permutations: int,
    arithmetic: str = "",
) -> str:
    """Table 1 (paper vs release), every model's row and the task sets (the selector study adds its sections);
    ``arithmetic``: the line saying which metric arithmetic made the release's and the runs' numbers."""
    t = [("paper row", "paper row", text), ("paper", "paper", text), ("release", "release", text)]
    t += [("difference", "difference", text), ("why", "why", text)]
    r = [("model", "model", text), ("source", "source", text), ("n_tasks", "tasks", integer)]
    r += [("last_layer", "last", integer), ("best_not_last", "best ≠ last %", number)]
    r += [("avg_last", "avg last", number), ("avg_best", "avg best", number)]
    parts = [
        "## Table 1: paper vs the authors' release (best ≠ last % / avg last / avg best, ×100)",
        markdown_table(versus, t),
        "## Every model (release rows, then this project's runs)",
        markdown_table(rows.assign(note=rows["note"].str.slice(0, 80)), r),
        TASK_SETS,
        *[f"- {name} ({len(tasks)}): {', '.join(tasks)}" for name, tasks in figure_tasks.items()],
        f"Correlation p-values: {permutations} seeded permutations "
        f"(smallest possible p = {1 / (permutations + 1):.4f}).",
        *([arithmetic] if arithmetic else []),
    ]
    return "\n\n".join(parts) + "\n"
