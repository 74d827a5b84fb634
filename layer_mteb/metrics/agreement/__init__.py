"""Label-free per-layer curves that read a task's own pooled vectors: agreement with a reference sentence encoder
(:mod:`.measures`: mutual k-NN, linear CKA; :mod:`.reference`, :mod:`.lexical`), TwoNN intrinsic dimension and its
selectors (:mod:`.intrinsic_dimension`), computed for a scored run into ``agreement.csv`` (:mod:`.compute`).
The curves' parameters and their table are here, so reading the curves back loads no torch or model."""

from __future__ import annotations

from typing import TYPE_CHECKING, Literal, get_args

from layer_mteb.common.config import SETTINGS_COLUMNS
from layer_mteb.common.table import LAYER_COLUMNS, Table

if TYPE_CHECKING:
    import pandas as pd

Outlier = Literal["none", "standardize", "clamp"]
AgreementMetric = Literal["mknn", "cka"]
OUTLIERS: tuple[str, ...] = get_args(Outlier)
AGREEMENT_METRICS: tuple[str, ...] = get_args(AgreementMetric)
#: Huh et al.'s neighbourhood size
DEFAULT_K = 10

#: the ``metric`` of TwoNN intrinsic-dimension rows (:mod:`.intrinsic_dimension`)
ID_METRIC = "two_nn_id"
#: the ``reference`` of rows that read no reference
NO_REFERENCE = "-"
CURVE_KEY = ["task", "reference", "metric", "outlier", "n", "k", "seed"]
#: ``agreement.csv``: curves per layer and CURVE_KEY (+ settings); ``k`` is 0 and the ID's reference ``-`` where unused.
#: ``all_texts``: the sample is every text of the task, which has fewer than were asked for (stored at ``n`` = their
#: count), so a reader knows the curve answers any larger ``n`` without loading the task; False in older files
AGREEMENT_TABLE = Table(
    [*LAYER_COLUMNS, *CURVE_KEY[:2], "reference_revision", *CURVE_KEY[2:], "value", *SETTINGS_COLUMNS, "all_texts"],
    "compute the curves with layer_mteb.metrics.agreement.compute",
    ["model", *CURVE_KEY, "layer"],
    ["model", "revision", *CURVE_KEY, *SETTINGS_COLUMNS],
    file="agreement.csv",
    reading=(("keep_default_na", False), ("na_values", {"value": [""]})),
    added=(("all_texts", False),),
)
AGREEMENT_FILE, AGREEMENT_COLUMNS, tidy_agreement = AGREEMENT_TABLE.file, AGREEMENT_TABLE.columns, AGREEMENT_TABLE.tidy


def curves(frame: pd.DataFrame, **key: object) -> dict[str, pd.Series]:
    """task -> value per layer, for the ``agreement.csv`` rows whose columns equal ``key`` (e.g. ``metric="mknn",
    outlier="clamp", n=256, k=10, seed=0, reference=...``); a key that leaves several curves per task is an error."""
    rows = frame[(frame[list(key)] == list(key.values())).all(axis=1)]
    out: dict[str, pd.Series] = {}
    for task, part in rows.groupby("task", sort=True):
        if part["layer"].duplicated().any():
            raise ValueError(f"{task}: {key} leaves several curves; name more of {CURVE_KEY}")
        out[str(task)] = part.set_index("layer")["value"].sort_index()
    return out
