"""The stress summary counts what the tables say: trends per layer, the minimum, the most bimodal layer, and where
each prompt length's curve is lowest (on the authors' released Pythia-410m values)."""

from __future__ import annotations

import pandas as pd
from conftest import SHARED_REFERENCE, unavailable

from layer_mteb.analysis.report.stress_report import length_minima, model_summary, stress_markdown
from layer_mteb.metrics.bimodality import DIP_COLUMNS, STRESS_COLUMNS

#: (test, level, normalisation) -> mean per layer 0, 1, 2
MEANS = {
    ("randomness", 0.0, "maxEntropy"): [0.9, 0.5, 0.7],
    ("randomness", 1.0, "maxEntropy"): [0.95, 0.8, 0.6],
    ("repetition", 0.0, "maxEntropy"): [0.9, 0.5, 0.7],
    ("repetition", 0.9, "maxEntropy"): [0.5, 0.4, 0.8],
    ("length", 64.0, "raw"): [3.0, 2.0, 2.5],
    ("length", 128.0, "raw"): [4.0, 3.0, 2.0],
}


def _values() -> pd.DataFrame:
    rows = [
        {"model": "m", "test": test, "level": level, "prompt": prompt, "layer": layer, "normalization": norm}
        | {"value": mean + offset, "texts": "wikitext", "readout": "raw"}
        for (test, level, norm), means in MEANS.items()
        for layer, mean in enumerate(means)
        for prompt, offset in enumerate((-0.125, 0.125))
    ]
    return pd.DataFrame(rows)[STRESS_COLUMNS]


def _dips() -> pd.DataFrame:
    plain = [("none", 0.0, layer, dip, p) for layer, dip, p in ((0, 0.02, 0.9), (1, 0.09, 0.01), (2, 0.05, 0.5))]
    stressed = [("randomness", 1.0, layer, 0.05, p) for layer, p in ((0, 0.01), (1, 0.2), (2, 0.03))]
    stressed += [("repetition", 0.0, layer, dip, p) for _, _, layer, dip, p in plain]  # unperturbed: not counted
    rows = [
        {"model": "m", "texts": "wikitext", "test": t, "level": lv, "layer": ly, "dip": d, "p_value": p, "n": 2}
        | {"readout": "raw"}
        for t, lv, ly, d, p in plain + stressed
    ]
    return pd.DataFrame(rows)[DIP_COLUMNS]


def test_model_summary_counts_layers_per_trend_and_finds_minimum_and_dip():
    row = model_summary(_values(), _dips()).iloc[0]
    assert (row["randomness"], row["repetition"], row["length"]) == ("2/3", "2/3", "2/3")
    assert (row["min_layer"], row["min_depth"], row["min_value"]) == (1, 0.5, 0.5)
    assert (row["dip_layer"], row["dip"], row["dip_p"], row["bimodal_levels"]) == (1, 0.09, 0.01, "2/3")


def test_length_minima_of_the_release_pythia_curves():
    from layer_mteb.paper.prompt_length import RELEASE_FILE, release_curves

    reference = SHARED_REFERENCE
    if not (reference / RELEASE_FILE).is_file():
        unavailable(f"{RELEASE_FILE} not found in {reference}")
    minima = length_minima(release_curves(reference)).set_index("prompt_length")
    assert minima.loc[64, "min_layer"] == 12 and minima.loc[64, "min_depth"] == 0.5  # SOURCE.md: layer 12 lowest
    assert (minima.loc[[128, 256, 512, 1024, 2048], "min_layer"] == 21).all()
    assert (minima["drop"] > 0).all() and (minima["layers"] == 24).all()
    markdown = stress_markdown(model_summary(_values(), _dips()), minima.reset_index())
    assert "| m | raw | 2 | 2/3 | 2/3 | 2/3 | 1 | 0.50 | 0.500 | 1 | 0.090 | 0.01 | 2 | 2/3 |" in markdown
    assert "| Pythia/410m | 64 | 12 | 0.50 |" in markdown
