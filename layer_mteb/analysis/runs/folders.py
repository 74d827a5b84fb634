"""Run folders for analysis: one run's scores with the metrics matching its settings (:func:`load_run`), several
runs for a report with one label per model (:func:`load_runs`), and the authors' published per-layer scores."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import pandas as pd

from layer_mteb.analysis.runs.importing import release_scores
from layer_mteb.analysis.runs.release_layout import PYTHIA_SCORES_FILE, RELEASE_ENV, release_folder
from layer_mteb.common.config import SETTINGS_COLUMNS
from layer_mteb.common.errors import UserError
from layer_mteb.common.run_folder import (
    CORRELATION_TABLE,
    MTEB_FOLDER,
    PICKS_TABLE,
    SCORES_FILE,
    RunFolder,
    one_setting_per_model,
)
from layer_mteb.metrics import METRIC_READOUTS, METRICS_TABLE
from layer_mteb.metrics.texts import task_texts_label

#: The optional tables a report reads beside the scores, by its name for them.
SIDE_TABLES = {"picks": PICKS_TABLE, "metrics": METRICS_TABLE, "correlation": CORRELATION_TABLE}
#: the side tables whose text sources :func:`_as_report_rows` resolves to one per scope
PER_SCOPE = ("picks", "correlation")
CONFIG_COLUMNS = ("revision", *SETTINGS_COLUMNS)


def load_run(
    folder: str | Path | RunFolder | None,
    scores: pd.DataFrame | None,
    metrics: pd.DataFrame | None,
    metric_readout: str = "auto",
) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Scores and metrics from ``folder`` (unless given), metrics restricted to the scores' settings. Their readout
    may differ (``metric_readout``): the paper scored with the final norm but measured metrics on the raw stream."""
    if metric_readout not in METRIC_READOUTS:
        raise UserError(f"--metric-readout must be one of {', '.join(METRIC_READOUTS)}; got {metric_readout!r}")
    if scores is None or metrics is None:
        if folder is None:
            raise UserError("give a run folder (--run) or both scores and metrics tables")
        folder = RunFolder(folder)
        scores = folder.scores() if scores is None else scores
        metrics = folder.read(METRICS_TABLE) if metrics is None else metrics
    if scores.empty:
        raise UserError("the scores table is empty")
    scores = one_setting_per_model(scores)  # picks and correlations are per model, never across settings
    settings = [c for c in SETTINGS_COLUMNS if c in scores.columns and c in metrics.columns and c != "readout"]
    used = scores[["model", *settings, "readout"]].drop_duplicates()
    matched = metrics.merge(used[["model", *settings]].drop_duplicates(), on=["model", *settings])
    parts = []
    for (model, _texts), part in matched.groupby(["model", "texts"], sort=False):
        scored = set(used.loc[used["model"] == model, "readout"])
        wanted = _metric_readout(metric_readout, scored, set(part["readout"]))
        parts.append(part[part["readout"] == wanted])
    matched = pd.concat(parts) if parts else matched
    if matched.empty and not metrics.empty:  # an empty table given on purpose leaves only the baselines
        described = ", ".join(f"{c}={used[c].iloc[0]}" for c in [*settings, "readout"])
        raise UserError(
            f"metrics.csv has no rows for the scored model and settings ({used['model'].iloc[0]}, {described}); "
            f"rerun `layer-mteb metrics --run {folder or 'RUN'}`, which takes the run's model and settings"
        )
    return scores, matched


def _metric_readout(choice: str, scored: set[str], available: set[str]) -> str | None:
    if choice == "auto":
        return "raw" if "raw" in available else next(iter(sorted(scored & available)), None)
    if choice == "same":
        return next(iter(sorted(scored & available)), None)
    return choice


@dataclass
class Runs:
    """Every run folder's frames, concatenated; ``model`` holds a label that is unique per (model, settings)."""

    scores: pd.DataFrame
    picks: pd.DataFrame | None = None
    metrics: pd.DataFrame | None = None
    correlation: pd.DataFrame | None = None
    folders: list[RunFolder] = field(default_factory=list)


def discover_runs(root: str | Path) -> list[Path]:
    """Run folders below ``root``: every folder holding a ``scores.csv`` (mteb's own JSON folders skipped)."""
    root = Path(root)
    found = {p.parent for p in root.rglob(SCORES_FILE) if MTEB_FOLDER not in p.relative_to(root).parts[:-1]}
    return sorted(found)


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
        for side_name, table in SIDE_TABLES.items():
            rows = _as_report_rows(side_name, folder.side_table(table.file))
            side = _side_rows(rows, str(part["model"].iloc[0]), alone)
            if side is not None:
                sides[side_name].append(side.assign(model=label))
    merged = pd.concat(scores, ignore_index=True)
    keys = [c for c in ("model", "task", "split", "subset", "layer") if c in merged.columns]
    merged = merged.drop_duplicates(keys, keep="last").reset_index(drop=True)
    merged_sides = {name: _merge_side(name, frames) for name, frames in sides.items()}
    return Runs(merged, **merged_sides, folders=folders)


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


def pythia_scores_path(path: str | Path | None = None) -> Path:
    """The authors' per-layer Pythia scores: ``path`` (the file or its folder), else :func:`release_folder`'s."""
    chosen = Path(path) if path else release_folder()
    file = chosen / PYTHIA_SCORES_FILE if chosen.is_dir() or not path else chosen
    if not file.is_file():
        raise UserError(
            f"the paper's Pythia scores not found at {str(file)!r}: pass --pythia-scores or set ${RELEASE_ENV} to the "
            "folder of the authors' release"
        )
    return file


def load_paper_scores(path: str | Path | None = None) -> pd.DataFrame:
    """The authors' per-layer scores as a scores-like frame (``model`` = "Pythia-410m (paper)"), read by
    :func:`~.importing.release_scores` (which drops the ``layer_24_last`` copy)."""
    file = pythia_scores_path(path)
    raw = pd.read_csv(file)
    missing = [c for c in ("model", "layer", "task", "main_score") if c not in raw.columns]
    if missing:
        raise UserError(f"{file} lacks columns {missing}: expected model, layer (layer_<k>), task, main_score")
    frame = release_scores(file)
    frame["model"] = frame["model"].astype(str).map(lambda m: f"{m.replace('/', '-')} (paper)")
    return frame[["model", "layer", "n_layers", "task", "main_score"]].reset_index(drop=True)
