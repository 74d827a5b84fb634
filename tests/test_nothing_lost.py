"""A user's results are never dropped or deleted on a guess: subset runs add to a run folder, unreadable stored
results are moved aside (only for the errors that mean a torn file), tasks without data stop before any model loads,
and Ctrl-C is one line, exit 130, after which the same command resumes."""

from __future__ import annotations

import logging
import os
import signal
import subprocess
import sys
import time

import pandas as pd
import pytest
from conftest import save_tiny_model
from mteb.results import TaskResult

from layer_mteb.common.config import EncodeConfig
from layer_mteb.common.errors import UserError
from layer_mteb.evaluation.sweep import sweep

CONFIG = EncodeConfig(batch_size=16)


@pytest.fixture(scope="module")
def tiny_folder(tmp_path_factory, bert_tokenizer):
    return save_tiny_model("gpt2", bert_tokenizer, tmp_path_factory.mktemp("lost") / "tiny-gpt2")


def test_a_subset_run_keeps_the_other_tasks_rows(tiny_folder, data_dir, tmp_path):
    out = tmp_path / "run"
    full = sweep(str(tiny_folder), "BIOSSES,STS17", config=CONFIG, data_dir=data_dir, output=out, progress=False)
    assert set(full["task"]) == {"BIOSSES", "STS17"}
    again = sweep(str(tiny_folder), "BIOSSES", layers="0", config=CONFIG, data_dir=data_dir, output=out, progress=False)
    assert set(again["task"]) == {"BIOSSES"}
    table = pd.read_csv(out / "scores.csv")
    assert len(table) == len(full)  # the BIOSSES layer-0 row was replaced, every other row kept
    pd.testing.assert_frame_equal(
        table.sort_values(["task", "layer"]).reset_index(drop=True)[["task", "layer", "main_score"]],
        full.sort_values(["task", "layer"]).reset_index(drop=True)[["task", "layer", "main_score"]],
    )


def test_side_files_older_than_new_scores_are_named(tiny_folder, data_dir, tmp_path, caplog):
    out = tmp_path / "run"
    sweep(str(tiny_folder), "BIOSSES", layers="0", config=CONFIG, data_dir=data_dir, output=out, progress=False)
    (out / "selection.csv").write_text("stale\n")
    os.utime(out / "selection.csv", (1, 1))
    with caplog.at_level(logging.WARNING):
        sweep(str(tiny_folder), "BIOSSES", layers="1", config=CONFIG, data_dir=data_dir, output=out, progress=False)
    assert any("selection.csv was computed from earlier scores" in r.getMessage() for r in caplog.records)
    assert (out / "selection.csv").read_text() == "stale\n"  # named, never deleted


def _stored_results(out):
    return sorted(p for p in (out / "mteb").rglob("*.json") if p.name != "model_meta.json")


def test_a_torn_result_is_moved_aside_and_recomputed(tiny_folder, data_dir, tmp_path):
    out = tmp_path / "run"
    first = sweep(str(tiny_folder), "BIOSSES", layers="0", config=CONFIG, data_dir=data_dir, output=out, progress=False)
    [stored] = _stored_results(out)
    torn = stored.read_text()[:50]
    stored.write_text(torn)
    second = sweep(
        str(tiny_folder), "BIOSSES", layers="0", config=CONFIG, data_dir=data_dir, output=out, progress=False
    )
    assert second["main_score"].tolist() == first["main_score"].tolist()
    aside = stored.with_name(stored.name + ".corrupt")
    assert aside.read_text() == torn  # kept for the user to look at


def test_an_unexpected_error_reading_a_result_deletes_nothing(tiny_folder, data_dir, tmp_path, monkeypatch):
    out = tmp_path / "run"
    sweep(str(tiny_folder), "BIOSSES", layers="0", config=CONFIG, data_dir=data_dir, output=out, progress=False)
    [stored] = _stored_results(out)
    content = stored.read_text()

    def changed_format(path, *args, **kwargs):  # what a change in mteb's result format could raise
        raise NotImplementedError("result format 3")

    monkeypatch.setattr(TaskResult, "from_disk", changed_format)
    with pytest.raises(NotImplementedError):
        sweep(str(tiny_folder), "BIOSSES", layers="0", config=CONFIG, data_dir=data_dir, output=out, progress=False)
    assert stored.read_text() == content
    assert not list((out / "mteb").rglob("*.corrupt"))


def test_tasks_without_data_stop_before_the_model_loads(data_dir, tmp_path):
    missing_model = tmp_path / "no-such-model"  # never reached: the task check comes first
    with pytest.raises(UserError, match=r"no local copy .*SciDocsRR.*--tasks offline"):
        sweep(str(missing_model), "BIOSSES,SciDocsRR", data_dir=data_dir, progress=False)


def test_skip_unavailable_runs_the_tasks_with_data(tiny_folder, data_dir, tmp_path):
    table = sweep(
        str(tiny_folder),
        "BIOSSES,SciDocsRR",
        layers="0",
        config=CONFIG,
        data_dir=data_dir,
        skip_unavailable=True,
        progress=False,
    )
    assert set(table["task"]) == {"BIOSSES"}


def test_ctrl_c_is_one_line_and_a_rerun_resumes(tiny_folder, data_dir, tmp_path):
    out, cache = tmp_path / "run", tmp_path / "cache"
    env = {**os.environ, "LAYER_MTEB_CACHE": str(cache), "HF_HUB_OFFLINE": "1"}
    argv = [sys.executable, "-m", "layer_mteb.cli", "run", "--model", str(tiny_folder), "--tasks", "BIOSSES,STS17"]
    argv += ["--data-dir", str(data_dir), "--output", str(out), "--batch-size", "16", "--eval-workers", "1"]
    process = subprocess.Popen(argv, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 300
    while not (out / "scores.csv").exists() and process.poll() is None and time.monotonic() < deadline:
        time.sleep(0.05)
    assert process.poll() is None, "the run ended before it could be interrupted"
    process.send_signal(signal.SIGINT)
    _, stderr = process.communicate(timeout=120)
    assert process.returncode == 130
    lines = [line for line in stderr.splitlines() if line.strip()]
    assert lines[-1].startswith("layer-mteb: interrupted") and "resume" in lines[-1]
    assert not any("Traceback" in line for line in lines)
    done = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr
    assert set(pd.read_csv(out / "scores.csv")["task"]) == {"BIOSSES", "STS17"}
