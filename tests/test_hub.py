"""A hub model id with no reachable hub (HF_HUB_OFFLINE unset) fails in one line, without huggingface_hub's retries."""

from __future__ import annotations

import os
import subprocess
import sys
import time

from layer_mteb.model.hub import hub_reachable

# a closed local port stands in for a hub without network, here and on a machine that has one
UNREACHABLE = "http://127.0.0.1:9"


def test_a_closed_endpoint_is_unreachable_within_the_probe_timeout():
    env = {**os.environ, "HF_ENDPOINT": UNREACHABLE}
    code = "from layer_mteb.model.hub import hub_reachable; print(hub_reachable(timeout=1.0))"
    started = time.monotonic()
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=60)
    assert done.stdout.strip() == "False", done.stderr
    assert time.monotonic() - started < 30
    assert isinstance(hub_reachable(timeout=0.5), bool)  # whatever this machine's network, an answer, not an error


def test_hub_model_id_without_a_hub_is_one_line_and_no_retries(data_dir, tmp_path):
    env = {k: v for k, v in os.environ.items() if k != "HF_HUB_OFFLINE"}
    env["HF_ENDPOINT"] = UNREACHABLE
    args = ["run", "--model", "org/name", "--tasks", "BIOSSES", "--data-dir", str(data_dir)]
    done = subprocess.run(
        [sys.executable, "-m", "layer_mteb.cli", *args, "--output", str(tmp_path / "run")],
        capture_output=True,
        text=True,
        env=env,
        timeout=300,
    )
    assert done.returncode == 2, done.stderr
    assert "Retry" not in done.stderr, done.stderr
    lines = done.stderr.strip().splitlines()
    assert lines[-1].startswith("layer-mteb: error: cannot load model 'org/name'"), done.stderr
    assert sum("cannot be reached" in line for line in lines) == 1, done.stderr
    assert not (tmp_path / "run" / "scores.csv").exists()
