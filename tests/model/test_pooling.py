"""Pooled vectors of every layer, read from one padded batched pass, equal a direct per-text computation."""

from __future__ import annotations

import pytest
import torch
from conftest import FAMILIES, RAGGED_TEXTS, direct_vectors, tiny_model

from layer_mteb.common.config import POOLINGS, READOUTS, EncodeConfig
from layer_mteb.vectors.store import LayerCache


@pytest.mark.parametrize("family", FAMILIES)
def test_every_layer_matches_unpadded_definition(family, bert_tokenizer):
    loaded = tiny_model(family, bert_tokenizer)
    for readout in READOUTS:
        for pooling in POOLINGS:
            cache = LayerCache(loaded, EncodeConfig(readout=readout, pooling=pooling, batch_size=8))
            got = cache.vectors(RAGGED_TEXTS)
            assert got.shape == (loaded.n_layers + 1, len(RAGGED_TEXTS), loaded.hidden_size)
            for i, text in enumerate(RAGGED_TEXTS):
                want = direct_vectors(loaded, text, readout, pooling)
                torch.testing.assert_close(got[:, i], want, atol=1e-5, rtol=1e-5, msg=f"{readout}/{pooling}/{text!r}")


@pytest.mark.parametrize("family", ["gpt2", "gpt_neox", "llama", "mamba"])
def test_final_norm_readout_differs_from_raw_only_before_the_last_layer(family, bert_tokenizer):
    loaded = tiny_model(family, bert_tokenizer)
    normed = LayerCache(loaded, EncodeConfig(readout="final_norm")).vectors(RAGGED_TEXTS)
    raw = LayerCache(loaded, EncodeConfig(readout="raw")).vectors(RAGGED_TEXTS)
    torch.testing.assert_close(normed[-1], raw[-1])
    assert not torch.allclose(normed[1], raw[1], atol=1e-3)


def test_encoder_models_have_no_final_norm(bert_tokenizer):
    loaded = tiny_model("bert", bert_tokenizer)
    assert loaded.final_norm is None
    normed = LayerCache(loaded, EncodeConfig(readout="final_norm")).vectors(RAGGED_TEXTS)
    raw = LayerCache(loaded, EncodeConfig(readout="raw")).vectors(RAGGED_TEXTS)
    torch.testing.assert_close(normed, raw)
