"""Paper-scale paths: pooled vectors on disk past the memory limit, layers scored by worker processes, one padded
pass over a task's texts. Each gives exactly what the plain in-memory, one-process, lazy sweep gives."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
from pathlib import Path

import mteb
import pandas as pd
import pytest
import torch
from conftest import ForwardCounter, save_tiny_model
from numpy.lib import format as npy

from layer_mteb.cli import main
from layer_mteb.common.config import EncodeConfig
from layer_mteb.common.errors import UserError
from layer_mteb.evaluation.encoder import LayerEncoder
from layer_mteb.evaluation.mteb_call import texts_mteb_encodes
from layer_mteb.evaluation.sweep import sweep
from layer_mteb.model.forward import length_sorted_batches, tokenize
from layer_mteb.tasks.catalog import TaskSpec, load_task
from layer_mteb.vectors.layer_files import SegmentWriter, segment_folders
from layer_mteb.vectors.memory import format_size, parse_size, store_bytes
from layer_mteb.vectors.store import LayerCache


def sts_texts(data_dir, name="STS17") -> list[str]:
    rows = [json.loads(line) for line in (data_dir / name / "test.jsonl").open()]
    return list(dict.fromkeys(r[k] for r in rows for k in ("sentence1", "sentence2")))


@pytest.mark.parametrize(("text", "want"), [("2GB", 2 * 10**9), ("256MB", 256 * 10**6), ("1.5GiB", 3 * 2**29)])
def test_parse_size(text, want):
    assert parse_size(text) == want


@pytest.mark.parametrize("text", ["lots", "2XB", "-1GB", "0"])
def test_parse_size_explains_bad_input(text):
    with pytest.raises(UserError, match="--max-cache-memory"):
        parse_size(text)


def test_disk_store_equals_memory_store_for_every_layer(tiny_gpt_neox, demo_data_dir, tmp_path):
    texts = sts_texts(demo_data_dir)
    config = EncodeConfig(batch_size=16)
    hidden, n_layers = tiny_gpt_neox.hidden_size, tiny_gpt_neox.n_layers + 1
    in_memory = LayerCache(tiny_gpt_neox, config, memory_limit=10**9)
    want = in_memory.vectors(texts)
    limit = store_bytes(len(texts), 1, hidden)  # one layer: the smallest limit that works
    on_disk = LayerCache(tiny_gpt_neox, config, tmp_path / "store", memory_limit=limit)
    on_disk.fill(texts)  # the same batches as the in-memory fill: the same floats
    shuffled = texts[::-1]
    for layer in range(n_layers):
        assert torch.equal(on_disk.vectors(shuffled, layer), want[layer].flip(0))
    assert on_disk.on_disk and not in_memory.on_disk
    on_disk.save()
    assert not (tmp_path / "store" / "vectors.safetensors").exists()  # nothing was kept in memory
    counter = ForwardCounter(tiny_gpt_neox.model)
    try:
        reread = LayerCache(tiny_gpt_neox, config, tmp_path / "store", memory_limit=limit)
        assert torch.equal(reread.vectors(texts), want)
    finally:
        counter.close()
    assert counter.texts == 0


def test_a_saved_cache_bigger_than_the_memory_limit_is_read_into_layer_files(tiny_gpt_neox, demo_data_dir, tmp_path):
    texts = sts_texts(demo_data_dir)
    config = EncodeConfig(batch_size=16)
    big = LayerCache(tiny_gpt_neox, config, tmp_path / "store", memory_limit=10**9)
    want = big.vectors(texts)
    big.save()
    small = LayerCache(tiny_gpt_neox, config, tmp_path / "store", memory_limit=store_bytes(len(texts), 1, 32))
    assert small.on_disk and torch.equal(small.vectors(texts), want)


def test_a_memory_limit_below_one_layer_is_one_clear_error(tiny_gpt_neox, demo_data_dir):
    texts = sts_texts(demo_data_dir)
    one_layer = store_bytes(len(texts), 1, tiny_gpt_neox.hidden_size)
    cache = LayerCache(tiny_gpt_neox, EncodeConfig(), memory_limit=one_layer - 1)
    with pytest.raises(UserError, match=f"smallest limit that works is {format_size(one_layer)}"):
        cache.vectors(texts)
    assert len(cache) == 0


def test_layer_files_that_would_not_fit_the_disk_stop_before_any_encoding(
    tiny_gpt_neox, data_dir, tmp_path, monkeypatch
):
    texts = sts_texts(data_dir)
    hidden, n_layers = tiny_gpt_neox.hidden_size, tiny_gpt_neox.n_layers + 1
    need = store_bytes(len(texts), n_layers, hidden)
    real_usage = shutil.disk_usage
    monkeypatch.setattr(shutil, "disk_usage", lambda path: real_usage(path)._replace(free=need - 1))
    cache = LayerCache(
        tiny_gpt_neox, EncodeConfig(), tmp_path / "store", memory_limit=store_bytes(len(texts), 1, hidden)
    )
    counter = ForwardCounter(tiny_gpt_neox.model)
    try:
        with pytest.raises(UserError, match=f"need {format_size(need)} on disk in .*LAYER_MTEB_CACHE"):
            cache.vectors(texts)
    finally:
        counter.close()
    assert counter.texts == 0 and len(cache) == 0
    assert not segment_folders(tmp_path / "store" / "layers")
    monkeypatch.setattr(shutil, "disk_usage", lambda path: real_usage(path)._replace(free=need))
    assert cache.vectors(texts, 0).shape == (len(texts), hidden)  # exactly enough is enough


def test_a_too_small_memory_limit_fails_the_run_with_one_line(tiny_gpt_neox, demo_data_dir):
    with pytest.raises(UserError, match="smallest limit that works"):
        sweep(
            tiny_gpt_neox, "STS17", config=EncodeConfig(max_cache_memory=1000), data_dir=demo_data_dir, progress=False
        )


def test_union_prefill_encodes_each_unique_text_once_with_the_same_scores(tiny_gpt_neox, data_dir):
    """STS and pair classification: one length-sorted pass over each task's union, counted in the model's forward
    calls; scores as with the texts left to mteb's encode calls (the same vectors up to batch padding)."""
    names = ["STS17", "BIOSSES", "TwitterSemEval2015"]
    config = EncodeConfig(batch_size=16)
    texts, batches = 0, 0
    for name in names:
        task = load_task(TaskSpec(name), "test", data_dir)
        task.load_data()
        union = texts_mteb_encodes(task)
        ids, _ = tokenize(tiny_gpt_neox.tokenizer, union, config)
        texts += len(union)
        batches += len(length_sorted_batches([len(i) for i in ids], config.batch_size))
    counter = ForwardCounter(tiny_gpt_neox.model)
    try:
        frame = sweep(tiny_gpt_neox, names, config=config, data_dir=data_dir, vector_cache=False, progress=False)
    finally:
        counter.close()
    assert (counter.texts, counter.calls) == (texts, batches)
    for name in names:  # the lazy path: a plain encoder, filled by mteb's own calls
        task = load_task(TaskSpec(name), "test", data_dir)
        encoder = LayerEncoder.from_model(tiny_gpt_neox, -1, config=config)
        lazy = mteb.evaluate(encoder, task, cache=None, show_progress_bar=False).task_results[0].get_score()
        got = frame[(frame["task"] == name) & (frame["layer"] == tiny_gpt_neox.n_layers)]["main_score"]
        assert got.iloc[0] == pytest.approx(lazy, abs=2e-6)  # the table keeps 6 decimals


