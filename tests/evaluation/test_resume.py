"""A sweep killed (SIGKILL) after any unit and started again ends with the same table, recomputing nothing finished;
two runs with the same settings give bit-identical tables."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys

import pandas as pd
import pytest
from conftest import save_tiny_model

from layer_mteb.cli import main
from layer_mteb.common.config import EncodeConfig
from layer_mteb.evaluation.sweep import sweep

TASKS = "BIOSSES,STS17,TwitterSemEval2015"


@pytest.fixture(scope="module")
def tiny_folder(tmp_path_factory, bert_tokenizer):
    folder = tmp_path_factory.mktemp("resume") / "tiny-neox"
    return save_tiny_model("gpt_neox", bert_tokenizer, folder)


#: ``layer-mteb run`` that kills itself (SIGKILL, nothing cleaned up) as soon as its scores table holds ``rows``
#: rows: the kill lands right after a unit is written, at the unit asked for, without watching the process from here
KILLED_AFTER = """
import os, signal, sys
from layer_mteb.cli.main import main
from layer_mteb.common.run_folder import RunFolder

rows, write = int(sys.argv[1]), RunFolder.write_scores

def write_then_die(self, frame, *args, **kwargs):
    path = write(self, frame, *args, **kwargs)
    if len(frame) >= rows:
        os.kill(os.getpid(), signal.SIGKILL)
    return path

RunFolder.write_scores = write_then_die
sys.exit(main(sys.argv[2:]))
"""


def run_args(folder, data_dir, out) -> list[str]:
    """``layer-mteb run`` of the three tasks."""
    argv = ["run", "--model", str(folder), "--tasks", TASKS, "--data-dir", str(data_dir), "--output", str(out)]
    return [*argv, "--batch-size", "16"]


def start(folder, data_dir, out, cache, kill_after_rows: int):
    """``layer-mteb run`` in a process of its own, killed once ``kill_after_rows`` rows are written."""
    env = {**os.environ, "LAYER_MTEB_CACHE": str(cache), "HF_HUB_OFFLINE": "1"}
    argv = [sys.executable, "-c", KILLED_AFTER, str(kill_after_rows), *run_args(folder, data_dir, out)]
    return subprocess.Popen(argv, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)


def rows_written(out) -> int:
    try:
        return len(pd.read_csv(out / "scores.csv"))
    except (FileNotFoundError, pd.errors.EmptyDataError):
        return 0


@pytest.mark.slow
@pytest.mark.timeout(900)
def test_sweep_killed_at_several_points_resumes_to_the_uninterrupted_table(
    tiny_folder, data_dir, tmp_path, monkeypatch
):
    """SIGKILL right after the 1st, 4th and 7th of 9 (task, layer) units is written, restarting each time, then let
    it finish (the uninterrupted run and the last one in this process: only the killed ones need their own)."""
    reference_out = tmp_path / "reference"
    monkeypatch.setenv("LAYER_MTEB_CACHE", str(tmp_path / "reference-cache"))
    assert main(run_args(tiny_folder, data_dir, reference_out)) == 0
    out, cache = tmp_path / "out", tmp_path / "cache"
    rows_before_kill = 0
    for kill_after_rows in (1, 4, 7):
        killed = start(tiny_folder, data_dir, out, cache, kill_after_rows)
        assert killed.wait(timeout=300) == -signal.SIGKILL, killed.stderr.read()
        assert rows_written(out) == kill_after_rows > rows_before_kill  # killed where asked; nothing finished lost
        rows_before_kill = rows_written(out)
    before = pd.read_csv(out / "scores.csv")
    finished_tasks = {t for t, n in before.groupby("task").size().items() if n == 3}

    monkeypatch.setenv("LAYER_MTEB_CACHE", str(cache))
    assert main(run_args(tiny_folder, data_dir, out)) == 0
    expected = pd.read_csv(reference_out / "scores.csv")
    pd.testing.assert_frame_equal(pd.read_csv(out / "scores.csv"), expected, check_exact=True)
    log = {entry["task"]: entry for entry in json.loads((out / "run.json").read_text())["tasks"]}
    assert sum(e["units_reused"] for e in log.values()) >= len(before)
    assert finished_tasks  # the kills left at least one whole task behind
    for task in finished_tasks:
        assert log[task]["texts_encoded"] == 0 and log[task]["units_evaluated"] == 0


@pytest.mark.slow  # two full sweeps including a classification task
def test_same_settings_give_bit_identical_tables(tiny_folder, data_dir):
    from layer_mteb.model.loading import load_model

    config = EncodeConfig(batch_size=8)
    tasks = "STS17,TwitterSemEval2015,AmazonCounterfactualClassification"
    first, second = (
        sweep(
            load_model(str(tiny_folder), config),  # a fresh load each time
            tasks,
            config=config,
            data_dir=data_dir,
            vector_cache=False,
            progress=False,
        )
        for _ in range(2)
    )
    pd.testing.assert_frame_equal(first, second, check_exact=True)
