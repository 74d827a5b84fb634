"""LLM2Vec-style adapter chains: a random tiny Llama, a LoRA adapter on it, a second LoRA adapter on that one."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch
from conftest import RAGGED_TEXTS, save_tiny_model

from layer_mteb.common.config import EncodeConfig
from layer_mteb.common.errors import UserError
from layer_mteb.evaluation.encoder import resolve_settings
from layer_mteb.model.adapters import find_adapter_chain
from layer_mteb.model.attention import attention_of
from layer_mteb.model.forward import encode_all_layers
from layer_mteb.model.loading import load_model

LORA_TARGETS = ["q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"]


def _save_adapter(base_folder: Path, target: Path, names_as_base: Path, seed: int, targets=LORA_TARGETS) -> Path:
    """A random (non-zero) LoRA adapter fitted to the model in ``base_folder``, saved naming ``names_as_base``."""
    from peft import LoraConfig, get_peft_model
    from transformers import AutoModel

    torch.manual_seed(seed)
    model = AutoModel.from_pretrained(base_folder)
    adapted = get_peft_model(model, LoraConfig(r=4, lora_alpha=8, target_modules=targets, init_lora_weights=False))
    with torch.no_grad():  # peft's random init leaves B small; scale it so each adapter moves the states clearly
        for name, param in adapted.named_parameters():
            if "lora_B" in name:
                param.normal_(0, 0.2)
    adapted.peft_config["default"].base_model_name_or_path = str(names_as_base)
    adapted.save_pretrained(target)
    return target


@pytest.fixture(scope="module")
def llm2vec_chain(tmp_path_factory, bert_tokenizer) -> dict[str, Path]:
    """The LLM2Vec layout: ``mntp`` (config with the encoder class as remote code, tokenizer, adapter) on the Llama
    folder, ``simcse`` (adapter only) on ``mntp``."""
    from peft import PeftModel
    from transformers import AutoModel

    root = tmp_path_factory.mktemp("llm2vec")
    llama = save_tiny_model("llama", bert_tokenizer, root / "llama")
    mntp = _save_adapter(llama, root / "mntp", llama, seed=1)
    config = json.loads((llama / "config.json").read_text())
    config["auto_map"] = {"AutoModel": "modeling_llama_encoder.LlamaEncoderModel"}
    (mntp / "config.json").write_text(json.dumps(config))
    bert_tokenizer.save_pretrained(mntp)
    merged = root / "mntp-merged"  # adapter 2 is trained on the model with adapter 1 merged in, as LLM2Vec did
    PeftModel.from_pretrained(AutoModel.from_pretrained(llama), mntp).merge_and_unload().save_pretrained(merged)
    simcse = _save_adapter(merged, root / "simcse", mntp, seed=2)
    return {"llama": llama, "mntp": mntp, "simcse": simcse}


def _by_hand(chain: dict[str, Path], text: str, tokenizer) -> torch.Tensor:
    """The definition, one text, no padding: peft merges both adapters, a 4-D all-zero mask lets every token attend
    to every token, each layer is read after the final norm and mean-pooled -> [L+1, D]."""
    from peft import PeftModel
    from transformers import AutoModel

    model = AutoModel.from_pretrained(chain["llama"])
    model = PeftModel.from_pretrained(model, chain["mntp"]).merge_and_unload()
    model = PeftModel.from_pretrained(model, chain["simcse"]).merge_and_unload().eval()
    ids = torch.tensor([tokenizer(text)["input_ids"]])
    full = torch.zeros(1, 1, ids.shape[1], ids.shape[1])
    with torch.inference_mode():
        states = model(input_ids=ids, attention_mask=full, output_hidden_states=True, use_cache=False).hidden_states
        normed = [model.norm(h) for h in states[:-1]] + [states[-1]]
    return torch.stack([h[0].mean(0) for h in normed])


def test_chain_is_found_in_application_order(llm2vec_chain):
    chain = find_adapter_chain(str(llm2vec_chain["simcse"]))
    assert chain is not None
    assert chain.base == str(llm2vec_chain["llama"])
    assert [link.source for link in chain.adapters] == [str(llm2vec_chain["mntp"]), str(llm2vec_chain["simcse"])]
    assert chain.attention == "bidirectional"  # mntp's config names LLM2Vec's encoder class
    assert find_adapter_chain(str(llm2vec_chain["llama"])) is None


def test_every_layer_equals_merging_by_hand_with_bidirectional_attention(llm2vec_chain, bert_tokenizer):
    loaded = load_model(str(llm2vec_chain["simcse"]))
    assert attention_of(loaded) == "bidirectional"
    assert resolve_settings(loaded, EncodeConfig()).encode.attention == "bidirectional"  # what every record names
    texts = [t for t in RAGGED_TEXTS if t]  # 3 to 42 tokens in one batch
    vectors, _ = encode_all_layers(loaded, texts, EncodeConfig(batch_size=8))
    for i, text in enumerate(texts):
        torch.testing.assert_close(vectors[:, i], _by_hand(llm2vec_chain, text, bert_tokenizer), atol=1e-5, rtol=0)


def test_the_adapters_change_the_model(llm2vec_chain):
    texts = RAGGED_TEXTS[:3]
    config = EncodeConfig(attention="bidirectional")
    base, _ = encode_all_layers(load_model(str(llm2vec_chain["llama"]), config), texts, config)
    one, _ = encode_all_layers(load_model(str(llm2vec_chain["mntp"]), config), texts, config)
    two, _ = encode_all_layers(load_model(str(llm2vec_chain["simcse"]), config), texts, config)
    for a, b in [(base, one), (one, two)]:
        assert (a[1:] - b[1:]).abs().amax(dim=(1, 2)).min() > 1e-3  # every block's output moves
    torch.testing.assert_close(base[0], one[0])  # LoRA on attention and MLP leaves the embeddings alone


def test_attention_can_be_forced_causal_and_is_part_of_the_identity(llm2vec_chain):
    default = load_model(str(llm2vec_chain["simcse"]))
    causal = load_model(str(llm2vec_chain["simcse"]), EncodeConfig(attention="causal"))
    assert attention_of(causal) == "causal"
    texts = RAGGED_TEXTS[:2]
    assert not torch.allclose(
        encode_all_layers(default, texts, EncodeConfig())[0], encode_all_layers(causal, texts, EncodeConfig())[0]
    )
    assert default.revision == causal.revision  # same weights; the attention is a setting, keyed separately


def test_missing_base_is_one_clear_line(llm2vec_chain, tmp_path):
    broken = tmp_path / "orphan"
    broken.mkdir()
    config = json.loads((llm2vec_chain["simcse"] / "adapter_config.json").read_text())
    config["base_model_name_or_path"] = str(tmp_path / "gone")
    (broken / "adapter_config.json").write_text(json.dumps(config))
    with pytest.raises(UserError) as err:
        load_model(str(broken))
    assert "\n" not in str(err.value)
    assert "names base model" in str(err.value) and "does not exist" in str(err.value)


def test_adapter_for_another_architecture_is_one_clear_line(llm2vec_chain, tmp_path, bert_tokenizer):
    neox = save_tiny_model("gpt_neox", bert_tokenizer, tmp_path / "neox")
    foreign = _save_adapter(
        neox, tmp_path / "neox-adapter", llm2vec_chain["llama"], seed=3, targets=["query_key_value"]
    )
    with pytest.raises(UserError) as err:
        load_model(str(foreign))
    message = str(err.value)
    assert "\n" not in message
    assert message.startswith(f"cannot apply adapter {str(foreign)!r}") and "query_key_value" in message
