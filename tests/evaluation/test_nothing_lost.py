"""A user's results are never dropped or deleted on a guess: subset runs add to a run folder, unreadable stored
results are moved aside (only for the errors that mean a torn file), tasks without data stop before any model loads,
and Ctrl-C is one line, exit 130, after which the same command resumes."""

from __future__ import annotations

import json
import logging
import os
import subprocess
import sys

import pandas as pd
import pytest
from conftest import save_tiny_model
from mteb.results import TaskResult

from layer_mteb.cli import main
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


def test_side_files_older_than_new_scores_are_named(tiny_folder, demo_data_dir, tmp_path, caplog):
    out = tmp_path / "run"
    sweep(str(tiny_folder), "STS17", layers="0", config=CONFIG, data_dir=demo_data_dir, output=out, progress=False)
    (out / "selection.csv").write_text("stale\n")
    os.utime(out / "selection.csv", (1, 1))
    with caplog.at_level(logging.WARNING):
        sweep(
            str(tiny_folder),
            "STS17",
            layers="1",
            config=CONFIG,
            data_dir=demo_data_dir,
            output=out,
            progress=False,
        )
    assert any("selection.csv was computed from earlier scores" in r.getMessage() for r in caplog.records)
    assert (out / "selection.csv").read_text() == "stale\n"  # named, never deleted


def _stored_results(out):
    return sorted(p for p in (out / "mteb").rglob("*.json") if p.name != "model_meta.json")


def test_a_torn_result_is_moved_aside_and_recomputed(tiny_folder, demo_data_dir, tmp_path):
    out = tmp_path / "run"
    first = sweep(
        str(tiny_folder), "STS17", layers="0", config=CONFIG, data_dir=demo_data_dir, output=out, progress=False
    )
    [stored] = _stored_results(out)
    torn = stored.read_text()[:50]
    stored.write_text(torn)
    second = sweep(
        str(tiny_folder), "STS17", layers="0", config=CONFIG, data_dir=demo_data_dir, output=out, progress=False
    )
    assert second["main_score"].tolist() == first["main_score"].tolist()
    aside = stored.with_name(stored.name + ".corrupt")
    assert aside.read_text() == torn  # kept for the user to look at


def test_an_unexpected_error_reading_a_result_deletes_nothing(tiny_folder, demo_data_dir, tmp_path, monkeypatch):
    out = tmp_path / "run"
    sweep(str(tiny_folder), "STS17", layers="0", config=CONFIG, data_dir=demo_data_dir, output=out, progress=False)
    [stored] = _stored_results(out)
    content = stored.read_text()

    def changed_format(path, *args, **kwargs):  # what a change in mteb's result format could raise
        raise NotImplementedError("result format 3")

    monkeypatch.setattr(TaskResult, "from_disk", changed_format)
    with pytest.raises(NotImplementedError):
        sweep(
            str(tiny_folder),
            "STS17",
            layers="0",
            config=CONFIG,
            data_dir=demo_data_dir,
            output=out,
            progress=False,
        )
    assert stored.read_text() == content
    assert not list((out / "mteb").rglob("*.corrupt"))


def test_tasks_without_data_stop_before_the_model_loads(tiny_folder, data_dir, monkeypatch):
    def no_load(*args, **kwargs):
        raise AssertionError("the model was loaded before the task check")

    monkeypatch.setattr("layer_mteb.evaluation.sweep.load_model", no_load)
    with pytest.raises(UserError, match=r"no local copy .*SciDocsRR.*--data-dir.*--skip-unavailable") as error:
        sweep(str(tiny_folder), "BIOSSES,SciDocsRR", data_dir=data_dir, progress=False)
    assert "--tasks offline" not in str(error.value)  # it needs the same data folder: no way out


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


# The CLI with Ctrl-C pressed at a fixed point: as mteb starts to score STS17, the second task (BIOSSES is done and
# saved by then). The signal is real and the CLI handles it as it would from a terminal; only its moment is fixed, so
# the test does not depend on how fast the run is.
CTRL_C_DURING_STS17 = """
import signal, sys
import mteb
from layer_mteb.cli import main

evaluate = mteb.evaluate

def evaluate_until_sts17(model, tasks, *args, **kwargs):
    if getattr(getattr(tasks, "metadata", None), "name", None) == "STS17":
        signal.raise_signal(signal.SIGINT)
    return evaluate(model, tasks, *args, **kwargs)

mteb.evaluate = evaluate_until_sts17
sys.exit(main(sys.argv[1:]))
"""


@pytest.mark.slow  # a new interpreter (torch imported again) for the real signal
def test_ctrl_c_is_one_line_and_a_rerun_resumes(tiny_folder, data_dir, tmp_path, monkeypatch):
    out, cache = tmp_path / "run", tmp_path / "cache"
    env = {**os.environ, "LAYER_MTEB_CACHE": str(cache), "HF_HUB_OFFLINE": "1"}
    args = ["run", "--model", str(tiny_folder), "--tasks", "BIOSSES,STS17", "--data-dir", str(data_dir)]
    args += ["--output", str(out), "--batch-size", "16", "--eval-workers", "1"]
    stopped = subprocess.run(
        [sys.executable, "-c", CTRL_C_DURING_STS17, *args], env=env, capture_output=True, text=True
    )
    assert stopped.returncode == 130, stopped.stderr
    lines = [line for line in stopped.stderr.splitlines() if line.strip()]
    assert lines[-1] == "layer-mteb: interrupted; finished units are saved, run the same command again to resume"
    assert not any("Traceback" in line for line in lines)
    saved = pd.read_csv(out / "scores.csv")
    assert saved["task"].tolist() == ["BIOSSES"] * 3 and saved["layer"].tolist() == [0, 1, 2]

    monkeypatch.setenv("LAYER_MTEB_CACHE", str(cache))  # the rerun in this process: the same command, same cache
    assert main(args) == 0
    final = pd.read_csv(out / "scores.csv")
    assert sorted(final["task"]) == ["BIOSSES"] * 3 + ["STS17"] * 3
    pd.testing.assert_frame_equal(final[final["task"] == "BIOSSES"].reset_index(drop=True), saved)
    units = {
        t["task"]: (t["units_reused"], t["units_evaluated"])
        for t in json.loads((out / "run.json").read_text())["tasks"]
    }
    assert units == {"BIOSSES": (3, 0), "STS17": (0, 3)}  # the rerun scored only what the interrupt left undone
