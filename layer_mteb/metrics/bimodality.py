"""Bimodality of per-prompt entropy (the paper's Figure 4): Hartigan's dip test, per layer, with the ``diptest``
package the authors used. A statistic of entropies already measured (``stress.csv``), not a measurement: the stress
tests (:mod:`.stress_tests`) run the model, this reads their numbers. The dip is the largest distance between the
sample's distribution function and the closest unimodal one (0 … 0.25); its p-value interpolates the tabulated null
distribution of a uniform sample.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from layer_mteb.common.errors import UserError
from layer_mteb.common.table import Table

#: ``stress.csv[.gz]``: per-prompt entropy of the stress tests (:mod:`.stress_tests`), the sample tested here, and
#: ``dip.csv``, the dip per layer; keyed by one stress run's (model, readout, test, texts), its rows' first order
_STRESS = ["model", "readout", "test", "texts", "level"]
STRESS_TABLE = Table(
    ["model", "test", "level", "prompt", "layer", "normalization", "value", "texts", "readout"],
    "run `layer-mteb stress --run {folder}`",
    [*_STRESS, "normalization", "layer", "prompt"],
    _STRESS[:4],
    file="stress.csv",
)
DIPS_TABLE = Table(
    ["model", "texts", "test", "level", "layer", "dip", "p_value", "n", "readout"],
    STRESS_TABLE.fix,
    [*_STRESS, "layer"],
    _STRESS[:4],
    file="dip.csv",
)
STRESS_COLUMNS, DIP_COLUMNS = STRESS_TABLE.columns, DIPS_TABLE.columns

#: the per-prompt normalisation the dip test reads: ÷ min(log N, log D), the paper's prompt entropy
DIP_NORMALIZATION = "maxEntropy"
#: the smallest sample the dip test is run on (its tables start at n = 4)
MIN_SAMPLE = 4


def dip_test(values: np.ndarray) -> tuple[float, float]:
    """(dip statistic, p-value) of a sample; a constant sample is perfectly unimodal (dip 0, p 1)."""
    try:
        import diptest
    except ImportError:
        raise UserError("the dip test needs the diptest package: pip install 'layer_mteb[metrics]'") from None
    x = np.asarray(values, dtype=np.float64)
    if len(x) < MIN_SAMPLE:
        raise ValueError(f"the dip test needs at least {MIN_SAMPLE} values, got {len(x)}")
    if np.ptp(x) == 0:
        return 0.0, 1.0
    dip, p_value = diptest.diptest(x)
    return float(dip), float(p_value)


def dip_table(values: pd.DataFrame) -> pd.DataFrame:
    """One dip test per (model, texts, readout, test, level, layer) of a ``stress.csv`` frame, on the
    :data:`DIP_NORMALIZATION` values; groups under :data:`MIN_SAMPLE` prompts are left out."""
    chosen = values[values["normalization"] == DIP_NORMALIZATION]
    keys = ["model", "texts", "readout", "test", "level", "layer"]
    rows = []
    for key, group in chosen.groupby(keys, sort=True):
        if len(group) < MIN_SAMPLE:
            continue
        dip, p_value = dip_test(group["value"].to_numpy())
        rows.append({**dict(zip(keys, key, strict=True)), "dip": dip, "p_value": p_value, "n": len(group)})
    return pd.DataFrame(rows, columns=DIP_COLUMNS)


def stress_tables(values: pd.DataFrame) -> list[tuple[Table, pd.DataFrame]]:
    """The tables a stress run's ``stress.csv`` values give, written beside them (a table added here is written
    too): ``dip.csv``, with the unperturbed prompts' dips (level 0 of randomness and repetition) once as test
    ``none``."""
    dips = dip_table(values)
    plain = dips[(dips["level"] == 0) & dips["test"].isin(["randomness", "repetition"])]
    plain = plain.drop_duplicates(["model", "texts", "readout", "layer"]).assign(test="none")
    return [(DIPS_TABLE, pd.concat([plain, dips], ignore_index=True) if not plain.empty else dips)]


def most_bimodal_layer(dips: pd.DataFrame) -> int:
    """The layer of largest dip (ties: the shallower layer) of one (model, test, level)'s rows."""
    if dips.empty:
        raise ValueError("no dip rows to choose a layer from")
    ordered = dips.sort_values(["dip", "layer"], ascending=[False, True], kind="stable")
    return int(ordered["layer"].iloc[0])
