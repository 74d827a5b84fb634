"""One writer per run folder at a time: real processes writing one folder at once keep every row of each, a writer
that waits too long names the process holding the lock, and a killed holder never blocks the next writer."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pandas as pd
import pytest
from conftest import save_tiny_model

from layer_mteb.common.errors import UserError
from layer_mteb.common.folder_lock import LOCK_HOLDER_FILE, LOCK_TIMEOUT_ENV
from layer_mteb.common.run_folder import RunFolder
from layer_mteb.metrics import METRIC_COLUMNS, METRICS_TABLE

#: one process's metric rows, each written by its own read-modify-write of metrics.csv, all starting at ``start``
UPDATER = """
import sys, time
import pandas as pd
from layer_mteb.common.run_folder import RunFolder
from layer_mteb.metrics import METRIC_COLUMNS, METRICS_TABLE

folder, worker, n, start = sys.argv[1], sys.argv[2], int(sys.argv[3]), float(sys.argv[4])
while time.time() < start:
    time.sleep(0.005)
for i in range(n):
    row = {c: 0 for c in METRIC_COLUMNS}
    row.update(model="m", revision="r", texts=f"{worker}-{i}", metric="prompt_entropy", value=float(i))
    RunFolder(folder).update(METRICS_TABLE, pd.DataFrame([row], columns=METRIC_COLUMNS))
"""

#: holds the folder's lock until killed, saying when it has it
HOLDER = """
import sys, time
from layer_mteb.common.run_folder import RunFolder

with RunFolder(sys.argv[1]).locked():
    print("held", flush=True)
    time.sleep(600)
"""


def _env(tmp_path: Path) -> dict[str, str]:
    return {**os.environ, "OMP_NUM_THREADS": "1", "LAYER_MTEB_CACHE": str(tmp_path / "cache")}


@pytest.mark.slow
def test_processes_updating_one_table_at_once_keep_every_row(tmp_path):
    workers, per_worker = 4, 12
    start = time.time() + 8  # every process has imported pandas by then, so their updates overlap
    procs = [
        subprocess.Popen([sys.executable, "-c", UPDATER, str(tmp_path), f"w{w}", str(per_worker), str(start)])
        for w in range(workers)
    ]
    assert [p.wait(timeout=300) for p in procs] == [0] * workers
    written = set(RunFolder(tmp_path).read(METRICS_TABLE)["texts"])
    assert written == {f"w{w}-{i}" for w in range(workers) for i in range(per_worker)}


@pytest.fixture
def holder(tmp_path):
    """A process holding ``tmp_path``'s lock (killed by SIGKILL at the end, if the test has not killed it)."""
    proc = subprocess.Popen([sys.executable, "-c", HOLDER, str(tmp_path)], stdout=subprocess.PIPE, text=True)
    assert proc.stdout.readline().strip() == "held"
    yield proc
    proc.kill()
    proc.wait()


def _row(texts: str) -> pd.DataFrame:
    row = {c: 0 for c in METRIC_COLUMNS}
    row.update(model="m", revision="r", texts=texts, metric="prompt_entropy", value=1.0)
    return pd.DataFrame([row], columns=METRIC_COLUMNS)


def test_a_writer_that_waits_too_long_names_the_holder_in_one_line(tmp_path, holder, monkeypatch):
    monkeypatch.setenv(LOCK_TIMEOUT_ENV, "0.3")
    with pytest.raises(UserError) as raised:
        RunFolder(tmp_path).update(METRICS_TABLE, _row("a"))
    said = str(raised.value)
    assert "\n" not in said
    assert f"is being written by pid {holder.pid} on {socket.gethostname()}" in said
    assert LOCK_TIMEOUT_ENV in said
    assert not (tmp_path / "metrics.csv").exists()


def test_a_killed_holder_never_blocks_the_next_writer(tmp_path, holder, monkeypatch):
    os.kill(holder.pid, signal.SIGKILL)  # no handler, no cleanup: the OS releases its lock
    holder.wait()
    assert (tmp_path / LOCK_HOLDER_FILE).exists()  # its note is left behind, stale
    monkeypatch.setenv(LOCK_TIMEOUT_ENV, "2")
    begun = time.perf_counter()
    RunFolder(tmp_path).update(METRICS_TABLE, _row("a"))
    assert time.perf_counter() - begun < 2
    assert list(RunFolder(tmp_path).read(METRICS_TABLE)["texts"]) == ["a"]
    assert not (tmp_path / LOCK_HOLDER_FILE).exists()  # the next holder's note replaced it, and went on release


