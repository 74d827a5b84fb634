"""A run's scores and metrics (read by :func:`~.runs.load_run`) as matching per-layer curves, shared by
selection and correlation."""

from __future__ import annotations

from typing import TYPE_CHECKING

from layer_mteb.common.errors import UserError
from layer_mteb.metrics import DIRECTIONS
from layer_mteb.metrics.texts import ENCODED_TEXTS, TASK_TEXTS, encoded_texts_label, task_texts_label

if TYPE_CHECKING:
    import pandas as pd

MEAN = "mean"  # the ``task`` value of rows about the score averaged over tasks


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
        raise UserError(
            f"metrics.csv has no {', '.join(missing)} rows; rerun `layer-mteb metrics --run RUN` (its default "
            "--views 4 measures InfoNCE, LiDAR and DiME too)"
        )
    chosen = metrics[metrics["metric"].isin(names)]
    table = chosen.pivot_table(index="layer", columns=["metric", "texts"], values="value", aggfunc="mean")
    return {key: table[key].dropna() for key in table.columns if key[0] in names}


def sources_for(task: str, texts: list[str]) -> list[str]:
    """Metric sources usable for ``task``: every general source, plus the task's own texts (its evaluation splits,
    ``task:<name>``, or every text mteb encodes for it, ``encoded:<name>``); another task's texts never."""
    own = (task_texts_label(task), encoded_texts_label(task))
    return [t for t in texts if not t.startswith((TASK_TEXTS, ENCODED_TEXTS)) or (task != MEAN and t in own)]
