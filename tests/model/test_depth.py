"""A model's depth read without loading it (packaged table, a folder's config.json, a GGUF header) is the depth the
loaded model has, so ``--layers`` / ``export --layer`` past it are refused before the weights load."""

from __future__ import annotations

import time
from pathlib import Path

import numpy as np
import pytest
from _in_process import run_main
from conftest import minilm_folder, save_tiny_model

from layer_mteb.model.depth import config_depth, gguf_depth, known_depth
from layer_mteb.model.loading import load_model
from layer_mteb.model.names import PACKAGED_MODELS


@pytest.mark.parametrize("family", ["gpt2", "llama", "bert", "gemma3_text", "mamba"])
def test_a_folder_s_config_gives_the_depth_its_loaded_model_has(family, bert_tokenizer, tmp_path):
    folder = save_tiny_model(family, bert_tokenizer, tmp_path / family)
    assert known_depth(str(folder)) == load_model(str(folder)).n_layers == 2


def test_the_packaged_minilm_s_table_depth_is_its_config_s_and_its_loaded_depth():
    assert PACKAGED_MODELS["minilm-l6"].n_layers == config_depth(minilm_folder() / "config.json") == 6
    assert known_depth("minilm-l6") == load_model("minilm-l6").n_layers


def _write_gguf(path: Path, block_count: int | None) -> Path:
    """A real GGUF file (the gguf package's writer): a tokenizer's string array and a float array before the depth,
    as converted models lay them out, so reading the depth skips both."""
    import gguf

    writer = gguf.GGUFWriter(str(path), "llama")
    writer.add_token_list(["<s>", "</s>", "hello", "wörld"])
    writer.add_token_scores([0.0, -1.0, -2.5, -3.0])
    if block_count is not None:
        writer.add_block_count(block_count)
    writer.add_context_length(128)
    writer.add_tensor("token_embd.weight", np.zeros((4, 8), dtype=np.float32))
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    return path


def test_a_gguf_header_gives_the_block_count(tmp_path):
    assert gguf_depth(_write_gguf(tmp_path / "m.gguf", 7)) == 7
    assert known_depth(str(tmp_path / "m.gguf")) == 7
    assert gguf_depth(_write_gguf(tmp_path / "none.gguf", None)) is None  # no depth: checked once loaded
    (tmp_path / "torn.gguf").write_bytes(b"GGUF\x03\x00\x00\x00\x01")
    assert gguf_depth(tmp_path / "torn.gguf") is None
    (tmp_path / "other.gguf").write_bytes(b"not a gguf file at all")
    assert gguf_depth(tmp_path / "other.gguf") is None


def test_a_hub_id_and_an_adapter_folder_have_no_depth_before_loading(tmp_path):
    (tmp_path / "adapter").mkdir()
    (tmp_path / "adapter" / "adapter_config.json").write_text("{}")
    (tmp_path / "adapter" / "config.json").write_text('{"num_hidden_layers": 3}')  # the base's, not to be trusted
    assert known_depth("org/name") is None and known_depth(str(tmp_path / "adapter")) is None


def test_a_layer_past_the_last_is_one_line_before_the_model_loads(tmp_path, capfd, caplog, monkeypatch):
    """``run --layers 99`` and ``export --layer 99`` of a folder and a GGUF file: one line, in well under a second
    (the model's weights, here a file of zeros that would not load, are never read), nothing written."""
    import shutil

    folder = tmp_path / "model"
    shutil.copytree(minilm_folder(), folder)
    (folder / "model.safetensors").write_bytes(b"\0" * 64)  # loading it would fail: the check never gets there
    gguf_file = _write_gguf(tmp_path / "m.gguf", 7)
    monkeypatch.chdir(tmp_path)
    cases = [
        (["run", "--model", str(folder), "--tasks", "demo", "--layers", "0,99", "--output", "out"], str(folder), 6),
        (["run", "--model", str(gguf_file), "--tasks", "demo", "--layers", "-9", "--output", "out"], str(gguf_file), 7),
    ]
    before = sorted(p.name for p in tmp_path.iterdir())
    for argv, name, depth in cases:
        started = time.perf_counter()
        done = run_main(argv, capfd, caplog)
        assert time.perf_counter() - started < 5  # was: after the model loaded (91 s on a busy machine)
        layer = argv[argv.index("--layers") + 1].split(",")[-1]
        message = f"layer {layer} is out of range: {name} has hidden states 0..{depth} (or -{depth + 1}..-1)"
        assert done.returncode == 2 and done.lines == [f"layer-mteb: error: {message}"], done.lines
    done = run_main(["export", "--model", str(folder), "--layer", "7", "--output", "out"], capfd, caplog)
    assert done.lines == [f"layer-mteb: error: --layer 7 is out of range: {folder} has layers 0 (embeddings) to 6"]
    assert sorted(p.name for p in tmp_path.iterdir()) == before
