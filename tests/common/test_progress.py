"""Progress reaches logs: off a terminal (stderr a pipe, as under SLURM) the CLI logs plain progress lines."""

from __future__ import annotations

import logging

import pandas as pd
import pytest
from _in_process import run_main
from conftest import save_tiny_model

from layer_mteb.cli import main
from layer_mteb.common.progress import LogProgress


@pytest.fixture(scope="module")
def tiny_folder(tmp_path_factory, bert_tokenizer):
    folder = tmp_path_factory.mktemp("models") / "tiny-gpt2"
    return save_tiny_model("gpt2", bert_tokenizer, folder)


def test_run_logs_progress_lines_when_stderr_is_a_pipe(tiny_folder, data_dir, tmp_path, monkeypatch, capfd, caplog):
    """Run in this process, where stderr is pytest's capture, not a terminal: the lines a terminal would see are the
    ones the CLI's logging shows (tests/_in_process.py); that they reach a real process's stderr, test_quiet checks."""
    monkeypatch.setenv("LAYER_MTEB_PROGRESS_SECONDS", "0")
    # a cache of its own: vectors stored by another test of the same tiny model would leave nothing to encode
    monkeypatch.setenv("LAYER_MTEB_CACHE", str(tmp_path / "cache"))
    args = ["run", "--model", str(tiny_folder), "--tasks", "BIOSSES", "--data-dir", str(data_dir)]
    done = run_main([*args, "--layers", "0,1,2", "--output", str(tmp_path / "run")], capfd, caplog)
    assert done.returncode == 0, done.stderr
    lines = done.lines
    for layer in (1, 2, 3):
        assert any(f"task BIOSSES: {layer}/3 layers scored (" in line for line in lines), done.stderr
    assert any("tasks: 1/1 done (" in line for line in lines), done.stderr
    assert any("encoding: " in line and " texts (" in line for line in lines), done.stderr


def test_progress_lines_are_rate_bounded(caplog):
    """With a long interval only the last update is logged (it completes the work); close adds no duplicate."""
    caplog.set_level(logging.INFO, logger="layer_mteb.common.progress")
    bar = LogProgress(total=5, desc="task T", unit="layers scored", interval=3600)
    for _ in range(5):
        bar.update()
    bar.close()
    assert [r.getMessage()[: len("task T: 5/5 layers scored")] for r in caplog.records] == ["task T: 5/5 layers scored"]


def test_every_update_is_logged_with_no_interval(caplog):
    caplog.set_level(logging.INFO, logger="layer_mteb.common.progress")
    bar = LogProgress(total=100, desc="encoding", unit="texts", interval=0)
    for _ in range(3):
        bar.update(32)
    bar.close()  # stopped early: the last count is already logged, close adds nothing
    counts = [r.getMessage().split(" ")[1] for r in caplog.records]
    assert counts == ["32/100", "64/100", "96/100"]


@pytest.mark.parametrize(
    ("extra", "expected"),
    [
        ([], "12 prompts, 4 views x 12 prompts, 3 layers (60 texts to encode)"),
        (["--full-protocol", "--augment-prompts", "5"], "12 prompts, 16 views x 5 prompts, 3 layers (92 texts"),
    ],
)
def test_metrics_states_its_sizes_before_encoding(tiny_folder, tmp_path, caplog, extra, expected):
    """The quick defaults (4 views) and --full-protocol (16 views), an explicit size winning over either."""
    texts = tmp_path / "texts.txt"
    texts.write_text("\n".join(f"prompt number {i} has a few words in it" for i in range(12)) + "\n")
    args = ["metrics", "--model", str(tiny_folder), "--texts", str(texts), "--output", str(tmp_path / "run")]
    caplog.set_level(logging.INFO, logger="layer_mteb")
    assert main([*args, *extra]) == 0
    assert any(expected in record.getMessage() for record in caplog.records), caplog.text


def test_several_comma_separated_texts_share_one_model_load_and_equal_separate_runs(tiny_folder, tmp_path):
    files = []
    for name in ("first", "second"):
        path = tmp_path / f"{name}.txt"
        path.write_text("\n".join(f"{name} prompt {i} has a few more words in it" for i in range(10)) + "\n")
        files.append(str(path))
    common = ["metrics", "--model", str(tiny_folder), "--views", "0"]
    assert main([*common, "--texts", ",".join(files), "--output", str(tmp_path / "together")]) == 0
    for path in files:
        assert main([*common, "--texts", path, "--output", str(tmp_path / "apart")]) == 0
    together, apart = (pd.read_csv(tmp_path / run / "metrics.csv") for run in ("together", "apart"))
    assert set(together["texts"]) == {"file:first.txt", "file:second.txt"}
    order = ["texts", "metric", "layer"]
    pd.testing.assert_frame_equal(
        together.sort_values(order).reset_index(drop=True), apart.sort_values(order).reset_index(drop=True)
    )
