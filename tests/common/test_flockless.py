"""A run folder on a file system without ``flock`` (Lustre mounted without ``-o flock``; faked here: every ``flock``
call fails with ``ENOSYS``, as there): filelock falls back to a marker file, and the project relies on that fallback
keeping every row of two writers and on a killed holder's marker being taken over at once, not after the timeout.
Both hold from the filelock version pyproject.toml declares on (CI runs this file at that version too, .ci/run)."""

from __future__ import annotations

import errno
import fcntl
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pandas as pd
import pytest

from layer_mteb.common.errors import UserError
from layer_mteb.common.folder_lock import (
    FILELOCK_FALLBACK_WARNING,
    LOCK_FILE,
    LOCK_HOLDER_FILE,
    LOCK_TIMEOUT_ENV,
    lacks_flock,
)
from layer_mteb.common.run_folder import RunFolder
from layer_mteb.metrics import METRIC_COLUMNS, METRICS_TABLE

#: the machine faked: every flock refused as on a file system that has none
NO_FLOCK = """
import errno, fcntl, os

def _refused(fd, operation):
    raise OSError(errno.ENOSYS, os.strerror(errno.ENOSYS))

fcntl.flock = _refused
"""

#: one writer's metric rows, each its own read-modify-write of metrics.csv, started when the file ``go`` appears
WRITER = (
    NO_FLOCK
    + """
import sys, time
import pandas as pd
from layer_mteb.common.run_folder import RunFolder
from layer_mteb.metrics import METRIC_COLUMNS, METRICS_TABLE

folder, worker, n, go = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4]
print("ready", flush=True)
while not os.path.exists(go):
    time.sleep(0.002)
for i in range(n):
    row = {c: 0 for c in METRIC_COLUMNS}
    row.update(model="m", revision="r", texts=f"{worker}-{i}", metric="prompt_entropy", value=float(i))
    RunFolder(folder).update(METRICS_TABLE, pd.DataFrame([row], columns=METRIC_COLUMNS))
"""
)

#: holds the folder's lock until killed, saying when it has it
HOLDER = (
    NO_FLOCK
    + """
import sys, time
from layer_mteb.common.run_folder import RunFolder

with RunFolder(sys.argv[1]).locked():
    print("held", flush=True)
    time.sleep(600)
"""
)


def _refused(fd, operation):
    raise OSError(errno.ENOSYS, os.strerror(errno.ENOSYS))


def _env(tmp_path: Path) -> dict[str, str]:
    return {**os.environ, "OMP_NUM_THREADS": "1", "LAYER_MTEB_CACHE": str(tmp_path / "cache")}


def _row(texts: str) -> pd.DataFrame:
    row = {c: 0 for c in METRIC_COLUMNS}
    row.update(model="m", revision="r", texts=texts, metric="prompt_entropy", value=1.0)
    return pd.DataFrame([row], columns=METRIC_COLUMNS)


def test_a_file_system_without_flock_is_told_apart(tmp_path, monkeypatch):
    assert not lacks_flock(tmp_path)
    monkeypatch.setattr(fcntl, "flock", _refused)
    assert lacks_flock(tmp_path)
    assert list(tmp_path.iterdir()) == []  # the probe leaves nothing behind, the lock file least of all


@pytest.mark.slow  # two interpreters importing pandas
def test_two_writers_without_flock_keep_every_row_and_each_says_so_once_in_its_own_words(tmp_path):
    folder, go, per_writer = tmp_path / "run", tmp_path / "go", 12
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", WRITER, str(folder), f"w{w}", str(per_writer), str(go)],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env=_env(tmp_path),
        )
        for w in range(2)
    ]
    assert [p.stdout.readline().strip() for p in procs] == ["ready", "ready"]
    go.touch()  # both take the lock for the first time at once: where a fallback could drop the other's marker
    errors = [p.communicate(timeout=300)[1] for p in procs]
    assert [p.returncode for p in procs] == [0, 0], errors
    written = set(RunFolder(folder).read(METRICS_TABLE)["texts"])
    assert written == {f"w{w}-{i}" for w in range(2) for i in range(per_writer)}
    for err in errors:
        lines = err.strip().splitlines()
        assert len(lines) == 1 and "its file system has no flock" in lines[0] and str(folder) in lines[0], err
        assert FILELOCK_FALLBACK_WARNING not in err and "Traceback" not in err


@pytest.mark.slow  # an interpreter importing pandas
def test_without_flock_a_live_holder_is_waited_for_and_a_killed_ones_claim_is_taken_over_at_once(tmp_path, monkeypatch):
    holder = subprocess.Popen(
        [sys.executable, "-c", HOLDER, str(tmp_path)], stdout=subprocess.PIPE, text=True, env=_env(tmp_path)
    )
    try:
        assert holder.stdout.readline().strip() == "held"
        # the claim is the marker file, naming its holder (where the OS's flock held it, it would name nobody)
        assert (tmp_path / LOCK_FILE).read_text().split()[0] == str(holder.pid)
        monkeypatch.setattr(fcntl, "flock", _refused)
        monkeypatch.setenv(LOCK_TIMEOUT_ENV, "1")
        with pytest.raises(UserError, match=f"being written by pid {holder.pid} "):
            RunFolder(tmp_path).update(
                METRICS_TABLE, _row("while held")
            )  # a first try may not take a live holder's claim
    finally:
        holder.send_signal(signal.SIGKILL)
        holder.wait()
    assert (tmp_path / LOCK_FILE).exists() and (tmp_path / LOCK_HOLDER_FILE).exists()  # left behind by the dead
    monkeypatch.setenv(LOCK_TIMEOUT_ENV, "120")
    started = time.monotonic()
    RunFolder(tmp_path).update(METRICS_TABLE, _row("after"))
    assert time.monotonic() - started < 10  # taken over at once, far from the 120 s timeout
    assert set(RunFolder(tmp_path).read(METRICS_TABLE)["texts"]) == {"after"}
    assert not (tmp_path / LOCK_FILE).exists() and not (tmp_path / LOCK_HOLDER_FILE).exists()
