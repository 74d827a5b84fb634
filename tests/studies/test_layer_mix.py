"""scripts/layer_mix.py's LayerMixEncoder: a combination of one layer is that layer; a window is the mean of its cached
vectors; mteb keeps combinations and single layers apart."""

from __future__ import annotations

import numpy as np
import pytest
from conftest import script_module

from layer_mteb import LayerEncoder
from layer_mteb.common.config import EncodeConfig
from layer_mteb.evaluation.encoder import resolve_settings
from layer_mteb.evaluation.mteb_call import texts_mteb_encodes
from layer_mteb.tasks.catalog import TaskSpec, load_task
from layer_mteb.vectors.store import LayerCache

LayerMixEncoder = script_module("layer_mix").LayerMixEncoder


@pytest.fixture(scope="module")
def biosses(tiny_gpt_neox, data_dir):
    task = load_task(TaskSpec("BIOSSES"), "test", data_dir)
    task.load_data()
    settings = resolve_settings(tiny_gpt_neox, EncodeConfig(batch_size=32))
    cache = LayerCache(tiny_gpt_neox, settings.encode)
    texts = texts_mteb_encodes(task)
    cache.fill(texts)
    return cache, settings, texts


def encode(encoder, texts):
    return encoder.encode([{"text": texts}], task_metadata=None, hf_split="test", hf_subset="default")


def test_one_layer_mix_is_that_layer(biosses):
    cache, settings, texts = biosses
    for layer in range(cache.model.n_layers + 1):
        mixed = encode(LayerMixEncoder(cache, [layer], settings=settings), texts)
        single = encode(LayerEncoder(cache, layer, settings=settings), texts)
        assert mixed.dtype == single.dtype == np.float32
        np.testing.assert_array_equal(mixed, single)


def test_window_is_the_mean_of_the_cached_vectors(biosses):
    cache, settings, texts = biosses
    layers = [0, 1, 2]
    stacked = np.stack([cache.layer_rows(texts, layer) for layer in layers])
    mixed = encode(LayerMixEncoder(cache, layers, settings=settings), texts)
    np.testing.assert_allclose(mixed, stacked.mean(axis=0), rtol=1e-6, atol=1e-7)
    assert not np.allclose(mixed, stacked[1])  # a mean, not the centre layer


def test_meta_names_the_layers(biosses):
    cache, settings, _ = biosses
    single = LayerEncoder(cache, 2, settings=settings).mteb_model_meta
    alone = LayerMixEncoder(cache, [2], settings=settings).mteb_model_meta
    window = LayerMixEncoder(cache, [2, 0, 1], settings=settings).mteb_model_meta
    assert window.experiment_kwargs["layers"] == [0, 1, 2] and "layer" not in window.experiment_kwargs
    assert len({single, alone, window}) == 3  # mteb keys results by name, revision and experiment_kwargs
    assert {k: v for k, v in window.experiment_kwargs.items() if k != "layers"} == {
        k: v for k, v in alone.experiment_kwargs.items() if k != "layers"
    }


def test_a_layer_twice_is_refused(biosses):
    cache, settings, _ = biosses
    with pytest.raises(ValueError, match="twice"):
        LayerMixEncoder(cache, [1, -1, cache.model.n_layers], settings=settings)
