"""``metrics.csv``: one row per (model, text source, layer, metric), next to ``scores.csv`` in a run folder.

Columns: ``model``, ``revision``, ``layer`` (hidden-state index, 0 = embeddings), ``n_layers``, ``relative_depth``,
``texts`` (``wikitext``, ``task:<TaskName>`` = its evaluation-split texts, ``encoded:<TaskName>`` = every text its
evaluator encodes, ``file:<name>`` or ``custom``; see :mod:`.texts`), ``task`` (the task for ``task:`` and
``encoded:`` sources, else empty), ``metric`` (a key of :data:`layer_mteb.metrics.DIRECTIONS`), ``value``, ``n``
(prompts or texts the value is over: short prompts drop out of token metrics), and the encode settings
``readout``, ``pooling``, ``max_length``, ``dtype``, ``attention``, ``normalize`` (selection and correlation only use
rows whose settings match the scores).

Running ``metrics`` again for another text source adds its rows; rerunning a source with the same encode settings
replaces that source's rows, so a run folder can hold WikiText metrics and each task's own-text metrics together
(``task:`` and ``encoded:`` rows of one task are different sources: neither replaces the other).
"""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from layer_mteb.common.config import SETTINGS_COLUMNS
from layer_mteb.common.errors import UserError
from layer_mteb.common.files import atomic_write
from layer_mteb.common.results import LAYER_COLUMNS, with_legacy_settings
from layer_mteb.common.run_files import METRICS_FILE

METRIC_COLUMNS = [*LAYER_COLUMNS, "texts", "task", "metric", "value", "n", *SETTINGS_COLUMNS]
#: Rows with equal values here come from the same computation and are replaced together.
_SOURCE_KEY = ["model", "revision", "texts", *SETTINGS_COLUMNS]


def tidy_metrics(rows: list[dict]) -> pd.DataFrame:
    """Metric rows -> the ``metrics.csv`` frame: its columns in order, rows sorted so reruns write identical files."""
    frame = pd.DataFrame(rows, columns=METRIC_COLUMNS)
    return frame.sort_values(["model", "texts", "metric", "layer"], kind="stable").reset_index(drop=True)


def write_metrics(frame: pd.DataFrame, run_dir: str | Path) -> Path:
    """Merge ``frame`` into ``run_dir/metrics.csv`` atomically (same source and settings: replaced)."""
    path = Path(run_dir) / METRICS_FILE
    if path.exists():
        old = read_metrics(run_dir)
        keys = frame[_SOURCE_KEY].drop_duplicates()
        stale = old[_SOURCE_KEY].astype(str).apply(tuple, axis=1).isin(set(keys.astype(str).apply(tuple, axis=1)))
        frame = pd.concat([old[~stale], frame], ignore_index=True)
    frame = tidy_metrics(frame.to_dict("records"))
    atomic_write(path, lambda tmp: frame.to_csv(tmp, index=False))
    return path


def read_metrics(run_dir: str | Path) -> pd.DataFrame:
    path = Path(run_dir) / METRICS_FILE
    if not path.is_file():
        raise UserError(f"no {METRICS_FILE} in {run_dir}: run `layer-mteb metrics --run {run_dir}` first")
    frame = with_legacy_settings(pd.read_csv(path))
    missing = set(METRIC_COLUMNS) - set(frame.columns)
    if missing:
        raise UserError(
            f"{path} is missing column(s) {sorted(missing)}; recompute it with `layer-mteb metrics --run {run_dir}`"
        )
    return frame
