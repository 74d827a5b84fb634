"""Run folders for analysis: one run's scores with the metrics matching its settings (:func:`load_run`), the run
folders below a root, and the authors' published per-layer scores."""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from layer_mteb.analysis.runs.importing import release_scores
from layer_mteb.analysis.runs.release_layout import PYTHIA_SCORES_FILE, RELEASE_ENV, release_folder
from layer_mteb.common.config import ARITHMETICS, METRIC_SETTINGS, SETTINGS_COLUMNS
from layer_mteb.common.errors import UserError
from layer_mteb.common.run_folder import MTEB_FOLDER, SCORES_FILE, RunFolder
from layer_mteb.common.scores import one_setting_per_model
from layer_mteb.metrics import METRIC_READOUTS


def load_run(
    folder: str | Path | RunFolder | None,
    scores: pd.DataFrame | None,
    metrics: pd.DataFrame | None,
    metric_readout: str = "auto",
    arithmetic: str | None = None,
) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Scores and metrics (as the run ``folder`` holds them, which the messages name), metrics restricted to the
    scores' settings. Their readout may differ (``metric_readout``): the paper scored with the final norm but
    measured metrics on the raw stream. The metrics are those of one ``arithmetic`` (:func:`one_arithmetic`), never
    two averaged."""
    if metric_readout not in METRIC_READOUTS:
        raise UserError(f"--metric-readout must be one of {', '.join(METRIC_READOUTS)}; got {metric_readout!r}")
    if scores is None or metrics is None:
        raise UserError("give a run folder (--run) or both scores and metrics tables")
    if scores.empty:
        raise UserError("the scores table is empty")
    metrics = one_arithmetic(metrics, arithmetic, folder)
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


def one_arithmetic(metrics: pd.DataFrame, arithmetic: str | None, folder: object = None) -> pd.DataFrame:
    """The metrics of one arithmetic: ``arithmetic`` where given, else the one the table holds (the paper's where it
    holds both); a table without the column (made before it existed, or by hand) is the paper's."""
    default = next(s.default for s in METRIC_SETTINGS if s.name == "arithmetic")
    if "arithmetic" not in metrics.columns:
        metrics = metrics.assign(arithmetic=default)
    if arithmetic is not None and arithmetic not in ARITHMETICS:
        raise UserError(f"--arithmetic must be one of {', '.join(ARITHMETICS)}; got {arithmetic!r}")
    held = set(metrics["arithmetic"].astype(str))
    chosen = arithmetic or (next(iter(held)) if len(held) == 1 else default)
    if held and chosen not in held:
        raise UserError(
            f"metrics.csv has no metrics under the {chosen} arithmetic (it holds {', '.join(sorted(held))}); run "
            f"`layer-mteb metrics --run {folder or 'RUN'} --arithmetic {chosen}`"
        )
    return metrics[metrics["arithmetic"].astype(str) == chosen]


def _metric_readout(choice: str, scored: set[str], available: set[str]) -> str | None:
    """The readout whose metrics pair with the scores: ``same`` the scores' own, ``auto`` raw where measured."""
    same = min(scored & available, default=None)
    if choice == "auto":
        return "raw" if "raw" in available else same
    return same if choice == "same" else choice


def discover_runs(root: str | Path) -> list[Path]:
    """Run folders below ``root``: every folder holding a ``scores.csv`` (mteb's own JSON folders skipped)."""
    root = Path(root)
    found = {p.parent for p in root.rglob(SCORES_FILE) if MTEB_FOLDER not in p.relative_to(root).parts[:-1]}
    return sorted(found)


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
