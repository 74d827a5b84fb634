"""Reading a run folder's scores and metrics as matching per-layer curves, shared by selection and correlation."""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from layer_mteb.config import SETTINGS_COLUMNS
from layer_mteb.errors import UserError
from layer_mteb.metrics import DIRECTIONS
from layer_mteb.metrics.table import read_metrics
from layer_mteb.results import SCORES_FILE, read_scores

MEAN = "mean"  # the ``task`` value of rows about the score averaged over tasks


#: ``auto``: the paper's protocol (metrics of the raw residual stream choosing among the scored readout) for every text
#: source that has raw metrics, else metrics of the scored readout itself.
METRIC_READOUTS = ("auto", "raw", "final_norm", "same")


def load_run(
    run: str | Path | None,
    scores: pd.DataFrame | None,
    metrics: pd.DataFrame | None,
    metric_readout: str = "auto",
) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Scores and metrics from ``run`` (unless given as frames), metrics restricted to the scores' settings.

    The metrics' readout may differ from the scores' (``metric_readout``; see :data:`METRIC_READOUTS`): the paper
    scored every layer with the final norm on top but measured its metrics on the raw stream of one forward pass.
    The returned metrics keep their own ``readout`` column, so what was paired can be recorded.
    """
    if metric_readout not in METRIC_READOUTS:
        raise UserError(f"--metric-readout must be one of {', '.join(METRIC_READOUTS)}; got {metric_readout!r}")
    if scores is None or metrics is None:
        if run is None:
            raise UserError("give a run folder (--run) or both scores and metrics tables")
        if scores is None:
            if not (Path(run) / SCORES_FILE).is_file():
                raise UserError(f"no {SCORES_FILE} in {run}: run `layer-mteb run --output {run}` first")
            scores = read_scores(run)
        if metrics is None:
            metrics = read_metrics(run)
    if scores.empty:
        raise UserError("the scores table is empty")
    settings = [c for c in SETTINGS_COLUMNS if c in scores.columns and c in metrics.columns and c != "readout"]
    used = scores[["model", *settings, "readout"]].drop_duplicates()
    matched = metrics.merge(used[["model", *settings]].drop_duplicates(), on=["model", *settings])
    parts = []
    for (model, _texts), part in matched.groupby(["model", "texts"], sort=False):
        scored = set(used.loc[used["model"] == model, "readout"])
        wanted = _metric_readout(metric_readout, scored, set(part["readout"]))
        parts.append(part[part["readout"] == wanted])
    matched = pd.concat(parts) if parts else matched
    if matched.empty:
        described = ", ".join(f"{c}={used[c].iloc[0]}" for c in [*settings, "readout"])
        raise UserError(
            f"metrics.csv has no rows for the scored model and settings ({used['model'].iloc[0]}, {described}); "
            "rerun `layer-mteb metrics` with the same --model, --pooling, --max-length and --dtype"
        )
    return scores, matched


def _metric_readout(choice: str, scored: set[str], available: set[str]) -> str | None:
    if choice == "auto":
        return "raw" if "raw" in available else next(iter(sorted(scored & available)), None)
    if choice == "same":
        return next(iter(sorted(scored & available)), None)
    return choice


def score_curves(scores: pd.DataFrame) -> dict[str, pd.Series]:
    """task -> main score per layer (mean over splits and subsets), plus :data:`MEAN` over tasks.

    The mean uses only layers scored for every task, so it never averages different task sets.
    """
    table = scores.pivot_table(index="layer", columns="task", values="main_score", aggfunc="mean")
    curves = {task: table[task].dropna() for task in table.columns}
    complete = table.dropna()
    if not complete.empty:
        curves[MEAN] = complete.mean(axis=1)
    return curves


def metric_curves(metrics: pd.DataFrame, by: list[str] | None = None) -> dict[tuple[str, str], pd.Series]:
    """(metric, texts) -> value per layer, for the metrics in ``by`` (default: all known ones present)."""
    names = by or [m for m in DIRECTIONS if m in set(metrics["metric"])]
    unknown = [m for m in names if m not in DIRECTIONS]
    if unknown:
        raise UserError(f"unknown metric(s) {', '.join(unknown)}; known: {', '.join(DIRECTIONS)}")
    missing = [m for m in names if m not in set(metrics["metric"])]
    if missing:
        raise UserError(f"metrics.csv has no {', '.join(missing)} rows; rerun `layer-mteb metrics` (with --views)")
    chosen = metrics[metrics["metric"].isin(names)]
    table = chosen.pivot_table(index="layer", columns=["metric", "texts"], values="value", aggfunc="mean")
    return {key: table[key].dropna() for key in table.columns if key[0] in names}


def sources_for(task: str, texts: list[str]) -> list[str]:
    """Metric sources usable for ``task``: every general source, plus the task's own texts."""
    return [t for t in texts if not t.startswith("task:") or (task != MEAN and t == f"task:{task}")]
