"""Scale-out: accelerate/torchrun processes and --shard I/N split the work units; merged tables equal one run."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys

import pandas as pd
import pytest
from conftest import save_tiny_model

from layer_mteb.cli import main
from layer_mteb.common.config import EncodeConfig
from layer_mteb.common.errors import UserError
from layer_mteb.evaluation.plan import merge_shards
from layer_mteb.evaluation.sweep import sweep

TASKS = "STS17,BIOSSES,TwitterSemEval2015"


@pytest.fixture(scope="module")
def tiny_folders(tmp_path_factory, bert_tokenizer):
    root = tmp_path_factory.mktemp("scale")
    folders = []
    for seed, family in enumerate(("gpt_neox", "llama")):
        folders.append(save_tiny_model(family, bert_tokenizer, root / f"tiny-{family}", seed=seed))
    return folders


def run_args(folder, data_dir, out, *extra: str) -> list[str]:
    """``layer-mteb run`` of one tiny model on TASKS into ``out``, plus ``extra`` options."""
    return ["run", "--model", str(folder), "--tasks", TASKS, "--data-dir", str(data_dir), "--output", str(out), *extra]


@pytest.fixture(scope="module")
def whole(tiny_folders, data_dir, tmp_path_factory):
    out = tmp_path_factory.mktemp("whole") / "run"
    assert main(run_args(tiny_folders[0], data_dir, out, "--no-vector-cache")) == 0
    return pd.read_csv(out / "scores.csv")


@pytest.mark.slow  # two processes started by accelerate, each importing the whole stack
def test_accelerate_launch_with_two_cpu_processes_merges_to_the_single_process_table(
    tiny_folders, data_dir, whole, tmp_path
):
    # a dependency of the package: missing means a broken setup, so fail instead of skipping (make test puts the
    # virtual environment's bin/ on PATH)
    assert shutil.which("accelerate"), "accelerate's launcher is not on PATH: activate the virtual environment"
    out = tmp_path / "run"
    env = {**os.environ, "LAYER_MTEB_CACHE": str(tmp_path / "cache"), "OMP_NUM_THREADS": "1"}
    done = subprocess.run(
        [
            "accelerate",
            "launch",
            "--multi_gpu",
            "--num_processes",
            "2",
            "--num_machines",
            "1",
            "--mixed_precision",
            "no",
            "--dynamo_backend",
            "no",
            "-m",
            "layer_mteb.cli",
            *run_args(tiny_folders[0], data_dir, out),
        ],
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    assert {p.name for p in out.glob("scores.shard-*")} == {"scores.shard-0-of-2.csv", "scores.shard-1-of-2.csv"}
    shard_tasks = [set(pd.read_csv(out / f"scores.shard-{i}-of-2.csv")["task"]) for i in range(2)]
    assert shard_tasks[0] and shard_tasks[1] and not shard_tasks[0] & shard_tasks[1]  # each process did its own
    pd.testing.assert_frame_equal(pd.read_csv(out / "scores.csv"), whole, check_exact=True)
    # only the main process prints the table and the summary line
    assert done.stdout.count("\ntask ") == 1 and done.stdout.count("best layer") == 1


def test_shards_union_is_the_whole_run(tiny_folders, data_dir, whole, tmp_path):
    out = tmp_path / "run"
    for i in range(3):
        assert main(run_args(tiny_folders[0], data_dir, out, "--shard", f"{i}/3", "--no-vector-cache")) == 0
    assert not (out / "scores.csv").exists()
    assert main(["merge", "--output", str(out)]) == 0
    pd.testing.assert_frame_equal(pd.read_csv(out / "scores.csv"), whole, check_exact=True)


def test_merge_refuses_an_unfinished_array(tiny_folders, data_dir, tmp_path):
    out = tmp_path / "run"
    sweep(
        str(tiny_folders[0]),
        "BIOSSES,STS17",
        config=EncodeConfig(),
        data_dir=data_dir,
        output=out,
        shard=(1, 2),
        vector_cache=False,
        progress=False,
    )
    with pytest.raises(UserError, match=r"shard\(s\) \[0\] of 2 have not finished"):
        merge_shards(out)


def test_several_models_and_revisions_are_independent_units(tiny_folders, data_dir, whole, tmp_path):
    out = tmp_path / "run"
    extra = ("--model", str(tiny_folders[1]), "--revision", "r1,r2", "--no-vector-cache")
    argv = run_args(tiny_folders[0], data_dir, out, *extra)
    assert main(argv) == 0
    frame = pd.read_csv(out / "scores.csv")
    assert frame.groupby(["model", "revision"]).size().to_dict() == {
        ("local/tiny-gpt_neox", "r1"): 9,
        ("local/tiny-gpt_neox", "r2"): 9,
        ("local/tiny-llama", "r1"): 9,
        ("local/tiny-llama", "r2"): 9,
    }
    first = frame[(frame["model"] == "local/tiny-gpt_neox") & (frame["revision"] == "r1")].reset_index(drop=True)
    pd.testing.assert_series_equal(first["main_score"], whole["main_score"], check_exact=True)
    assert not frame[frame["model"] == "local/tiny-llama"]["main_score"].equals(first["main_score"])


@pytest.mark.parametrize("shard", ["2/2", "x", "1/0", "-1/2"])
def test_bad_shard_is_one_line(shard, tiny_folders, data_dir, tmp_path, capsys):
    argv = ["run", "--model", str(tiny_folders[0]), "--tasks", "BIOSSES", "--data-dir", str(data_dir)]
    argv += ["--output", str(tmp_path / "out"), f"--shard={shard}"]
    try:
        code = main(argv)
    except SystemExit as exit_info:  # argparse's own checks exit directly
        code = exit_info.code
    assert code == 2
    assert "--shard" in capsys.readouterr().err
    assert not (tmp_path / "out").exists()


def test_python_module_entry_point_runs(tiny_folders):
    done = subprocess.run([sys.executable, "-m", "layer_mteb.cli", "--help"], capture_output=True, text=True)
    assert done.returncode == 0 and "merge" in done.stdout