def test_union_prefill_covers_the_classification_training_sample(data_dir):
    task = load_task(TaskSpec("Banking77Classification"), "test", data_dir)
    task.load_data()
    texts = texts_mteb_encodes(task)
    test_texts = {json.loads(line)["text"] for line in (data_dir / "Banking77Classification" / "test.jsonl").open()}
    assert test_texts <= set(texts)
    assert len(texts) == 7696  # 3,080 test texts + the union of ten 8-per-label training samples, as mteb encodes


@pytest.mark.parametrize(
    "tasks",
    [
        "STS17",
        pytest.param("Banking77Classification", marks=pytest.mark.slow),
        pytest.param("TwentyNewsgroupsClustering", marks=pytest.mark.slow),
    ],
)
def test_workers_give_the_table_of_one_worker(tiny_gpt_neox, data_dir, tasks):
    config = EncodeConfig(batch_size=64, max_length=32)
    one = sweep(tiny_gpt_neox, tasks, config=config, data_dir=data_dir, vector_cache=False, eval_workers=1)
    two = sweep(tiny_gpt_neox, tasks, config=config, data_dir=data_dir, vector_cache=False, eval_workers=2)
    pd.testing.assert_frame_equal(one, two, check_exact=True)


def test_disk_store_sweep_equals_in_memory_sweep(tiny_gpt_neox, demo_data_dir):
    config = EncodeConfig(batch_size=16)
    one_layer = format_size(store_bytes(len(sts_texts(demo_data_dir)), 1, tiny_gpt_neox.hidden_size))
    small = EncodeConfig(batch_size=16, max_cache_memory=parse_size(one_layer))
    want = sweep(tiny_gpt_neox, "STS17", config=config, data_dir=demo_data_dir, vector_cache=False, progress=False)
    got = sweep(tiny_gpt_neox, "STS17", config=small, data_dir=demo_data_dir, vector_cache=False, progress=False)
    pd.testing.assert_frame_equal(want.drop(columns="max_cache_memory", errors="ignore"), got, check_exact=True)


