"""The one hub decision: an open endpoint is reachable, a refusing one is not and switches the process offline (never
over an explicit HF_HUB_OFFLINE); the hub is asked only where something may come from it; with it unreachable every
command and public function loads the shipped, local or cached copy, and anything else is one line saying what to do,
in seconds, without huggingface_hub's retries."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from conftest import minilm_folder

from layer_mteb.common import hub
from layer_mteb.common.errors import UserError
from layer_mteb.common.hub import hub_reachable, offline_unless_reachable

#: heavy libraries a refusal decided from the name and the cache must not have loaded
HEAVY = ("torch", "transformers", "mteb", "datasets")


@pytest.fixture
def endpoints() -> Iterator[tuple[str, str]]:
    """A local port that accepts connections and one that refuses them (bound, never listening): a hub with and
    without network, the same on every machine."""
    with socket.socket() as listening, socket.socket() as refusing:
        listening.bind(("127.0.0.1", 0))
        listening.listen()
        refusing.bind(("127.0.0.1", 0))
        yield tuple(f"http://127.0.0.1:{s.getsockname()[1]}" for s in (listening, refusing))


def undecided(monkeypatch, endpoint: str) -> None:
    """This process as a user's without ``HF_HUB_OFFLINE``, with the hub at ``endpoint`` and not probed yet."""
    from huggingface_hub import constants

    monkeypatch.setattr(constants, "ENDPOINT", endpoint)
    monkeypatch.setattr(constants, "HF_HUB_OFFLINE", False)
    monkeypatch.delenv("HF_HUB_OFFLINE")
    monkeypatch.setattr(hub, "_probed", False)
    monkeypatch.setattr(hub, "_unreachable", False)


@pytest.fixture
def unreachable_hub(endpoints, monkeypatch) -> str:
    """The hub refusing connections, nobody having set ``HF_HUB_OFFLINE``: the refusing endpoint's host and port."""
    undecided(monkeypatch, endpoints[1])
    return endpoints[1].removeprefix("http://")


@pytest.fixture
def counted_hub(monkeypatch) -> Iterator[socket.socket]:
    """A hub that answers, whose listening socket tells how many probes connected (each is accepted and counted)."""
    with socket.socket() as listening:
        listening.bind(("127.0.0.1", 0))
        listening.listen(16)
        listening.setblocking(False)
        undecided(monkeypatch, f"http://127.0.0.1:{listening.getsockname()[1]}")
        yield listening


def probes(listening: socket.socket) -> int:
    """The connections made to ``listening`` since last asked."""
    count = 0
    while True:
        try:
            connection, _ = listening.accept()
        except BlockingIOError:
            return count
        connection.close()
        count += 1


def test_the_probe_tells_an_open_endpoint_from_a_closed_one(endpoints, monkeypatch):
    from huggingface_hub import constants

    open_endpoint, closed_endpoint = endpoints
    monkeypatch.setattr(constants, "ENDPOINT", open_endpoint)
    assert hub_reachable(timeout=5.0) is True
    monkeypatch.setattr(constants, "ENDPOINT", closed_endpoint)
    assert hub_reachable(timeout=5.0) is False


def test_an_unreachable_hub_switches_to_offline_mode(unreachable_hub, monkeypatch):
    from huggingface_hub import constants

    offline_unless_reachable()
    assert os.environ["HF_HUB_OFFLINE"] == "1" and constants.HF_HUB_OFFLINE is True
    assert hub.offline_reason() == f"the hub ({unreachable_hub}) cannot be reached"


def test_an_explicit_setting_is_never_probed(endpoints, monkeypatch):
    from huggingface_hub import constants

    _, closed_endpoint = endpoints
    monkeypatch.setattr(constants, "ENDPOINT", closed_endpoint)
    monkeypatch.setattr(constants, "HF_HUB_OFFLINE", False)
    monkeypatch.setenv("HF_HUB_OFFLINE", "0")  # the user asked for the hub: no probe overrides that
    offline_unless_reachable()
    assert os.environ["HF_HUB_OFFLINE"] == "0" and constants.HF_HUB_OFFLINE is False


