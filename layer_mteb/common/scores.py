"""``scores.csv``, the run's core table: its declaration (:data:`SCORES_TABLE`), its rows made from mteb's results
(:func:`main_scores`) and merged into the stored ones (:func:`combine_scores`), and what a reader takes from it.

One row per (task, layer, subset) with mteb's main score, keyed by integer layer, and the run's one model and setting
read back from it (:func:`one_setting`). An aggregate task's subtasks have rows of their own beside the aggregate's,
with the aggregate's name under ``aggregate`` (empty on every other row): the file holds them for a reader, and
:meth:`~layer_mteb.common.run_folder.RunFolder.scores` leaves them out (:func:`task_rows`), so every mean over a run's
tasks and every per-task pick counts the aggregate once, as mteb's benchmarks do.
"""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from layer_mteb.common.config import SETTINGS_COLUMNS, EncodeConfig, default_device
from layer_mteb.common.errors import UserError
from layer_mteb.common.table import LAYER_COLUMNS, Table, read_table, replace_rows

if TYPE_CHECKING:
    from pathlib import Path

    import pandas as pd

#: the ``scores.csv`` column naming the aggregate task a subtask's row belongs to (empty on every other row)
AGGREGATE_COLUMN = "aggregate"
SCORE_COLUMNS = [
    *LAYER_COLUMNS,
    "task",
    "task_type",
    "split",
    "subset",
    "main_score",
    *SETTINGS_COLUMNS,
    "data",
    AGGREGATE_COLUMN,
]
SCORES_TABLE = Table(
    SCORE_COLUMNS,
    "re-run `layer-mteb run` to rewrite it",
    ["model", "revision", "task", "subset", "layer"],
    ["model", "revision", "layer", "task", "split", "subset", *SETTINGS_COLUMNS],
)
#: what a ``scores.csv`` must hold to be read at all
REQUIRED_SCORE_COLUMNS = ["model", "layer", "n_layers", "task", "main_score"]
#: mteb's ``TaskResult.to_disk`` stores scores rounded to 6 decimals; the table uses the same value whether a unit
#: was just computed or read back from mteb's result JSON, so a resumed run equals an uninterrupted one exactly.
MTEB_DECIMALS = 6

tidy_scores = SCORES_TABLE.tidy


@dataclass(frozen=True)
class ScoredSetting:
    """What a run folder's ``scores.csv`` says made its scores: its one model, revision, depth and settings."""

    model: str
    revision: str
    n_layers: int
    config: EncodeConfig

    @classmethod
    def of(cls, scores: pd.DataFrame, **placement: Any) -> ScoredSetting:
        """The setting a (:func:`one_setting`) run table was scored with; ``placement`` (batch size, device, ...) is
        not recorded in the table and comes from the caller (default device: cuda if available)."""
        return cls(
            str(scores["model"].iloc[-1]),
            str(scores["revision"].iloc[-1]),
            int(scores["n_layers"].max()),
            EncodeConfig.from_key(scores.iloc[-1], **{"device": default_device(), **placement}),
        )


def main_scores(
    task_result, splits: Collection[str] | None = None, subsets: Collection[str] | None = None
) -> list[dict]:
    """mteb's ``TaskResult`` -> one row (task, split, subset, main_score rounded to :data:`MTEB_DECIMALS`) per split
    and subset, only ``splits`` and ``subsets`` where given: what a computed result and one read back from its JSON
    give alike."""
    return [
        {
            "task": task_result.task_name,
            "split": split,
            "subset": scores["hf_subset"],
            "main_score": round(float(scores["main_score"]), MTEB_DECIMALS),
        }
        for split, per_subset in task_result.scores.items()
        if splits is None or split in splits
        for scores in per_subset
        if not subsets or scores["hf_subset"] in subsets
    ]


def read_scores(path: Path) -> pd.DataFrame:
    """``path`` read as a checked scores table (:func:`~layer_mteb.common.table.read_table`), its layers integers."""
    return read_table(path, REQUIRED_SCORE_COLUMNS, SCORES_TABLE.fix).astype({"layer": int, "n_layers": int})


def combine_scores(kept: pd.DataFrame, new_rows: list[dict]) -> pd.DataFrame:
    """``kept`` (a table already in the run folder) updated with ``new_rows`` (:func:`replace_rows` by
    the table's key), so a run of a few tasks never drops the others' scores."""
    new = tidy_scores(new_rows)
    if kept.empty:
        return new
    return tidy_scores(replace_rows(kept, new, SCORES_TABLE.key).to_dict("records"))


def task_rows(scores: pd.DataFrame) -> pd.DataFrame:
    """The rows of the run's tasks as mteb counts them: an aggregate task's subtask rows left out (the aggregate's own
    rows are the task, as in mteb's benchmarks), so a mean over tasks or a pick per task reads each task once. A table
    written before the ``aggregate`` column holds no subtask row it can tell apart: all of it is read."""
    if AGGREGATE_COLUMN not in scores.columns:
        return scores
    named = scores[AGGREGATE_COLUMN]
    subtask = named.notna() & (named.astype(str) != "")
    return scores[~subtask].reset_index(drop=True) if subtask.any() else scores


def one_setting(scores: pd.DataFrame) -> pd.DataFrame:
    """The rows of the run's one model and settings. Every command that loads a run's model again
    (``select --labels``, ``cost``, ``export``, the agreement curves) reads the run through this, so they refuse the
    same mixed tables."""
    if scores["model"].nunique() > 1 or scores["revision"].nunique() > 1:
        runs = scores[["model", "revision"]].astype(str).drop_duplicates()
        named = ", ".join(f"{m} @ {r}" for m, r in zip(runs["model"], runs["revision"], strict=True))
        raise UserError(
            f"scores.csv holds several models or revisions ({named}): this command reads one; give a run folder of "
            "one model (`layer-mteb run --model MODEL --tasks TASKS --output RUN`, one folder per model)"
        )
    settings = [c for c in SETTINGS_COLUMNS if c in scores.columns]
    if len(scores[settings].astype(str).drop_duplicates()) > 1:
        differ = [c for c in settings if scores[c].astype(str).nunique() > 1]
        raise UserError(
            f"scores.csv holds several settings of {scores['model'].iloc[0]} ({', '.join(differ)} differ): give a "
            "run of one setting (one --output per setting)"
        )
    return scores.drop_duplicates(["task", "subset", "split", "layer"], keep="last")


def one_setting_per_model(scores: pd.DataFrame) -> pd.DataFrame:
    """:func:`one_setting` for each model of a table that may hold several (a ``run`` of several ``--model``): the
    readers that group by model (``select``, ``correlate``, the cost tradeoff) refuse a model scored at several
    revisions or settings, which they would otherwise average."""
    import pandas as pd

    return pd.concat([one_setting(part) for _, part in scores.groupby("model", sort=False)], ignore_index=True)
