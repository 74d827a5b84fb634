"""The run folders a report reads, as one set of tables: every folder's scores and side tables (the picks, the
metrics, the correlations), each (model, settings) under one label, rows merged by each table's own key."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import pandas as pd

from layer_mteb.analysis.runs.folders import one_arithmetic
from layer_mteb.analysis.selection.correlation import CORRELATION_TABLE
from layer_mteb.analysis.selection.selectors import PICKS_TABLE
from layer_mteb.common.config import SETTINGS_COLUMNS
from layer_mteb.common.errors import UserError
from layer_mteb.common.run_folder import RunFolder
from layer_mteb.metrics import METRICS_TABLE
from layer_mteb.metrics.texts import task_texts_label

#: The optional tables a report reads beside the scores, by its name for them.
SIDE_TABLES = {"picks": PICKS_TABLE, "metrics": METRICS_TABLE, "correlation": CORRELATION_TABLE}
#: the side tables whose text sources :func:`_as_report_rows` resolves to one per scope
PER_SCOPE = ("picks", "correlation")
CONFIG_COLUMNS = ("revision", *SETTINGS_COLUMNS)


@dataclass
class Runs:
    """Every run folder's frames, concatenated; ``model`` holds a label that is unique per (model, settings)."""

    scores: pd.DataFrame
    picks: pd.DataFrame | None = None
    metrics: pd.DataFrame | None = None
    correlation: pd.DataFrame | None = None
    folders: list[RunFolder] = field(default_factory=list)


def load_runs(folders: Iterable[str | Path | RunFolder]) -> Runs:
    """Read run folders. A model run with different settings gets labels naming the difference, never merging;
    runs with the same settings merge, a row scored twice kept from the folder given last."""
    folders = list({Path(f): RunFolder(f) for f in folders}.values())  # each folder once, in the order given
    if not folders:
        raise UserError("no run folders given: pass --run results/<run> (a folder holding scores.csv)")
    parts = [(folder, part) for folder in folders for part in _runs_in(folder.scores())]
    labels = _labels([part for _, part in parts])
    scores, sides = [], {name: [] for name in SIDE_TABLES}
    for (folder, part), label in zip(parts, labels, strict=True):
        scores.append(part.assign(model=label))
        alone = sum(f == folder for f, _ in parts) == 1
        picked = _picked_arithmetic(_side_rows(folder.side_table(PICKS_TABLE.file), str(part["model"].iloc[0]), alone))
        for side_name, table in SIDE_TABLES.items():
            rows = _as_report_rows(side_name, folder.side_table(table.file))
            side = _side_rows(rows, str(part["model"].iloc[0]), alone)
            if side is not None and side_name == "metrics":  # one arithmetic per run, as its picks read them
                side = one_arithmetic(side, picked, folder.path)
            if side is not None:
                sides[side_name].append(side.assign(model=label))
    merged = pd.concat(scores, ignore_index=True)
    keys = [c for c in ("model", "task", "split", "subset", "layer") if c in merged.columns]
    merged = merged.drop_duplicates(keys, keep="last").reset_index(drop=True)
    merged_sides = {name: _merge_side(name, frames) for name, frames in sides.items()}
    return Runs(merged, **merged_sides, folders=folders)


def _picked_arithmetic(picks: pd.DataFrame | None) -> str | None:
    """The one arithmetic a run's picks name (``selection.csv``), which its metrics are drawn in; else None."""
    if picks is None or "arithmetic" not in picks.columns:
        return None
    named = set(picks["arithmetic"].astype(str)) - {"-"}
    return named.pop() if len(named) == 1 else None


def _runs_in(frame: pd.DataFrame) -> list[pd.DataFrame]:
    """A folder's table split by model, revision and settings: each its own label, never averaged together."""
    keys = ["model", *[c for c in CONFIG_COLUMNS if c in frame.columns and c != "attention"]]
    return [part for _, part in frame.groupby(keys, sort=False, dropna=False)]


def _side_rows(side: pd.DataFrame | None, model: str, alone: bool) -> pd.DataFrame | None:
    """The side-file rows of ``model``; a file of one other model is this run's when the run has one model (the
    metrics code may spell the model as given on the command line)."""
    if side is None:
        return None
    names = side["model"].astype(str)
    if (names == model).any():
        return side[names == model]
    return side if alone and names.nunique() == 1 else None


def _as_report_rows(name: str, frame: pd.DataFrame | None) -> pd.DataFrame | None:
    """Side tables -> one row per (selector or metric, scope): a task's own-text rows where present, else WikiText."""
    if frame is None or name not in PER_SCOPE or "task" not in frame.columns:
        return frame
    if "texts" in frame.columns:
        texts = frame["texts"].astype(str)
        own = texts == frame["task"].astype(str).map(task_texts_label)
        key = "selector" if name == "picks" else "metric"
        has_own = own.groupby([frame["model"], frame["task"], frame[key]]).transform("any")
        frame = frame[own | (~has_own & (texts == "wikitext"))]
    frame = frame.assign(scope=frame["task"].astype(str))
    return frame.rename(columns={"statistic": "value"}) if name == "correlation" else frame


def _merge_side(name: str, frames: list[pd.DataFrame]) -> pd.DataFrame | None:
    """Concatenate one kind of side file; a row repeated by merged runs keeps the copy from the folder given last."""
    if not frames:
        return None
    frame = pd.concat(frames, ignore_index=True)
    resolved = ("texts",) if name in PER_SCOPE else ()
    keys = [c for c in SIDE_TABLES[name].row_key if c in frame.columns and c not in resolved]
    return frame.drop_duplicates(keys, keep="last").reset_index(drop=True)


def _labels(frames: Sequence[pd.DataFrame]) -> list[str]:
    """One label per run: the model name, plus the settings that tell apart runs of the same model."""
    names = [str(frame["model"].iloc[0]) for frame in frames]
    configs = [{c: str(f[c].iloc[0]) for c in CONFIG_COLUMNS if c in f.columns} for f in frames]
    labels = []
    for name, config in zip(names, configs, strict=True):
        same = [c for n, c in zip(names, configs, strict=True) if n == name]
        differing = [k for k in config if len({c.get(k) for c in same}) > 1]
        labels.append(f"{name} ({', '.join(f'{k}={config[k]}' for k in differing)})" if differing else name)
    return labels
