"""Bidirectional attention is real for every decoder family and attention implementation, and respects padding."""

from __future__ import annotations

import pytest
import torch
from conftest import tiny_config

from layer_mteb.common.config import EncodeConfig
from layer_mteb.common.errors import UserError
from layer_mteb.model.architectures import wrap_model
from layer_mteb.model.attention import SUPPORTED_IMPLEMENTATIONS, attention_of, set_attention, with_model_attention

DECODERS = ["llama", "gemma3_text", "gpt_neox", "gpt2"]


def _tiny(family: str, tokenizer, implementation: str):
    from transformers import AutoModel

    torch.manual_seed(0)
    model = AutoModel.from_config(tiny_config(family, len(tokenizer)), attn_implementation=implementation)
    return wrap_model(model, tokenizer, name=f"test/tiny-{family}")


def _states(loaded, ids: torch.Tensor, mask: torch.Tensor | None = None) -> tuple[torch.Tensor, ...]:
    with torch.inference_mode():
        return loaded.hidden_states(input_ids=ids, attention_mask=mask, **loaded.forward_options)


def _first_token_changes(loaded, ids: torch.Tensor, changed: torch.Tensor) -> list[float]:
    """Per layer, how much the first token's state moves when the last token changes."""
    pairs = zip(_states(loaded, ids), _states(loaded, changed), strict=True)
    return [(a[0, 0] - b[0, 0]).abs().max().item() for a, b in pairs]


@pytest.mark.parametrize("implementation", SUPPORTED_IMPLEMENTATIONS)
@pytest.mark.parametrize("family", DECODERS)
def test_the_last_token_reaches_the_first_only_when_bidirectional(family, implementation, bert_tokenizer):
    loaded = _tiny(family, bert_tokenizer, implementation)
    ids = torch.tensor([[101, 2023, 2003, 1037, 102]])  # five tokens: inside Gemma 3's sliding window of 8
    changed = ids.clone()
    changed[0, -1] = 2204
    assert attention_of(loaded) == "causal"
    first_causal = _first_token_changes(loaded, ids, changed)
    set_attention(loaded, "bidirectional")
    assert attention_of(loaded) == "bidirectional"
    first_bidirectional = _first_token_changes(loaded, ids, changed)
    assert max(first_causal) == 0.0
    assert first_bidirectional[0] == 0.0  # the embeddings see no other token
    assert min(first_bidirectional[1:]) > 1e-4
    set_attention(loaded, "causal")  # and back
    assert _first_token_changes(loaded, ids, changed) == [0.0] * len(first_causal)


@pytest.mark.parametrize("implementation", SUPPORTED_IMPLEMENTATIONS)
@pytest.mark.parametrize("family", DECODERS)
def test_bidirectional_attention_ignores_right_padding(family, implementation, bert_tokenizer):
    """A short text padded next to a long one has the states it has alone: padding is never attended to."""
    loaded = _tiny(family, bert_tokenizer, implementation)
    set_attention(loaded, "bidirectional")
    short = [101, 2023, 2003, 102]
    batch = torch.tensor([[101, 1037, 2204, 2518, 2000, 2023, 102], [*short, 0, 0, 0]])
    mask = torch.tensor([[1] * 7, [1] * 4 + [0] * 3])
    padded = _states(loaded, batch, mask)
    alone = _states(loaded, torch.tensor([short]))
    for k, (p, a) in enumerate(zip(padded, alone, strict=True)):
        torch.testing.assert_close(p[1, :4], a[0], atol=1e-5, rtol=0, msg=f"layer {k}")


def test_encoders_and_ssms_keep_their_own_attention(bert_tokenizer):
    from conftest import tiny_model

    bert, mamba = tiny_model("bert", bert_tokenizer), tiny_model("mamba", bert_tokenizer)
    assert attention_of(bert) == "bidirectional"
    assert attention_of(mamba) == "causal"
    set_attention(bert, "bidirectional")  # already so: nothing to do
    with pytest.raises(UserError, match="encoder reads bidirectionally"):
        set_attention(bert, "causal")
    with pytest.raises(UserError, match="state-space model reads causally"):
        set_attention(mamba, "bidirectional")


def test_settings_name_the_attention_that_really_runs(bert_tokenizer):
    loaded = _tiny("llama", bert_tokenizer, "sdpa")
    assert with_model_attention(EncodeConfig(), loaded).attention == "causal"
    with pytest.raises(UserError, match=r"ask for bidirectional attention but .* runs causal"):
        with_model_attention(EncodeConfig(attention="bidirectional"), loaded)
    set_attention(loaded, "bidirectional")
    assert with_model_attention(EncodeConfig(), loaded).attention == "bidirectional"