def test_the_hub_is_probed_once_and_only_where_something_may_come_from_it(counted_hub, data_dir, tmp_path):
    """Packaged models, model folders, local and custom data never ask; a task with no copy, or a hub id, asks once
    for the whole process."""
    from layer_mteb.evaluation.plan import task_units
    from layer_mteb.evaluation.request import RunRequest
    from layer_mteb.metrics.texts import task_texts
    from layer_mteb.model.names import check_loadable

    local = RunRequest("minilm-l6", "STS12,BIOSSES", data_dir=data_dir, output=tmp_path / "a")
    task_units(local.tasks, local.split, local.data_dir)
    check_loadable(str(minilm_folder()))
    task_texts("STS12", data_dir)  # the texts of `metrics --texts task:STS12`, `cost`, the agreement curves
    assert probes(counted_hub) == 0
    hub_only = RunRequest("minilm-l6", "SciFact", data_dir=data_dir, output=tmp_path / "b")  # no copy of its data
    assert [origin for _, origin, _ in task_units(hub_only.tasks, hub_only.split, hub_only.data_dir)] == ["hub"]
    assert probes(counted_hub) == 1
    # the hub answered: the model may load (the paper's protocol: no pipeline files asked of this fake hub)
    RunRequest("org/name", "STS12", data_dir=data_dir, output=tmp_path / "c", protocol="paper")
    assert probes(counted_hub) == 0


def test_with_the_hub_unreachable_the_shipped_tasks_load_and_others_are_one_line(unreachable_hub, tmp_path):
    from layer_mteb.tasks.catalog import load_named_task, load_tasks

    empty = tmp_path / "empty-data"
    empty.mkdir()
    (sts17,) = load_tasks("STS17", data_dir=empty)
    assert sts17.data_loaded and len(sts17.dataset["en-en"]["test"]) == 250  # the shipped copy
    said = (
        f"the hub ({unreachable_hub}) cannot be reached and 2 task(s) have no local copy in {empty}: BIOSSES, SciFact; "
        "give a data folder holding a folder per task (--data-dir DIR or $LAYER_MTEB_DATA), or run where the hub "
        "answers (the package ships the data of the demo suite only)"
    )
    with pytest.raises(UserError) as refused:
        load_tasks("STS17,BIOSSES,SciFact", data_dir=empty)
    assert str(refused.value) == said
    with pytest.raises(UserError, match=r"cannot be reached and 1 task\(s\) have no local copy .*: BIOSSES;"):
        load_named_task("BIOSSES", empty)  # the texts of `metrics --texts task:BIOSSES`, `cost`, agreement


def test_with_the_hub_unreachable_a_hub_model_is_one_line_from_every_public_loader(unreachable_hub):
    import layer_mteb

    said = (
        rf"cannot load model 'org/name': the hub \({unreachable_hub}\) cannot be reached and it is not in the hub "
        r"cache \(.*\); use a packaged model \(minilm-l6, mpnet-base, smollm2-135m, gemma3-270m\) or a local folder, "
        r"or run where the hub answers \(`hf download org/name` fetches it into the cache\)$"
    )
    for load in (
        lambda: layer_mteb.load_model("org/name"),
        lambda: layer_mteb.LayerEncoder.from_model("org/name"),
        lambda: layer_mteb.sweep("org/name", "STS17", layers=[0]),
    ):
        with pytest.raises(UserError, match=said):
            load()


