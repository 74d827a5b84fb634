"""Guards for the transformers internals in ``layer_mteb.model.compat``: each fails loudly when transformers changes the
behaviour a workaround relies on (or no longer needs it), instead of a sweep silently going wrong."""

from __future__ import annotations

import inspect
import json

import pytest
import torch
import transformers
from conftest import tiny_config, tiny_model
from packaging.version import Version

from layer_mteb.model.architectures import first_blocks
from layer_mteb.model.compat import (
    attention_implementation,
    commit_hash,
    drop_gguf_quantizer,
    hub_file,
    install_output_hooks,
    snapshot_commit,
)

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


#: transformers 5.18 stopped keeping the loaded commit on the config (its configuration_utils pops ``_commit_hash``
#: unused; 5.17 and every earlier release set ``config._commit_hash``): commit_hash then reads the hub cache snapshot
COMMIT_ON_CONFIG = Version(transformers.__version__) < Version("5.18")


def test_transformers_records_the_commit_on_the_config_before_5_18_only(bert_tokenizer):
    model = tiny_model("gpt2", bert_tokenizer).model
    assert hasattr(model.config, "_commit_hash") is COMMIT_ON_CONFIG, transformers.__version__


def test_commit_hash_comes_from_the_hub_cache_snapshot(bert_tokenizer, tmp_path, monkeypatch):
    """transformers 5.18 and later no longer record the commit; the hub cache's snapshot folder of config.json names
    it."""
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
    model.config._commit_hash = "abc123"  # transformers < 5.18
    assert commit_hash(model, "org/tiny") == "abc123"


@pytest.mark.parametrize("implementation", ["eager", "sdpa"])
def test_attention_implementation_is_the_one_the_model_was_loaded_with(bert_tokenizer, implementation):
    from transformers import AutoModel

    config = tiny_config("llama", len(bert_tokenizer))
    model = AutoModel.from_config(config, attn_implementation=implementation)
    assert attention_implementation(model) == implementation


def test_hub_file_switches_are_the_ones_transformers_reads():
    from transformers.utils import hub

    switches = {"_raise_exceptions_for_missing_entries", "_raise_exceptions_for_connection_errors"}
    assert switches <= set(inspect.signature(hub.cached_files).parameters), "cached_file switches renamed"
    assert inspect.signature(hub.extract_commit_hash).parameters.keys() == {"resolved_file", "commit_hash"}


def test_hub_file_finds_cached_files_and_says_none_for_missing_ones(tmp_path, monkeypatch):
    """Offline (as the tests run): a cached file is found with its commit; a missing one is None, not an error."""
    import huggingface_hub.constants

    commit = "89abcdef0123456789abcdef0123456789abcdef"
    snapshot = tmp_path / "models--org--adapter" / "snapshots" / commit
    snapshot.mkdir(parents=True)
    (snapshot / "adapter_config.json").write_text("{}")
    (tmp_path / "models--org--adapter" / "refs").mkdir()
    (tmp_path / "models--org--adapter" / "refs" / "main").write_text(commit)
    monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_CACHE", str(tmp_path))
    path = hub_file("org/adapter", "adapter_config.json", None)
    assert path == str(snapshot / "adapter_config.json") and snapshot_commit(path) == commit
    # a file the cache does not hold is missing offline, not an error, with or without unreachable_ok
    assert hub_file("org/adapter", "tokenizer.json", None, unreachable_ok=True) is None
    assert hub_file("org/adapter", "tokenizer.json", None) is None
    assert snapshot_commit(str(tmp_path / "plain" / "adapter_config.json")) is None