def run_args(folder, data_dir, out, limit) -> list[str]:
    """``layer-mteb run`` on STS17 with a vector store on disk."""
    argv = ["run", "--model", str(folder), "--tasks", "STS17", "--data-dir", str(data_dir), "--output", str(out)]
    return [*argv, "--batch-size", "4", "--max-cache-memory", limit]


def run_cli(folder, data_dir, out, cache, limit, *, program: str) -> subprocess.CompletedProcess:
    """:func:`run_args` in a process of its own, ``program`` (a script) standing in for the CLI."""
    env = {**os.environ, "LAYER_MTEB_CACHE": str(cache), "HF_HUB_OFFLINE": "1"}
    argv = [sys.executable, "-c", program, *run_args(folder, data_dir, out, limit)]
    return subprocess.run(argv, env=env, capture_output=True, text=True)


# The CLI killed (SIGKILL, as by the OOM killer or kill -9) at a fixed point: right after the fifth batch of layer 0
# reaches the disk, the segment unfinished. The kill is real; only its moment is fixed, so the test does not depend
# on how fast the run is.
KILLED_AFTER_FIVE_BATCHES = """
import os, signal, sys
from layer_mteb.cli import main
from layer_mteb.vectors.layer_files import SegmentWriter

write_all = SegmentWriter.write_all
batches = 0

def write_then_die(self, rows, vectors):
    global batches
    write_all(self, rows, vectors)
    batches += 1
    if batches == 5:
        for handle in self.files:
            handle.flush()
        os.kill(os.getpid(), signal.SIGKILL)

SegmentWriter.write_all = write_then_die
sys.exit(main(sys.argv[1:]))
"""


@pytest.mark.slow  # a new interpreter (torch imported again) for the real kill
def test_killed_during_a_disk_store_write_then_rerun_gives_the_same_table(
    bert_tokenizer, data_dir, tmp_path, monkeypatch
):
    folder = save_tiny_model("gpt_neox", bert_tokenizer, tmp_path / "tiny")
    n_texts = len(sts_texts(data_dir))
    limit = format_size(store_bytes(n_texts, 1, 32))
    monkeypatch.setenv("LAYER_MTEB_CACHE", str(tmp_path / "reference-cache"))
    assert main(run_args(folder, data_dir, tmp_path / "reference", limit)) == 0  # the reference, in this process
    killed = run_cli(folder, data_dir, tmp_path / "out", tmp_path / "cache", limit, program=KILLED_AFTER_FIVE_BATCHES)
    assert killed.returncode == -signal.SIGKILL, killed.stderr
    [torn] = (tmp_path / "cache").rglob("layers/.tmp-*/layer-000.npy")
    with torn.open("rb") as handle:
        npy.read_magic(handle)
        shape, _, _ = npy.read_array_header_2_0(handle)
        assert shape == (n_texts, 32) and len(handle.read()) == 5 * 4 * 32 * 4  # five batches of 4 rows, float32
    store = torn.parent.parent.parent
    assert segment_folders(store / "layers") == []  # the torn segment is not one a rerun would read
    monkeypatch.setenv("LAYER_MTEB_CACHE", str(tmp_path / "cache"))
    assert main(run_args(folder, data_dir, tmp_path / "out", limit)) == 0  # the rerun, in this process
    assert list((store / "layers").glob(".tmp-*")) == []
    pd.testing.assert_frame_equal(
        pd.read_csv(tmp_path / "reference" / "scores.csv"), pd.read_csv(tmp_path / "out" / "scores.csv")
    )


def test_an_error_while_writing_a_segment_leaves_no_files(tmp_path: Path) -> None:
    folder = tmp_path / "layers"
    with pytest.raises(KeyboardInterrupt), SegmentWriter(folder, ["a", "b"], n_layers=2, hidden=3) as writer:
        writer.write(0, [0, 1], torch.ones(2, 3))
        raise KeyboardInterrupt
    assert list(folder.iterdir()) == []
    with SegmentWriter(folder, ["a", "b"], n_layers=1, hidden=3) as writer:
        writer.write(0, [1, 0], torch.ones(2, 3))
        target, texts = writer.finish()
    assert texts == ["b", "a"] and list(folder.iterdir()) == [target]
