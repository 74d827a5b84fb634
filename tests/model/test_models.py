"""Loading: names resolve to the right source, architectures to their final norm, tokenizers pad on the right."""

from __future__ import annotations

import json

import pytest
import torch
from conftest import FAMILIES, minilm_folder, save_tiny_model, tiny_config, tiny_model
from tokenizers import Tokenizer, models, pre_tokenizers
from transformers import AutoConfig, AutoModel, GPT2Config, GPT2Model, PreTrainedTokenizerFast

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


def _tiny_config_of_type(model_type: str, vocab_size: int):
    """A 2-block config of any listed type: the families of conftest as they are, the others from generic sizes."""
    if model_type in FAMILIES:
        return tiny_config(model_type, vocab_size)
    sizes = {"num_hidden_layers": 2, "hidden_size": 32, "num_attention_heads": 2, "num_key_value_heads": 1}
    sizes |= {"intermediate_size": 64, "max_position_embeddings": 128, "head_dim": 16, "vocab_size": vocab_size}
    return AutoConfig.for_model(model_type, **sizes)


@pytest.mark.parametrize("model_type", sorted(ARCHITECTURES))
def test_every_table_entry_names_the_blocks_and_the_last_module_of_a_real_model(model_type, bert_tokenizer):
    """The table's paths resolve on a model of that type built by transformers: 2 blocks, and the last hidden state
    is the output of the listed final norm (or of the last block where the table lists none)."""
    torch.manual_seed(0)
    model = AutoModel.from_config(_tiny_config_of_type(model_type, len(bert_tokenizer)))
    loaded = wrap_model(model, bert_tokenizer, name=f"test/{model_type}")
    assert loaded.architecture is ARCHITECTURES[model_type] and loaded.n_layers == 2
    last = loaded.final_norm if loaded.architecture.final_norm else loaded.blocks[-1]
    outputs = []
    handle = last.register_forward_hook(
        lambda module, args, out: outputs.append(out[0] if isinstance(out, tuple) else out)
    )
    try:
        with torch.inference_mode():
            states = loaded.hidden_states(
                **bert_tokenizer(["a short text", "another"], return_tensors="pt", padding=True)
            )
    finally:
        handle.remove()
    assert len(states) == 3 and len(outputs) == 1
    assert torch.equal(states[-1], outputs[0])


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


def test_a_json_device_map_places_modules_as_it_says(tmp_path, bert_tokenizer):
    """``--device-map file.json`` is transformers' device_map dict: the norm sent to disk is offloaded (meta)."""
    folder = save_tiny_model("llama", bert_tokenizer, tmp_path / "llama")
    device_map = {"embed_tokens": "cpu", "layers": "cpu", "norm": "disk", "rotary_emb": "cpu"}
    (tmp_path / "map.json").write_text(json.dumps(device_map))
    loaded = load_model(str(folder), EncodeConfig(device_map=str(tmp_path / "map.json")))
    assert loaded.model.hf_device_map == device_map
    assert loaded.model.norm.weight.device.type == "meta"
    texts = ["a first text", "and a second, longer text than the first"]
    offloaded = LayerCache(loaded, EncodeConfig(), memory_limit=1 << 30)
    offloaded.fill(texts)
    plain = LayerCache(load_model(str(folder)), EncodeConfig(), memory_limit=1 << 30)
    plain.fill(texts)
    assert torch.equal(offloaded.vectors(texts), plain.vectors(texts))  # every layer read out through the norm


@pytest.mark.parametrize("text", ["not json", "[1, 2]", '{"layers": [0]}'])
def test_a_bad_json_device_map_is_one_line(tmp_path, bert_tokenizer, text):
    folder = save_tiny_model("llama", bert_tokenizer, tmp_path / "llama")
    (tmp_path / "map.json").write_text(text)
    with pytest.raises(UserError, match=r"^--device-map .*map.json: .*"):
        load_model(str(folder), EncodeConfig(device_map=str(tmp_path / "map.json")))