def test_a_nested_hold_in_one_process_does_not_wait_on_itself(tmp_path, monkeypatch):
    monkeypatch.setenv(LOCK_TIMEOUT_ENV, "0.3")
    folder = RunFolder(tmp_path / "new")
    with folder.locked():
        folder.update(METRICS_TABLE, _row("a"))  # takes the lock again inside
        assert (folder.path / LOCK_HOLDER_FILE).exists()
    assert list(folder.read(METRICS_TABLE)["texts"]) == ["a"]


def test_a_bad_lock_timeout_is_one_line(tmp_path, monkeypatch):
    monkeypatch.setenv(LOCK_TIMEOUT_ENV, "soon")
    with pytest.raises(UserError, match=f"{LOCK_TIMEOUT_ENV} must be a number of seconds"):
        RunFolder(tmp_path).update(METRICS_TABLE, _row("a"))


# --- whole commands at once: two runs of different tasks, a metrics beside a run ---

TASKS = ("STS17", "AmazonCounterfactualClassification")  # shipped with the package: no data folder needed


@pytest.fixture(scope="module")
def tiny_folder(tmp_path_factory, bert_tokenizer):
    return save_tiny_model("gpt2", bert_tokenizer, tmp_path_factory.mktemp("writers") / "tiny-gpt2")


def _cli(*args: str) -> list[str]:
    return [sys.executable, "-m", "layer_mteb.cli", *args]


def _run(model: Path, task: str, out: Path, *extra: str) -> list[str]:
    return _cli(
        "run",
        "--model",
        str(model),
        "--tasks",
        task,
        "--output",
        str(out),
        "--batch-size",
        "32",
        "--layers",
        "1",
        *extra,
    )


def _at_once(commands: list[list[str]], env: dict[str, str]) -> None:
    procs = [
        subprocess.Popen(c, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True) for c in commands
    ]
    outputs = [p.communicate(timeout=900)[0] for p in procs]
    for proc, said in zip(procs, outputs, strict=True):
        assert proc.returncode == 0, said


def _scores(folder: Path) -> pd.DataFrame:
    columns = ["task", "subset", "split", "layer", "main_score"]
    return pd.read_csv(folder / "scores.csv")[columns].sort_values(columns[:4]).reset_index(drop=True)


@pytest.mark.slow
def test_two_runs_of_different_tasks_into_one_folder_keep_both(tiny_folder, tmp_path):
    env = _env(tmp_path)
    shared = tmp_path / "shared"
    _at_once([_run(tiny_folder, task, shared, "--no-vector-cache") for task in TASKS], env)
    # both tasks by one lone run, into a folder of its own (a task's scores do not depend on the tasks beside it)
    done = subprocess.run(_run(tiny_folder, ",".join(TASKS), tmp_path / "alone", "--no-vector-cache"), env=env)
    assert done.returncode == 0
    together = _scores(shared)
    assert set(together["task"]) == set(TASKS)
    pd.testing.assert_frame_equal(together, _scores(tmp_path / "alone"))
    assert sorted(entry["task"] for entry in RunFolder(shared).log()) == sorted(TASKS)
    assert not (shared / LOCK_HOLDER_FILE).exists()


@pytest.mark.slow
def test_a_metrics_beside_a_run_keeps_the_rows_of_both(tiny_folder, tmp_path):
    env = _env(tmp_path)
    prompts = tmp_path / "prompts.txt"
    prompts.write_text("".join(f"a short prompt number {i} about layers\n" for i in range(40)))
    shared = tmp_path / "shared"
    metrics = _cli("metrics", "--model", str(tiny_folder), "--texts", str(prompts), "--views", "0", "--output")
    _at_once([_run(tiny_folder, "STS17", shared, "--task-metrics"), [*metrics, str(shared)]], env)
    # the same two commands one after the other, each into its own folder
    for command, out in ((_run(tiny_folder, "STS17", tmp_path / "run", "--task-metrics"), None), (metrics, "m")):
        argv = command if out is None else [*command, str(tmp_path / out)]
        done = subprocess.run(argv, env=env, capture_output=True)
        assert done.returncode == 0, done.stderr
    together = RunFolder(shared).read(METRICS_TABLE)
    alone = pd.concat(
        [RunFolder(tmp_path / "run").read(METRICS_TABLE), RunFolder(tmp_path / "m").read(METRICS_TABLE)],
        ignore_index=True,
    )
    assert len(set(together["texts"])) == 2 and set(together["texts"]) == set(alone["texts"])
    key = ["texts", "metric", "layer"]
    pd.testing.assert_frame_equal(
        together.sort_values(key).reset_index(drop=True)[[*key, "value"]],
        alone.sort_values(key).reset_index(drop=True)[[*key, "value"]],
    )
    assert _scores(shared).equals(_scores(tmp_path / "run"))
