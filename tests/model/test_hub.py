"""The hub probe: an open endpoint is reachable, a refusing one is not and switches to offline mode (never over an
explicit HF_HUB_OFFLINE); a hub model id with no reachable hub fails in one line, without huggingface_hub's retries."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
from collections.abc import Iterator

import pytest

from layer_mteb.common.hub import hub_reachable, offline_unless_reachable


@pytest.fixture
def endpoints() -> Iterator[tuple[str, str]]:
    """A local port that accepts connections and one that refuses them (bound, never listening): a hub with and
    without network, the same on every machine."""
    with socket.socket() as listening, socket.socket() as refusing:
        listening.bind(("127.0.0.1", 0))
        listening.listen()
        refusing.bind(("127.0.0.1", 0))
        yield tuple(f"http://127.0.0.1:{s.getsockname()[1]}" for s in (listening, refusing))


def test_the_probe_tells_an_open_endpoint_from_a_closed_one(endpoints, monkeypatch):
    from huggingface_hub import constants

    open_endpoint, closed_endpoint = endpoints
    monkeypatch.setattr(constants, "ENDPOINT", open_endpoint)
    assert hub_reachable(timeout=5.0) is True
    monkeypatch.setattr(constants, "ENDPOINT", closed_endpoint)
    assert hub_reachable(timeout=5.0) is False


def test_an_unreachable_hub_switches_to_offline_mode(endpoints, monkeypatch):
    from huggingface_hub import constants

    _, closed_endpoint = endpoints
    monkeypatch.setattr(constants, "ENDPOINT", closed_endpoint)
    monkeypatch.setattr(constants, "HF_HUB_OFFLINE", False)
    monkeypatch.delenv("HF_HUB_OFFLINE")
    offline_unless_reachable()
    assert os.environ["HF_HUB_OFFLINE"] == "1" and constants.HF_HUB_OFFLINE is True


def test_an_explicit_setting_is_never_probed(endpoints, monkeypatch):
    from huggingface_hub import constants

    _, closed_endpoint = endpoints
    monkeypatch.setattr(constants, "ENDPOINT", closed_endpoint)
    monkeypatch.setattr(constants, "HF_HUB_OFFLINE", False)
    monkeypatch.setenv("HF_HUB_OFFLINE", "0")  # the user asked for the hub: no probe overrides that
    offline_unless_reachable()
    assert os.environ["HF_HUB_OFFLINE"] == "0" and constants.HF_HUB_OFFLINE is False


@pytest.mark.slow  # a new interpreter (torch imported again): the hub's settings are read at import
def test_hub_model_id_without_a_hub_is_one_line_and_no_retries(endpoints, data_dir, tmp_path):
    env = {k: v for k, v in os.environ.items() if k != "HF_HUB_OFFLINE"}
    env["HF_ENDPOINT"] = endpoints[1]  # the refusing one
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
