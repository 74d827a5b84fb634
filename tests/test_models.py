"""Loading: names resolve to the right source, architectures to their final norm, tokenizers pad on the right."""

from __future__ import annotations

import pytest
import torch
from conftest import FAMILIES, minilm_folder, save_tiny_model, tiny_model
from tokenizers import Tokenizer, models, pre_tokenizers
from transformers import GPT2Config, GPT2Model, PreTrainedTokenizerFast

from layer_mteb.common.config import EncodeConfig
from layer_mteb.common.errors import UserError
from layer_mteb.model.architectures import ARCHITECTURES, wrap_model
from layer_mteb.model.loading import load_model
from layer_mteb.vectors.store import LayerCache

FINAL_NORMS = {
    "gpt2": "ln_f",
    "gpt_neox": "final_layer_norm",
    "llama": "norm",
    "gemma3_text": "norm",
    "mamba": "norm_f",
    "mamba2": "norm_f",
    "bert": None,
}


@pytest.mark.parametrize("family", FAMILIES)
def test_architecture_table_finds_blocks_and_final_norm(family, bert_tokenizer):
    loaded = tiny_model(family, bert_tokenizer)
    assert loaded.n_layers == 2
    expected = FINAL_NORMS[family]
    assert (loaded.final_norm is None) == (expected is None)
    if expected:
        assert loaded.final_norm is getattr(loaded.model, expected)
    assert loaded.architecture.kind == {"bert": "encoder", "mamba": "ssm", "mamba2": "ssm"}.get(family, "causal")


def test_every_supported_type_is_listed_once():
    assert {"gpt2", "gpt_neox", "llama", "gemma3_text", "bert", "mpnet", "mamba", "mamba2"} <= set(ARCHITECTURES)


def causal_tokenizer_without_pad():
    vocab = {w: i for i, w in enumerate(["<unk>", "<eos>", "hello", "world", "a", "b"])}
    raw = Tokenizer(models.WordLevel(vocab, unk_token="<unk>"))
    raw.pre_tokenizer = pre_tokenizers.Whitespace()
    return PreTrainedTokenizerFast(tokenizer_object=raw, unk_token="<unk>", eos_token="<eos>")


def test_causal_tokenizer_without_pad_token_pads_right_with_eos():
    tokenizer = causal_tokenizer_without_pad()
    assert tokenizer.pad_token is None
    torch.manual_seed(0)
    model = GPT2Model(GPT2Config(n_layer=1, n_embd=16, n_head=2, vocab_size=6, n_positions=32))
    loaded = wrap_model(model, tokenizer, name="tiny")
    assert loaded.name == "local/tiny"
    assert loaded.tokenizer.pad_token == "<eos>" and loaded.tokenizer.padding_side == "right"
    assert tokenizer.pad_token is None and loaded.tokenizer is not tokenizer  # the caller's tokenizer is left as is
    vectors = LayerCache(loaded, EncodeConfig()).vectors(["hello world a b a b", "", "   ", "a"])
    assert torch.isfinite(vectors).all()  # empty and blank texts pool over one stand-in token


def test_local_folder_loads_with_a_content_revision(tmp_path, bert_tokenizer):
    folder = save_tiny_model("llama", bert_tokenizer, tmp_path / "tiny-llama")
    loaded = load_model(str(folder))
    assert loaded.name == "local/tiny-llama" and len(loaded.revision) == 16
    assert loaded.architecture.final_norm == "norm"


def test_packaged_minilm_loads_under_its_hub_name():
    loaded = load_model("minilm-l6")
    assert loaded.name == "sentence-transformers/all-MiniLM-L6-v2"
    assert loaded.n_layers == 6 and loaded.hidden_size == 384
    assert minilm_folder().is_dir()


@pytest.mark.parametrize(
    ("name", "message"),
    [
        ("./no/such/folder", "does not exist"),
        ("missing.gguf", "does not exist"),
        ("just-a-name", "packaged name"),
        ("org/a/b", "packaged name"),
    ],
)
def test_bad_model_names_are_one_clear_error(name, message):
    with pytest.raises(UserError, match=message):
        load_model(name)


def test_unknown_architecture_is_named(tmp_path):
    from transformers import T5Config, T5Model

    with pytest.raises(UserError, match="'t5' is not supported"):
        wrap_model(
            T5Model(T5Config(num_layers=1, d_model=8, d_ff=8, num_heads=1, d_kv=8, vocab_size=10)),
            causal_tokenizer_without_pad(),
            name="x/t5",
        )
