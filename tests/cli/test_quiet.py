"""Quiet by default: one budget line per run, no data-folder warning where no task reads that folder, no progress
bars of datasets unless asked; commands say what they wrote; the caches follow ``XDG_CACHE_HOME`` and the tests never
write into the user's own."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import REPO

from layer_mteb.common.files import cache_root

RETRIEVAL = {
    "corpus.jsonl": "".join(
        json.dumps({"id": f"d{i}", "text": f"document {i} on topic {i % 5}"}) + "\n" for i in range(30)
    ),
    "queries.csv": "id,text\n" + "".join(f"q{i},topic {i}\n" for i in range(5)),
    "qrels.csv": "query-id,corpus-id,score\n" + "".join(f"q{i},d{i},1\nq{i},d{i + 5},1\n" for i in range(5)),
}


def _task_file(folder: Path) -> Path:
    """Two custom tasks: a retrieval task written here (mteb draws its corpus-format bar for it) and the shipped
    support-intents classification."""
    for name, text in RETRIEVAL.items():
        (folder / name).write_text(text)
    intents = REPO / "docs" / "examples" / "support_intents"
    declared = [
        {"name": "TinySearch", "type": "Retrieval", "files": {k.split(".")[0]: k for k in RETRIEVAL}},
        {
            "name": "SupportIntentClassification",
            "type": "Classification",
            "files": {"train": str(intents / "train.csv"), "test": str(intents / "test.csv")},
        },
    ]
    path = folder / "tasks.yaml"
    path.write_text(json.dumps({"custom": declared}))  # JSON is YAML
    return path


def _cli(args: list[str], cwd: Path) -> subprocess.CompletedProcess:
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "PYTHONPATH": str(REPO)}
    env.pop("LAYER_MTEB_DATA", None)  # the data folder beside the checkout is the default, when it exists
    env.pop("HF_DATASETS_DISABLE_PROGRESS_BARS", None)
    return subprocess.run(
        [sys.executable, "-m", "layer_mteb.cli", *args], capture_output=True, text=True, env=env, cwd=cwd, timeout=600
    )


@pytest.mark.slow  # a sweep of the packaged MiniLM's last layer on two small custom tasks, in a subprocess: ~40 s
def test_a_run_of_custom_tasks_says_each_thing_once_and_draws_no_bars(tmp_path):
    tasks = _task_file(tmp_path)
    done = _cli(["run", "--model", "minilm-l6", "--tasks", str(tasks), "--layers", "-1", "--output", "run"], tmp_path)
    assert done.returncode == 0, done.stderr[-3000:]
    err = done.stderr
    assert err.count("pooled-vector memory limit") == 1, err  # one line per run, not one per task
    assert "data folder:" not in err  # no task of the run reads the data folder
    assert "Standardizing text corpus format" not in err and "Map:" not in err, err  # datasets' bars are off
    assert "scores: run/scores.csv" in done.stdout
    cost = _cli(["cost", "--run", "run", "--n-texts", "8"], tmp_path)
    assert cost.returncode == 0, cost.stderr[-3000:]
    assert "data folder:" not in cost.stderr and "wrote run/cost.csv" in cost.stdout


def test_the_cache_follows_layer_mteb_cache_then_xdg_then_home(monkeypatch, tmp_path):
    monkeypatch.setenv("LAYER_MTEB_CACHE", str(tmp_path / "own"))
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert cache_root() == tmp_path / "own"
    monkeypatch.delenv("LAYER_MTEB_CACHE")
    assert cache_root() == tmp_path / "xdg" / "layer_mteb"
    monkeypatch.setenv("XDG_CACHE_HOME", "relative/cache")  # the XDG rule: a relative path is ignored
    assert cache_root() == Path.home() / ".cache" / "layer_mteb"
    monkeypatch.delenv("XDG_CACHE_HOME")
    assert cache_root() == Path.home() / ".cache" / "layer_mteb"


@pytest.fixture(scope="module")
def cache_seen_by_a_module_fixture() -> str:
    return os.environ.get("LAYER_MTEB_CACHE", "")


def test_no_fixture_or_subprocess_of_the_tests_writes_into_the_user_s_cache(cache_seen_by_a_module_fixture, tmp_path):
    """The session's temporary cache is set before fixtures of every scope run (a module fixture that sweeps stores
    vectors), and subprocesses inherit it; mteb's own result cache too."""
    base = Path(os.environ["LAYER_MTEB_CACHE"]).parent
    assert cache_seen_by_a_module_fixture == os.environ["LAYER_MTEB_CACHE"]
    assert cache_root() == base / "layer_mteb_cache" and Path(os.environ["MTEB_CACHE"]) == base / "mteb_cache"
    code = "from layer_mteb.common.files import cache_root; print(cache_root())"
    seen = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=REPO)
    assert seen.stdout.strip() == str(base / "layer_mteb_cache")


#: ``main``'s order in a new interpreter: a `run` checked, logging set up, then the bar transformers draws while it
#: converts a GGUF file (the same ``tqdm`` name its loader calls)
GGUF_BAR = """
import sys
from layer_mteb.cli.console import setup_logging
from layer_mteb.cli.main import build_parser, check

check(build_parser("run").parse_args(["run", "--model", "minilm-l6", "--tasks", "demo", "--output", sys.argv[1]]))
imported = "tqdm" in sys.modules
setup_logging(verbose=sys.argv[2] == "verbose")
from transformers import modeling_gguf_pytorch_utils

list(modeling_gguf_pytorch_utils.tqdm(range(3), desc="Converting and de-quantizing GGUF tensors..."))
print(imported)
"""


@pytest.mark.slow  # two new interpreters importing transformers
@pytest.mark.parametrize("verbose", [False, True])
def test_a_run_draws_transformers_gguf_bar_only_when_verbose(tmp_path, verbose):
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    env.pop("TQDM_DISABLE", None)
    argv = [sys.executable, "-c", GGUF_BAR, str(tmp_path / "run"), "verbose" if verbose else "quiet"]
    done = subprocess.run(argv, capture_output=True, text=True, env=env, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stdout.strip() == "False"  # tqdm is not imported by the checks, so it reads TQDM_DISABLE when it is
    assert ("Converting and de-quantizing GGUF tensors" in done.stderr) == verbose


@pytest.mark.slow  # the demo's sweep of the packaged MiniLM's last layer, in a subprocess: ~30 s
def test_the_demo_says_what_it_loads_before_each_slow_step(tmp_path):
    """No silent minute before the first progress line: once the options are checked, the imports of torch,
    transformers and mteb are said first, then the model's load, each before it starts."""
    done = _cli(["run", "--model", "minilm-l6", "--tasks", "demo", "--layers", "-1", "--output", "run"], tmp_path)
    assert done.returncode == 0, done.stderr[-3000:]
    lines = done.stderr.splitlines()
    said = [
        "INFO layer_mteb.cli: loading torch, transformers and mteb",
        "INFO layer_mteb.evaluation.sweep: loading model minilm-l6 on cpu",
    ]
    checked = [line for line in lines if "data folder:" not in line]  # said by the checks, where a folder is found
    assert checked[0] == said[0], lines
    first_progress = next(i for i, line in enumerate(lines) if "layer_mteb.common.progress" in line)
    assert said[1] in lines[:first_progress], lines
