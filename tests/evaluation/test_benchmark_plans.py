"""Every benchmark ``mteb.get_benchmarks()`` knows resolves into a run's plan, as ``layer-mteb run --tasks NAME``
makes it before any model loads: each text task a unit with the benchmark's type, splits and subsets and nothing
loaded; non-text tasks (image, audio, video) named in one line and left out; a benchmark with no text task refused in
one line. The hub counts as reachable (a faked machine: nothing is fetched, nothing loaded) and the data folder is
empty, so every task plans as a hub task."""

from __future__ import annotations

import logging

import huggingface_hub.constants
import mteb
import pytest

from layer_mteb.common.errors import UserError
from layer_mteb.evaluation.plan import is_text_task, task_units
from layer_mteb.evaluation.request import RunRequest

#: one of each kind: an aggregate task (MTEB(eng, v1): CQADupstackRetrieval), subsets a local copy does not hold
#: (MTEB(deu, v1)), text among images (MIEB(eng)), no text at all (ViDoRe(v1)); the multilabel tasks of
#: MTEB(Multilingual, v2) plan in the slow test of all 78
KINDS = ["MTEB(eng, v1)", "MTEB(deu, v1)", "MIEB(eng)", "ViDoRe(v1)"]
NAMES = [benchmark.name for benchmark in mteb.get_benchmarks()]


@pytest.fixture
def hub_reachable(monkeypatch):
    monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_OFFLINE", False)


def plan(name: str, data_dir) -> list[tuple[object, str, str]]:
    request = RunRequest("minilm-l6", tasks=name, data_dir=data_dir, progress=False)
    return task_units(request.tasks, request.split, request.data_dir)


def check_plan(name: str, data_dir, caplog) -> bool:
    """The plan of benchmark ``name`` is its text tasks as the benchmark holds them; True when it holds any."""
    benchmark = mteb.get_benchmark(name)
    text = {task.metadata.name: task for task in benchmark.tasks if is_text_task(task)}
    others = [task.metadata.name for task in benchmark.tasks if not is_text_task(task)]
    caplog.clear()
    if not text:
        with pytest.raises(UserError, match="no text task to score") as refused:
            plan(name, data_dir)
        assert "\n" not in str(refused.value) and all(other in str(refused.value) for other in others)
        return False
    with caplog.at_level(logging.WARNING, logger="layer_mteb.evaluation.plan"):
        units = plan(name, data_dir)
    assert [task.metadata.name for task, _, _ in units] == list(text)
    for task, origin, _ in units:
        wanted = text[task.metadata.name]
        assert origin == "hub" and not task.data_loaded
        assert task.metadata.type == wanted.metadata.type
        assert (list(task.eval_splits), list(task.hf_subsets)) == (list(wanted.eval_splits), list(wanted.hf_subsets))
    left_out = [r.getMessage() for r in caplog.records if "non-text" in r.getMessage()]
    assert len(left_out) == (1 if others else 0)
    assert all(other in left_out[0] for other in others)
    return True


@pytest.mark.parametrize("name", KINDS)
def test_a_benchmark_of_each_kind_plans_its_text_tasks(name, tmp_path, hub_reachable, caplog):
    assert check_plan(name, tmp_path, caplog) is (name != "ViDoRe(v1)")


@pytest.mark.slow
def test_every_benchmark_mteb_knows_plans(tmp_path, hub_reachable, caplog):
    with_text = [name for name in NAMES if check_plan(name, tmp_path, caplog)]
    assert len(NAMES) == 78 and len(with_text) == 63  # the other 15 are image, audio or video benchmarks


def test_benchmark_objects_run_as_their_tasks(tmp_path, hub_reachable):
    """``sweep(model, [benchmark])`` takes a benchmark object as its tasks, with the benchmark's splits and subsets;
    a task name beside objects is one error."""
    benchmark = mteb.get_benchmark("MTEB(eng, v2)")
    request = RunRequest("minilm-l6", tasks=[benchmark], data_dir=tmp_path, progress=False)
    assert request.tasks == tuple(benchmark.tasks)
    assert request.benchmark_of("STS22.v2") == benchmark.name  # run.json records it, as for the benchmark's name
    assert RunRequest("minilm-l6", tasks=benchmark, data_dir=tmp_path).tasks == tuple(benchmark.tasks)
    units = task_units(request.tasks, request.split, request.data_dir)
    assert [task for task, _, _ in units] == list(benchmark.tasks)
    with pytest.raises(UserError, match="give names or objects"):
        RunRequest("minilm-l6", tasks=[benchmark, "STS12"], data_dir=tmp_path)


def test_offline_a_benchmark_asking_other_subsets_than_the_shipped_copy_is_named_not_misread(tmp_path, monkeypatch):
    """The package ships AmazonCounterfactualClassification's ``en`` subset, test split: MTEB(deu, v1) asks ``de``
    (and a validation split), so with the hub offline its tasks are named as unavailable in one line instead of
    being read from that copy."""
    monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_OFFLINE", True)
    with pytest.raises(UserError, match=r"HF_HUB_OFFLINE is set and .* have no local copy") as refused:
        plan("MTEB(deu, v1)", tmp_path)
    assert "AmazonCounterfactualClassification" in str(refused.value)