def unreachable_env(closed_endpoint: str, tmp_path: Path) -> dict[str, str]:
    """A new user's environment: no ``HF_HUB_OFFLINE``, the hub refusing connections, an empty hub cache and an
    empty data folder (so only what the package ships is at hand)."""
    env = {k: v for k, v in os.environ.items() if k not in ("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE")}
    (tmp_path / "empty-data").mkdir(exist_ok=True)
    return {
        **env,
        "HF_ENDPOINT": closed_endpoint,
        "HF_HOME": str(tmp_path / "hf-home"),
        "LAYER_MTEB_DATA": str(tmp_path / "empty-data"),
    }


def fresh(args: list[str], env: dict[str, str], cwd: Path) -> tuple[subprocess.CompletedProcess, float]:
    """``args`` in a new interpreter (the hub's settings are read at import), and its wall seconds."""
    started = time.perf_counter()
    done = subprocess.run(args, capture_output=True, text=True, env=env, cwd=cwd, timeout=600)
    return done, time.perf_counter() - started


REFUSED_RUN = """
import sys
from layer_mteb.cli import main

code = main(sys.argv[2:])
print(sys.argv[1], code, *[m for m in sys.argv[1].split(",") if m in sys.modules])
"""


@pytest.mark.parametrize(
    "command",
    [["run", "--tasks", "demo"], ["metrics", "--texts", "task:STS17"], ["stress"], ["export", "--layer", "1"]],
)
def test_a_hub_id_with_the_hub_unreachable_is_one_line_in_seconds_before_torch(command, endpoints, tmp_path):
    env = unreachable_env(endpoints[1], tmp_path)
    argv = [*command, "--model", "EleutherAI/pythia-14m", "--output", str(tmp_path / "run")]
    done, seconds = fresh([sys.executable, "-c", REFUSED_RUN, ",".join(HEAVY), *argv], env, tmp_path)
    assert done.stdout.split() == [",".join(HEAVY), "2"], done.stdout + done.stderr  # nothing heavy loaded
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 2 and "cannot be reached" in lines[0], done.stderr  # the probe's INFO line, the error
    assert lines[1].startswith("layer-mteb: error: cannot load model 'EleutherAI/pythia-14m': the hub"), done.stderr
    assert "hf download EleutherAI/pythia-14m" in lines[1] and "Retry" not in done.stderr
    assert seconds < 30 and not (tmp_path / "run" / "scores.csv").exists()  # ~2 s; a loaded machine is slower


SWEEP = """
import sys
import layer_mteb

(task,) = layer_mteb.load_tasks("STS17")
assert task.data_loaded, "the shipped copy is loaded with the task"
scores = layer_mteb.sweep("minilm-l6", "STS17", layers=[0], output=sys.argv[1])
print(round(float(scores["main_score"].iloc[0]), 4))
"""


@pytest.mark.slow  # three new interpreters, each importing torch and mteb
def test_with_the_hub_unreachable_the_readme_s_first_lines_run_on_the_shipped_data(endpoints, tmp_path):
    """The first README snippet (``load_tasks``, a 1-layer ``sweep``), then ``select --labels`` and ``cost`` on its
    run folder: the shipped STS17, no retry, no traceback."""
    env = unreachable_env(endpoints[1], tmp_path)
    run = tmp_path / "run"
    done, _ = fresh([sys.executable, "-c", SWEEP, str(run)], env, tmp_path)
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stdout.split()[-1] == "0.7478"  # layer 0 of all-MiniLM-L6-v2 on STS17 en-en, its own pipeline
    cli = [sys.executable, "-m", "layer_mteb.cli"]
    for argv in (
        ["select", "--run", str(run), "--labels", "2", "--draws", "2"],
        ["cost", "--run", str(run), "--n-texts", "8", "--repeats", "1"],
    ):
        done, _ = fresh([*cli, *argv], env, tmp_path)
        assert done.returncode == 0, done.stderr[-3000:]
        assert "Retry" not in done.stderr and "Traceback" not in done.stderr and "--data-dir" not in done.stdout
    assert (run / "selection.labels-2.csv").is_file() and (run / "cost.csv").is_file()
