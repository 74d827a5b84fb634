"""mteb benchmarks by name: ``--tasks "MTEB(eng, v2)"`` runs exactly the tasks, splits and language subsets mteb's
benchmark object holds (never the comma-split words of its name), a misspelt benchmark gets a did-you-mean, and
offline the tasks with a local copy run while the others are named."""

from __future__ import annotations

import json
import logging

import mteb
import pytest
from conftest import save_tiny_model

from layer_mteb.cli import main
from layer_mteb.common.errors import UserError
from layer_mteb.tasks.catalog import load_task, select_tasks, tasks_parts
from layer_mteb.tasks.task_names import BENCHMARKS_FILE, installed_mteb, known_benchmarks, mteb_benchmark_names

ENG_V2 = "MTEB(eng, v2)"


def test_the_benchmark_name_resolves_to_mtebs_tasks_splits_and_subsets():
    _, specs = select_tasks(ENG_V2)
    ours = [load_task(spec) for spec in specs]
    theirs = mteb.get_benchmark(ENG_V2).tasks
    assert len(ours) == len(theirs) == 41
    for mine, its in zip(ours, theirs, strict=True):
        assert type(mine) is type(its)
        assert mine.metadata.name == its.metadata.name
        assert list(mine.eval_splits) == list(its.eval_splits)
        assert list(mine.hf_subsets) == list(its.hf_subsets)
    sts22 = next(task for task in ours if task.metadata.name == "STS22.v2")
    assert list(sts22.hf_subsets) == ["en"]  # of its 18 language subsets, the benchmark scores English only
    assert {spec.benchmark for spec in specs} == {ENG_V2}


def test_a_benchmark_beside_tasks_and_suites_keeps_its_commas():
    assert tasks_parts("MTEB(eng, v2)") == ["MTEB(eng, v2)"]
    assert tasks_parts("STS12, MTEB(eng, v2),NanoBEIR") == ["STS12", "MTEB(eng, v2)", "NanoBEIR"]
    _, specs = select_tasks("BIOSSES,NanoBEIR,demo")
    names = [spec.name for spec in specs]
    assert names[0] == "BIOSSES" and specs[0].benchmark is None
    assert len(names) == len(set(names))  # a task named twice runs once
    nano = [spec for spec in specs if spec.benchmark == "NanoBEIR"]
    assert [spec.name for spec in nano] == [task.metadata.name for task in mteb.get_benchmark("NanoBEIR").tasks]
    assert "STS17" in names  # the demo suite beside them


@pytest.mark.parametrize(
    ("selection", "message"),
    [
        ("MTEB(eng, v3)", "unknown mteb task 'MTEB(eng, v3)' (did you mean the benchmark MTEB(eng, v2)?)"),
        ("NanoBIER", "(did you mean the benchmark NanoBEIR?)"),
        ("STS1,MTEB(eng v2)", "2 unknown mteb tasks: 'STS1' (did you mean STS17"),
    ],
)
def test_a_misspelt_benchmark_gets_a_did_you_mean(selection, message):
    with pytest.raises(UserError) as error:
        select_tasks(selection)
    assert message in str(error.value)


def test_the_shipped_benchmark_names_are_the_installed_mtebs():
    header = BENCHMARKS_FILE.read_text().splitlines()[0]
    assert header == f"# benchmark names of mteb {installed_mteb()}", "rerun scripts/mteb_task_names.py"
    assert known_benchmarks() == frozenset(mteb_benchmark_names())


@pytest.mark.slow
@pytest.mark.timeout(1800)  # 15 tasks' data read and scored: 6 min alone on 2 cores, over 10 on a busy machine
def test_an_offline_benchmark_run_scores_the_tasks_it_has(data_dir, tmp_path, bert_tokenizer, caplog, capsys):
    model = save_tiny_model("bert", bert_tokenizer, tmp_path / "tiny-bert")
    out = tmp_path / "run"
    args = ["run", "--model", str(model), "--tasks", ENG_V2, "--data-dir", str(data_dir), "--layers", "0"]
    with caplog.at_level(logging.WARNING):
        code = main([*args, "--output", str(out), "--skip-unavailable", "--max-length", "64", "--eval-workers", "1"])
    assert code == 0
    benchmark = [task.metadata.name for task in mteb.get_benchmark(ENG_V2).tasks]
    present = {name for name in benchmark if (data_dir / name).is_dir()}
    log = json.loads((out / "run.json").read_text())["tasks"]
    assert {entry["task"] for entry in log} == present
    assert {entry["benchmark"] for entry in log} == {ENG_V2}
    skipped = [r.getMessage() for r in caplog.records if "with no local copy" in r.getMessage()]
    assert len(skipped) == 1 and all(name in skipped[0] for name in set(benchmark) - present)
    scores = (out / "scores.csv").read_text()
    assert "STS17,STS,test,en-en" in scores  # the benchmark's subset
