"""Markdown for the report: Table 1 as the paper prints it (scores ×100), its caveats, and the selector leaderboard."""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence

import pandas as pd

from layer_mteb.analysis.report.table1 import ALL_TYPES

Format = Callable[[object], str]

TABLE1_RULES = (
    "Scores are mteb main scores ×100, averaged over tasks; a task's subsets are averaged first, so each task counts "
    "once. *best ≠ last*: share of tasks whose best layer is strictly better than the last layer (a tie counts for "
    "the last layer). *avg best*: each task at its own best layer (oracle). *best layer*: the single layer with the "
    "highest average over the tasks. *entropy*: the layer chosen by the label-free entropy selector "
    "(selection.csv), averaged over the same tasks; *per task*: each task at its own entropy pick."
)


def _missing(value: object) -> bool:
    """None, pandas' NA or a float NaN: what a table shows as "—"."""
    return value is None or value is pd.NA or (isinstance(value, float) and math.isnan(value))


def number_format(spec: str, scale: float = 1.0, suffix: str = "") -> Format:
    """A column's formatter of numbers: ``scale × value`` written by ``spec``, then ``suffix``; "—" where missing."""
    return lambda value: "—" if _missing(value) else f"{scale * float(value):{spec}}{suffix}"


score = number_format(".1f", 100)
percent = number_format(".1f", suffix=" %")


def integer(value: object) -> str:
    """A count or layer as written, "—" where missing."""
    return "—" if _missing(value) else str(int(value))


def text(value: object) -> str:
    """A text cell, its pipes escaped so they never split the row; "—" where missing."""
    return "—" if _missing(value) else str(value).replace("|", "\\|")


def markdown_table(frame: pd.DataFrame, columns: Sequence[tuple[str, str, Format]]) -> str:
    """``columns`` = (frame column, header, formatter); numbers right-aligned."""
    header = "| " + " | ".join(h for _, h, _ in columns) + " |"
    align = "| " + " | ".join("---" if f is text else "---:" for _, _, f in columns) + " |"
    body = ["| " + " | ".join(f(row[c]) for c, _, f in columns) + " |" for _, row in frame.iterrows()]
    return "\n".join([header, align, *body])


def table1_markdown(table: pd.DataFrame, notes: Sequence[str] = ()) -> str:
    """Table 1 (one row per model), then the per-task-type breakdown, the rules and the caveats."""
    shared = [("n_tasks", "tasks", integer), ("best_not_last_pct", "best ≠ last", percent)]
    shared += [("avg_last", "avg last", score), ("avg_best", "avg best", score), ("best_layer", "best layer", integer)]
    shared += [("best_layer_avg", "its avg", score), ("entropy_layer", "entropy layer", integer)]
    shared += [("entropy_layer_avg", "its avg", score), ("entropy_per_task_avg", "entropy per task", score)]
    overall = table[table["task_type"] == ALL_TYPES]
    by_type = table[table["task_type"] != ALL_TYPES]
    model_columns = [("model", "model", text), ("n_layers", "L", integer)]
    selectors = sorted({s for s in table["entropy_selector"] if not _missing(s)})
    parts = [
        "# Table 1: the last layer vs the best layer",
        markdown_table(overall, model_columns + shared),
        "## By task type",
        markdown_table(by_type, [("model", "model", text), ("task_type", "task type", text), *shared]),
        TABLE1_RULES + (f" Entropy selector used: {', '.join(selectors)}." if selectors else ""),
    ]
    if notes:
        parts += ["## Notes", "\n".join(f"- {note}" for note in notes)]
    return "\n\n".join(parts) + "\n"


def leaderboard_markdown(board: pd.DataFrame) -> str:
    """The selectors per model, best average score first (the selection file's own numbers)."""
    columns = [("model", "model", text), ("selector", "selector", text), ("scope", "scope", text)]
    columns += [("layer", "layer", integer), ("n_tasks", "tasks", integer), ("score", "score", score)]
    columns += [("last", "last", score), ("best", "best", score), ("gain", "gain vs last", score)]
    columns += [("regret", "regret vs best", score)]
    intro = (
        "Scores ×100 from selection.csv. *mean*: one layer for every task, chosen against the mean score; "
        "*per task*: each task's own pick, averaged over tasks. *gain* = chosen − last layer, *regret* = best − chosen."
    )
    return "\n".join(["# Label-free layer selection", "", markdown_table(board, columns), "", intro]) + "\n"
