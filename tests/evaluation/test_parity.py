"""The last layer of the packaged all-MiniLM-L6-v2 reproduces the public MTEB leaderboard score."""

from __future__ import annotations

import pytest

from layer_mteb.common.config import EncodeConfig
from layer_mteb.evaluation.sweep import sweep

LEADERBOARD_STSBENCHMARK = 0.82032  # MTEB leaderboard, all-MiniLM-L6-v2, STSBenchmark test, cosine Spearman


def test_minilm_last_layer_matches_the_leaderboard_on_stsbenchmark(data_dir):
    config = EncodeConfig(max_length=256, batch_size=64, readout="final_norm", pooling="mean")
    frame = sweep("minilm-l6", ["STSBenchmark"], layers="-1", config=config, data_dir=data_dir, progress=False)
    (score,) = frame["main_score"]
    assert score == pytest.approx(LEADERBOARD_STSBENCHMARK, abs=0.005)
    assert frame["model"].item() == "sentence-transformers/all-MiniLM-L6-v2"
