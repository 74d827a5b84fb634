"""``agreement.csv``: the per-layer agreement and intrinsic-dimension curves of a run, next to its ``scores.csv``, so
that a pick made from them can be reproduced and a reader sees how peaked each curve was.

Columns: the layer columns (``model``, ``revision``, ``layer``, ``n_layers``, ``relative_depth``), ``task`` (whose
evaluation texts were sampled: the label-free ``task:<Task>`` texts), ``reference`` and ``reference_revision``
(``-`` for the intrinsic dimension, which reads no reference), ``metric`` (``mknn``, ``cka`` or :data:`ID_METRIC`),
``outlier`` (``none``, ``standardize``, ``clamp``; ``none`` for the ID), ``n`` (texts: the first ``n`` of the seeded
sample, fewer when the task has fewer), ``k`` (neighbours of mutual k-NN; 0 where no k applies), ``seed``, ``value``,
then the encode settings the vectors were made with.

Writing rows of a (task, reference, metric, outlier, n, k, seed, settings) replaces the old rows with that key; every
other row stays.
"""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from layer_mteb.common.config import SETTINGS_COLUMNS
from layer_mteb.common.errors import UserError
from layer_mteb.common.files import atomic_write
from layer_mteb.common.results import LAYER_COLUMNS

AGREEMENT_FILE = "agreement.csv"
#: the ``metric`` of TwoNN intrinsic-dimension rows
ID_METRIC = "two_nn_id"
#: the ``reference`` of rows that read no reference
NO_REFERENCE = "-"
CURVE_KEY = ["task", "reference", "metric", "outlier", "n", "k", "seed"]
AGREEMENT_COLUMNS = [*LAYER_COLUMNS, "task", "reference", "reference_revision", *CURVE_KEY[2:], "value"]
AGREEMENT_COLUMNS += list(SETTINGS_COLUMNS)
_REPLACE_KEY = ["model", "revision", *CURVE_KEY, *SETTINGS_COLUMNS]


def tidy_agreement(rows: list[dict] | pd.DataFrame) -> pd.DataFrame:
    """Rows -> the ``agreement.csv`` frame: its columns in order, sorted so that rewriting gives the same file."""
    frame = pd.DataFrame(rows, columns=AGREEMENT_COLUMNS)
    order = ["model", "task", "reference", "metric", "outlier", "n", "k", "seed", "layer"]
    return frame.sort_values(order, kind="stable").reset_index(drop=True)


def write_agreement(frame: pd.DataFrame, run_dir: str | Path) -> Path:
    """Merge ``frame`` into ``run_dir/agreement.csv`` atomically: its curves replace stored ones with their key."""
    path = Path(run_dir) / AGREEMENT_FILE
    if path.is_file():
        old = read_agreement(run_dir)
        new_keys = set(frame[_REPLACE_KEY].astype(str).apply(tuple, axis=1))
        stale = old[_REPLACE_KEY].astype(str).apply(tuple, axis=1).isin(new_keys)
        frame = pd.concat([old[~stale], frame], ignore_index=True)
    frame = tidy_agreement(frame)
    # 8 significant digits keep distinct values distinct (mutual k-NN moves in steps of 1 / (n k) >= 1e-5)
    atomic_write(path, lambda tmp: frame.to_csv(tmp, index=False, float_format="%.8g"))
    return path


def read_agreement(run_dir: str | Path) -> pd.DataFrame:
    """A run's ``agreement.csv`` (one :class:`UserError` line when there is none or it lacks columns)."""
    path = Path(run_dir) / AGREEMENT_FILE
    if not path.is_file():
        raise UserError(f"no {AGREEMENT_FILE} in {run_dir}: compute the curves with layer_mteb.metrics.agreement.run")
    frame = pd.read_csv(path, keep_default_na=False, na_values={"value": [""]})
    missing = set(AGREEMENT_COLUMNS) - set(frame.columns)
    if missing:
        raise UserError(f"{path} is missing column(s) {sorted(missing)}; compute its curves again")
    return frame


def curves(frame: pd.DataFrame, **key: object) -> dict[str, pd.Series]:
    """task -> value per layer, for the rows whose columns equal ``key`` (e.g. ``metric="mknn", outlier="clamp",
    n=256, k=10, seed=0, reference=...``); a key that leaves several curves per task is an error."""
    rows = frame
    for column, value in key.items():
        rows = rows[rows[column] == value]
    out: dict[str, pd.Series] = {}
    for task, part in rows.groupby("task", sort=True):
        if part["layer"].duplicated().any():
            raise ValueError(f"{task}: {key} leaves several curves; name more of {CURVE_KEY}")
        out[str(task)] = part.set_index("layer")["value"].sort_index()
    return out
