"""Stress tests and bimodality on tiny real models: what maths gives exactly (identical tokens reach the minimum,
normalised values in [0, 1], p = 0 equals ``metrics``), the dip test on known samples, and seeded determinism."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from _metric_fixtures import TEXTS, tiny_gpt2, word_tokenizer
from conftest import tiny_config

from layer_mteb.common.config import EncodeConfig
from layer_mteb.metrics.bimodality import dip_test
from layer_mteb.metrics.metric_settings import MetricSettings
from layer_mteb.metrics.runner import compute_metrics
from layer_mteb.metrics.stress_tests import (
    FIRST_RANDOM_ID,
    StressSettings,
    perturb,
    random_prompts,
    run_stress,
    special_ends,
)

CONFIG = EncodeConfig(device="cpu")
LONG = [t for t in TEXTS if len(t.split()) > 4]


def _tiny_llama_words():
    """A 2-block Llama (rotary positions: none at the embedding layer) whose tokenizer adds no special tokens."""
    from transformers import LlamaModel

    from layer_mteb.model.architectures import wrap_model

    tokenizer = word_tokenizer()
    torch.manual_seed(0)
    config = tiny_config("llama", len(tokenizer))  # the suite's tiny Llama, with this tokenizer's special ids
    config.update({"bos_token_id": 1, "eos_token_id": 1, "pad_token_id": 1})
    return wrap_model(LlamaModel(config), tokenizer, name="test/tiny-llama")


def _settings(**kwargs) -> StressSettings:
    base = {"n_prompts": 4, "length_prompts": 4, "randomness": (0.0, 0.5, 1.0), "repetition": (0.0, 0.5)}
    return StressSettings(**{**base, "lengths": (8, 16), **kwargs})


def _file(tmp_path, lines):
    path = tmp_path / "prompts.txt"
    path.write_text("\n".join(lines))
    return str(path)


def test_identical_tokens_give_the_minimum_entropy_not_nan(tmp_path):
    model = _tiny_llama_words()
    settings = _settings(tests=("repetition",), repetition=(0.0, 1.0))
    values, _ = run_stress(model, _file(tmp_path, LONG), config=CONFIG, settings=settings, progress=False)
    assert values["value"].notna().all()
    embedding = values[(values["level"] == 1.0) & (values["layer"] == 0)]
    assert len(embedding) == 4 * len(LONG) and (embedding["value"] == 0).all()
    untouched = values[(values["level"] == 0.0) & (values["layer"] == 0)]
    assert (untouched["value"] > 0).all()


def test_normalised_values_stay_in_the_unit_interval(tmp_path):
    values, _ = run_stress(tiny_gpt2(), _file(tmp_path, LONG), config=CONFIG, settings=_settings(), progress=False)
    normalised = values[values["normalization"] != "raw"]["value"]
    assert normalised.between(0, 1).all() and normalised.notna().all()
    assert set(values["test"]) == {"randomness", "repetition", "length"}


def test_level_zero_equals_plain_metrics_on_the_same_prompts(tmp_path):
    texts = _file(tmp_path, LONG)
    values, _ = run_stress(tiny_gpt2(), texts, config=CONFIG, settings=_settings(tests=("randomness",)), progress=False)
    plain = compute_metrics(tiny_gpt2(), texts, config=CONFIG, settings=MetricSettings(views=0), progress=False)
    for metric, normalization in (("prompt_entropy", "maxEntropy"), ("prompt_entropy_raw", "raw")):
        ours = values[(values["level"] == 0) & (values["normalization"] == normalization)]
        expected = plain[plain["metric"] == metric].set_index("layer")["value"]
        np.testing.assert_allclose(ours.groupby("layer")["value"].mean(), expected.sort_index(), rtol=1e-12)


def test_same_seed_same_stress_csv(tmp_path):
    texts = _file(tmp_path, LONG)
    files = []
    for name, seed in (("a", 0), ("b", 0), ("c", 1)):
        run_stress(tiny_gpt2(), texts, config=CONFIG, settings=_settings(seed=seed), output=tmp_path / name)
        files.append((tmp_path / name / "stress.csv").read_bytes())
    assert files[0] == files[1] and files[0] != files[2]


def test_perturbations_keep_special_ends_and_nest_across_levels():
    tokenizer = tiny_gpt2().tokenizer
    ends = special_ends(tokenizer)
    assert ends == ([tokenizer.cls_token_id], [tokenizer.sep_token_id])
    ids = np.asarray(tokenizer(LONG[0])["input_ids"])
    kwargs = {"prompt": 3, "seed": 0, "vocab": len(tokenizer), "ends": ends}
    low, high = perturb(ids, "randomness", 0.3, **kwargs), perturb(ids, "randomness", 0.8, **kwargs)
    assert low[0] == ids[0] and low[-1] == ids[-1] and len(low) == len(ids)
    changed_low, changed_high = low != ids, high != ids
    assert not (changed_low & ~changed_high).any()  # nested: what p = 0.3 replaced, p = 0.8 replaced too
    assert (perturb(ids, "repetition", 0.0, **kwargs) == ids).all()
    prompts = random_prompts(5, 16, seed=0, vocab=len(tokenizer), ends=ends)
    assert all(len(p) == 16 and p[0] == ends[0][0] and p[-1] == ends[1][0] for p in prompts)
    assert min(int(p[1:-1].min()) for p in prompts) >= FIRST_RANDOM_ID


def test_dip_test_finds_a_known_bimodal_sample_and_not_a_unimodal_one():
    rng = np.random.default_rng(0)
    bimodal = np.concatenate([rng.normal(-3, 1, 500), rng.normal(3, 1, 500)])
    unimodal = rng.normal(0, 1, 1000)
    dip_b, p_b = dip_test(bimodal)
    dip_u, p_u = dip_test(unimodal)
    assert p_b < 0.01 < 0.1 < p_u and dip_b > dip_u
    assert dip_test(np.ones(10)) == (0.0, 1.0)


def test_bad_settings_are_one_user_error():
    from layer_mteb.common.errors import UserError

    with pytest.raises(UserError, match="--tests"):
        StressSettings(tests=("loudness",))
    with pytest.raises(UserError, match="randomness"):
        StressSettings(randomness=(1.5,))


def test_regenerated_pythia_length_curve_equals_the_release_means(tmp_path):
    import pandas as pd
    from conftest import SHARED_REFERENCE, unavailable

    from layer_mteb.paper.prompt_length import RELEASE_FILE, reproduce

    reference = SHARED_REFERENCE
    if not (reference / RELEASE_FILE).is_file():
        unavailable(f"{RELEASE_FILE} not found in {reference}")
    run = tmp_path / "run"
    settings = _settings(tests=("length", "randomness"))
    run_stress(tiny_gpt2(), _file(tmp_path, LONG), config=CONFIG, settings=settings, output=run, progress=False)
    written = reproduce(reference, [run], tmp_path / "paper")
    curves = pd.read_csv(tmp_path / "paper" / "prompt_length.csv")
    release = pd.read_csv(reference / RELEASE_FILE)
    expected = release.groupby(["prompt_length", "layer", "normalization"])["value"].mean()
    ours = curves[curves["model"] == "Pythia/410m"].set_index(["prompt_length", "layer", "normalization"])["mean"]
    assert len(ours) == len(expected) == 6 * 25 * 2
    np.testing.assert_allclose(ours.sort_index(), expected.sort_index(), atol=1e-6, rtol=0)
    assert set(curves["model"]) == {"Pythia/410m", "test/tiny"}
    names = {p.name for p in written}
    assert {"prompt_length.png", "stress_test_tiny.png", "bimodality_test_tiny.pdf", "stress.md"} <= names
    assert "| test/tiny | final_norm |" in (tmp_path / "paper" / "stress.md").read_text()
