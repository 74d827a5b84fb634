"""EncodeConfig.from_key: the settings a table row names, read back into the config that wrote them."""

from __future__ import annotations

import io

import pandas as pd
import pytest

from layer_mteb.common.config import (
    ATTENTIONS,
    DTYPES,
    POOLINGS,
    READOUTS,
    SETTINGS_COLUMNS,
    EncodeConfig,
)

EVERY_VALUE = [
    *({"readout": v} for v in READOUTS),
    *({"pooling": v} for v in POOLINGS),
    *({"dtype": v} for v in DTYPES),
    *({"attention": v} for v in (*ATTENTIONS, None)),
    *({"normalize": v} for v in (True, False)),
    *({"max_length": v} for v in (1, 256, 8192)),
]


def _through_csv(rows: list[dict]) -> pd.DataFrame:
    """Rows as ``scores.csv`` holds them once read back: numpy numbers, booleans, empty cells."""
    buffer = io.StringIO()
    pd.DataFrame(rows).to_csv(buffer, index=False)
    buffer.seek(0)
    return pd.read_csv(buffer)


@pytest.mark.parametrize("setting", EVERY_VALUE, ids=lambda s: "=".join(map(str, *s.items())))
def test_every_setting_survives_a_table_row(setting):
    config = EncodeConfig(**setting)
    assert EncodeConfig.from_key(config.key()) == config
    row = _through_csv([{"model": "m", "layer": 3, **config.key()}]).iloc[0]
    assert EncodeConfig.from_key(row) == config


def test_all_settings_at_once_and_placement_added():
    config = EncodeConfig(readout="raw", pooling="last", max_length=77, dtype="bfloat16", attention="causal")
    config = EncodeConfig(**{**config.key(), "normalize": True})
    row = _through_csv([config.key()]).iloc[0]
    assert set(config.key()) == set(SETTINGS_COLUMNS)
    assert EncodeConfig.from_key(row, batch_size=4) == EncodeConfig(**config.key(), batch_size=4)


def test_an_empty_attention_cell_is_the_models_own_and_missing_columns_keep_their_defaults():
    row = _through_csv([{"readout": "raw", "attention": None, "normalize": False}]).iloc[0]
    assert EncodeConfig.from_key(row) == EncodeConfig(readout="raw", attention=None, normalize=False)
    assert EncodeConfig.from_key({}) == EncodeConfig()
