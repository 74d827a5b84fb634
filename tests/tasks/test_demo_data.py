"""The demo runs anywhere: its tasks' data ships in the package (only the splits mteb reads, each folder with its
provenance and the licence mteb's metadata gives it), is read by the task's own mteb class when neither the data
folder nor the hub has the task, and scores as the data folder's copy does. Any other task with the hub offline
stops in one line that names the two places its data can come from."""

from __future__ import annotations

import re
from pathlib import Path, PurePosixPath

import mteb
import pytest
from conftest import REPO
from huggingface_hub import constants

from layer_mteb.cli import main
from layer_mteb.common.errors import UserError
from layer_mteb.evaluation.plan import task_units
from layer_mteb.evaluation.request import RunRequest
from layer_mteb.tasks.catalog import EMBEDDED_DATA_DIR, embedded_tasks, load_task, read_task_file, task_data

DEMO = list(read_task_file().suites["demo"])
#: rows per split of each demo task (the subset the paper scores), as mteb's own data holds them
ROWS = {"STS17": {"test": 250}, "AmazonCounterfactualClassification": {"test": 670, "train": 4018}}


@pytest.fixture
def no_data_no_hub(tmp_path, monkeypatch) -> Path:
    """A machine with an empty data folder and the hub offline."""
    empty = tmp_path / "empty-data"
    empty.mkdir()
    monkeypatch.setenv("LAYER_MTEB_DATA", str(empty))
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setattr(constants, "HF_HUB_OFFLINE", True)
    return empty


def test_the_demo_suite_is_the_shipped_tasks():
    assert sorted(DEMO) == embedded_tasks() == sorted(ROWS)


@pytest.mark.parametrize("name", sorted(ROWS))
def test_each_shipped_task_has_its_provenance_and_mtebs_licence(name):
    source = (EMBEDDED_DATA_DIR / name / "SOURCE.md").read_text()
    assert re.search(r"^- Source repo: https://github\.com/\S+$", source, re.MULTILINE)
    assert re.search(r"^- Commit: [0-9a-f]{40}\b", source, re.MULTILINE)
    assert re.search(r"^- Licence: \S", source, re.MULTILINE)
    licence = mteb.get_task(name).metadata.license or "not specified"
    assert f'- mteb licence: {licence} (`mteb.get_task("{name}").metadata.license`)' in source


@pytest.mark.parametrize("name", sorted(ROWS))
def test_only_the_splits_mteb_reads_are_shipped(name):
    files = sorted(path.name for path in (EMBEDDED_DATA_DIR / name).iterdir())
    assert files == sorted(["SOURCE.md", *(f"{split}.jsonl" for split in ROWS[name])])


def test_the_package_data_lists_every_shipped_file():
    """A non-editable install carries the demo only if pyproject's package-data names each file."""
    tomllib = pytest.importorskip("tomllib")  # Python 3.11 on
    patterns = tomllib.loads((REPO / "pyproject.toml").read_text())["tool"]["setuptools"]["package-data"]["layer_mteb"]
    package = REPO / "layer_mteb"
    shipped = [PurePosixPath(p.relative_to(package).as_posix()) for p in EMBEDDED_DATA_DIR.rglob("*") if p.is_file()]
    assert len(shipped) == 1 + sum(1 + len(splits) for splits in ROWS.values())  # README.md; SOURCE.md, splits

    def listed(path: PurePosixPath) -> bool:  # setuptools' globs: `*` stays within one folder
        return any(len(path.parts) == len(PurePosixPath(p).parts) and path.match(p) for p in patterns)

    assert [str(path) for path in shipped if not listed(path)] == []


@pytest.mark.parametrize("name", sorted(ROWS))
def test_the_shipped_files_equal_the_data_folders(name, data_dir):
    for split in ROWS[name]:
        shipped = (EMBEDDED_DATA_DIR / name / f"{split}.jsonl").read_bytes()
        assert shipped == (data_dir / name / f"{split}.jsonl").read_bytes(), (name, split)


def test_the_demo_loads_with_no_data_folder_and_no_hub(no_data_no_hub):
    request = RunRequest("minilm-l6", "demo", output=no_data_no_hub.parent / "run")
    assert request.data_dir == no_data_no_hub and [spec.name for spec in request.tasks] == DEMO
    units = task_units(request.tasks, request.split, request.data_dir)
    assert [(task.metadata.name, origin) for task, origin, _ in units] == [(name, "embedded") for name in DEMO]
    for task, _, fingerprint in units:
        name = task.metadata.name
        assert task.data_loaded and len(fingerprint) == 16
        (subset,) = task.hf_subsets
        assert {split: len(rows) for split, rows in task.dataset[subset].items()} == ROWS[name]
        assert task.eval_splits == ["test"] and type(task) is type(mteb.get_task(name))  # mteb's own class


def test_the_data_folder_comes_first_then_the_hub_then_the_shipped_copy(data_dir, monkeypatch):
    spec = read_task_file().spec("STS17")
    monkeypatch.setattr(constants, "HF_HUB_OFFLINE", True)
    assert task_data(spec, data_dir) == ("local", data_dir / "STS17")
    assert task_data(spec, None) == ("embedded", EMBEDDED_DATA_DIR / "STS17")
    assert task_data(read_task_file().spec("STSBenchmark"), None) == ("hub", None)  # not shipped
    monkeypatch.setattr(constants, "HF_HUB_OFFLINE", False)  # the hub reachable: mteb's own copy
    assert task_data(spec, None) == ("hub", None)
    assert load_task(spec, data_dir=None).data_loaded is False


def test_a_task_with_neither_a_folder_nor_the_hub_names_where_its_data_can_come_from(no_data_no_hub, capsys):
    run = ["run", "--model", "minilm-l6", "--output", str(no_data_no_hub.parent / "run")]
    assert main([*run, "--tasks", "STSBenchmark"]) == 2
    error = capsys.readouterr().err.strip()
    assert error == (
        f"layer-mteb: error: HF_HUB_OFFLINE is set and 1 task(s) have no local copy in {no_data_no_hub}: STSBenchmark; "
        "give a data folder holding a folder per task (--data-dir DIR or $LAYER_MTEB_DATA), "
        "or unset HF_HUB_OFFLINE where the hub answers (the package ships the data of the demo suite only)"
    )
    assert main([*run, "--tasks", "STS17,STSBenchmark,BIOSSES"]) == 2
    error = capsys.readouterr().err.strip()
    assert ": STSBenchmark, BIOSSES; give a data folder" in error
    assert error.endswith("or --skip-unavailable to run the other 1")
    with pytest.raises(UserError, match=r"no task of the task file has a folder in .*empty-data"):
        RunRequest("minilm-l6", "offline", output=no_data_no_hub.parent / "run")  # `offline` is the data folder's


@pytest.mark.slow
def test_one_layer_of_a_shipped_task_scores_as_the_data_folder_copy(no_data_no_hub, tmp_path):
    """Layer 6 of all-MiniLM-L6-v2 on STS17 (en-en) from the shipped copy: the score `make demo` printed from the
    data folder before the demo shipped its data (cosine Spearman 0.875878, as scores.csv rounds it)."""
    from layer_mteb.evaluation.sweep import sweep

    table = sweep("minilm-l6", "STS17", layers="6", output=tmp_path / "run", progress=False, eval_workers=1)
    assert table[["task", "layer", "subset", "data"]].values.tolist() == [["STS17", 6, "en-en", "embedded"]]
    assert table["main_score"].iloc[0] == pytest.approx(0.875878, abs=5e-7)
