"""``--normalize`` equals sentence-transformers' own pipeline; ``--attention`` and ``--normalize`` key every cache."""

from __future__ import annotations

import pandas as pd
import pytest
import torch
from conftest import RAGGED_TEXTS, ForwardCounter, minilm_folder, tiny_model

from layer_mteb.common.config import EncodeConfig
from layer_mteb.common.errors import UserError
from layer_mteb.evaluation.encoder import LayerEncoder
from layer_mteb.evaluation.sweep import sweep
from layer_mteb.model.attention import set_attention
from layer_mteb.model.forward import encode_all_layers
from layer_mteb.model.loading import load_model


def test_normalized_last_layer_equals_sentence_transformers_encode():
    """all-MiniLM-L6-v2's pipeline is Transformer -> mean Pooling -> Normalize, with max_seq_length 256."""
    from sentence_transformers import SentenceTransformer

    st_model = SentenceTransformer(str(minilm_folder()), device="cpu")
    assert [type(m).__name__ for m in st_model] == ["Transformer", "Pooling", "Normalize"]
    texts = [*RAGGED_TEXTS, "word " * 300]  # one text past the 256-token limit
    want = st_model.encode(texts, convert_to_tensor=True, batch_size=4)
    config = EncodeConfig(normalize=True, max_length=st_model.max_seq_length)
    got, n_truncated = encode_all_layers(load_model("minilm-l6", config), texts, config)
    assert n_truncated == 1
    torch.testing.assert_close(got[-1], want, atol=1e-5, rtol=0)
    torch.testing.assert_close(got.norm(dim=-1), torch.ones(got.shape[:2]), atol=1e-5, rtol=0)  # every layer


def test_experiment_kwargs_change_with_attention_and_normalize(bert_tokenizer):
    loaded = tiny_model("llama", bert_tokenizer)
    plain = LayerEncoder.from_model(loaded, -1).mteb_model_meta
    normalized = LayerEncoder.from_model(loaded, -1, config=EncodeConfig(normalize=True)).mteb_model_meta
    set_attention(loaded, "bidirectional")
    bidirectional = LayerEncoder.from_model(loaded, -1).mteb_model_meta
    assert plain.experiment_kwargs["attention"] == "causal" and not plain.experiment_kwargs["normalize"]
    assert normalized.experiment_kwargs["normalize"] is True
    assert bidirectional.experiment_kwargs["attention"] == "bidirectional"
    assert len({plain.experiment_name, normalized.experiment_name, bidirectional.experiment_name}) == 3


def test_no_stale_reuse_across_attention_and_normalize(bert_tokenizer, data_dir, tmp_path, monkeypatch):
    """Same model and vector cache: each new setting encodes again and gets its own rows, in its own run folder (a
    folder holds one setting: writing another into it is refused)."""
    # a cache of its own: another test may already have stored this (seeded) model's vectors in the session's one
    monkeypatch.setenv("LAYER_MTEB_CACHE", str(tmp_path / "cache"))
    loaded = tiny_model("llama", bert_tokenizer)

    def run(config: EncodeConfig, folder: str) -> tuple[pd.DataFrame, int]:
        counter = ForwardCounter(loaded.model)
        try:
            frame = sweep(
                loaded, ["BIOSSES"], layers="-1", config=config, data_dir=data_dir, output=tmp_path / folder,
                progress=False,
            )  # fmt: skip
        finally:
            counter.close()
        return frame, counter.texts

    causal, encoded = run(EncodeConfig(), "causal")
    assert encoded > 0 and causal["attention"].item() == "causal"
    assert run(EncodeConfig(), "causal")[1] == 0  # the same settings are served from the caches
    with pytest.raises(UserError, match="with normalize=False; this run asks normalize=True"):
        run(EncodeConfig(normalize=True), "causal")
    normalized, encoded = run(EncodeConfig(normalize=True), "normalized")
    assert encoded > 0 and bool(normalized["normalize"].item())
    set_attention(loaded, "bidirectional")
    bidirectional, encoded = run(EncodeConfig(), "bidirectional")
    assert encoded > 0 and bidirectional["attention"].item() == "bidirectional"
    assert bidirectional["main_score"].item() != causal["main_score"].item()
    assert len(list(tmp_path.rglob("BIOSSES.json"))) == 3  # one mteb result per setting
