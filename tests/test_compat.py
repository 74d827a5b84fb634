"""Guards for the transformers internals in ``layer_mteb.model.compat``: each fails loudly when transformers changes the
behaviour a workaround relies on (or no longer needs it), instead of a sweep silently going wrong."""

from __future__ import annotations

import json

import pytest
import torch
import transformers
from conftest import tiny_model
from packaging.version import Version

from layer_mteb.model.architectures import first_blocks
from layer_mteb.model.compat import commit_hash, drop_gguf_quantizer, install_output_hooks

TRANSFORMERS_5 = Version(transformers.__version__) >= Version("5")


def test_output_hook_installer_is_where_compat_imports_it(tiny_gpt_neox):
    if not TRANSFORMERS_5:
        pytest.skip("transformers < 5 collects hidden states in the forward loop; there is nothing to install")
    from transformers.utils import output_capturing

    assert callable(output_capturing.maybe_install_capturing_hooks), "transformers moved its hidden-state hooks"
    install_output_hooks(tiny_gpt_neox.model)
    assert tiny_gpt_neox.model._output_capturing_hooks_installed, "the hooks' installed marker changed"


def test_full_forward_after_an_early_stop_still_records_every_block(bert_tokenizer):
    """What the hooks are for: a fresh model's first forward under ``first_blocks`` must not leave later full
    forwards short of the blocks it hid."""
    loaded = tiny_model("gpt_neox", bert_tokenizer)
    ids = torch.tensor([[101, 2023, 102]])
    with torch.inference_mode():
        with first_blocks(loaded, 1):
            assert len(loaded.hidden_states(input_ids=ids)) == 2
        full = loaded.hidden_states(input_ids=ids)
    assert len(full) == loaded.n_layers + 1


def test_gguf_quantizer_blocks_saving_until_dropped(bert_tokenizer, tmp_path):
    from transformers.quantizers.quantizer_gguf import GgufHfQuantizer
    from transformers.utils.quantization_config import GgufConfig

    model = tiny_model("gpt2", bert_tokenizer).model
    gguf_config = GgufConfig(gguf_file="model.gguf")
    model.hf_quantizer = GgufHfQuantizer(gguf_config)
    model.config.quantization_config = gguf_config
    with pytest.raises(ValueError):  # if this passes, transformers saves GGUF-loaded models and the fix can go
        model.save_pretrained(tmp_path / "refused")
    drop_gguf_quantizer(model)
    model.save_pretrained(tmp_path / "saved")
    assert "quantization_config" not in json.loads((tmp_path / "saved" / "config.json").read_text())


@pytest.mark.xfail(
    TRANSFORMERS_5,
    strict=True,
    reason="transformers 5 dropped config._commit_hash; commit_hash reads the hub cache snapshot instead",
)
def test_transformers_records_the_commit_on_the_config(bert_tokenizer):
    model = tiny_model("gpt2", bert_tokenizer).model
    assert hasattr(model.config, "_commit_hash")


def test_commit_hash_comes_from_the_hub_cache_snapshot(bert_tokenizer, tmp_path, monkeypatch):
    """transformers 5 no longer records the commit; the hub cache's snapshot folder of config.json names it."""
    import huggingface_hub.constants

    commit = "0123456789abcdef0123456789abcdef01234567"
    repo = tmp_path / "models--org--tiny"
    (repo / "snapshots" / commit).mkdir(parents=True)
    (repo / "snapshots" / commit / "config.json").write_text("{}")
    (repo / "refs").mkdir()
    (repo / "refs" / "main").write_text(commit)
    monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_CACHE", str(tmp_path))
    model = tiny_model("gpt2", bert_tokenizer).model
    assert commit_hash(model, "org/tiny") == commit
    assert commit_hash(model, "org/not-cached") is None
    model.config._commit_hash = "abc123"  # transformers < 5
    assert commit_hash(model, "org/tiny") == "abc123"
