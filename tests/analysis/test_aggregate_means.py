"""An aggregate task counts once in every mean over a run's tasks, as in mteb's benchmarks: a real sweep of mteb's
``MockAggregatedTask`` (two subtasks) beside a plain task on a tiny model writes the subtasks' rows to ``scores.csv``
naming their aggregate, and the run's closing line, ``select`` and the report read two tasks: the plain one and the
aggregate."""

from __future__ import annotations

import json
import shutil

import pandas as pd
import pytest
from conftest import tiny_model_of_depth
from mteb.mocks.mock_tasks import MockAggregatedTask, MockSTSTask
from threadpoolctl import threadpool_limits

from layer_mteb.analysis.report.build import write_report
from layer_mteb.analysis.runs.importing import import_folder
from layer_mteb.analysis.selection.picks import select_layers
from layer_mteb.cli.console import print_scores
from layer_mteb.common.config import EncodeConfig
from layer_mteb.common.run_folder import RunFolder
from layer_mteb.evaluation.sweep import sweep

AGGREGATE = MockAggregatedTask().metadata.name  # mteb's mock names itself "MockMultilingualInstructionReranking"
SUBTASKS = [task.metadata.name for task in MockAggregatedTask().tasks]
PLAIN = MockSTSTask().metadata.name
LAYERS = [0, 1, 2]


@pytest.fixture(scope="module")
def swept(bert_tokenizer, tmp_path_factory):
    """(the sweep's returned rows, its run folder) of the plain task and the aggregate at every layer."""
    run = tmp_path_factory.mktemp("aggregate") / "run"
    model = tiny_model_of_depth("gpt2", bert_tokenizer, 2)
    with threadpool_limits(limits=1):
        frame = sweep(
            model,
            [MockSTSTask(), MockAggregatedTask()],
            layers=LAYERS,
            config=EncodeConfig(batch_size=8),
            progress=False,
            vector_cache=False,
            output=run,
        )
    return frame, run


def per_task(scores: pd.DataFrame) -> pd.DataFrame:
    """layer x task: each task's mean over its splits and subsets (a task counts once, whatever its subsets)."""
    return scores.groupby(["layer", "task"])["main_score"].mean().unstack("task")


def test_the_subtasks_are_rows_of_scores_csv_naming_their_aggregate(swept):
    frame, run = swept
    on_disk = pd.read_csv(run / "scores.csv", keep_default_na=False)
    assert set(on_disk["task"]) == {PLAIN, AGGREGATE, *SUBTASKS}
    named = on_disk.groupby("task")["aggregate"].agg(set).to_dict()
    assert named == {PLAIN: {""}, AGGREGATE: {""}, **{task: {AGGREGATE} for task in SUBTASKS}}
    assert len(frame) == len(on_disk) and set(frame["task"]) == set(on_disk["task"])  # sweep() returns them too
    assert sorted(set(on_disk["layer"])) == LAYERS
    (entry_plain, entry_aggregate) = json.loads((run / "run.json").read_text())["tasks"]
    assert entry_plain["task"] == PLAIN and entry_aggregate["subtasks"] == SUBTASKS


def test_the_run_folder_hands_analysis_the_plain_task_and_the_aggregate(swept):
    _, run = swept
    assert set(RunFolder(run).scores()["task"]) == {PLAIN, AGGREGATE}
    assert set(RunFolder(run).scores(subtasks=True)["task"]) == {PLAIN, AGGREGATE, *SUBTASKS}


def test_the_runs_closing_line_is_the_mean_of_the_plain_task_and_the_aggregate(swept, capsys):
    frame, run = swept
    print_scores(frame, run)
    out = capsys.readouterr().out
    means = per_task(pd.read_csv(run / "scores.csv", keep_default_na=False))[[PLAIN, AGGREGATE]].mean(axis=1)
    counted = per_task(pd.read_csv(run / "scores.csv")).mean(axis=1)  # the subtasks counted too
    assert not (means - counted).abs().lt(1e-4).all()  # the two ways differ: the line tells which it took
    best = int(means[means == means.max()].index.max())  # ties go to the deeper layer
    line = f"best layer {best} (mean {means.max():.4f} over 2 tasks), last layer 2: {means[2]:.4f}"
    assert line in out, out
    assert not any(task in out for task in SUBTASKS)  # the layer table's columns are the run's two tasks


def test_select_and_the_report_read_two_tasks(swept, tmp_path):
    _, run = swept
    means = per_task(RunFolder(run).scores(subtasks=True).query("task in [@PLAIN, @AGGREGATE]")).mean(axis=1)
    picks = select_layers(run, by="last_layer", per_task=True, write=False)
    assert set(picks["task"]) == {PLAIN, AGGREGATE}
    overall = select_layers(run, by="last_layer", write=False)
    oracle = overall[overall["selector"] == "oracle"].iloc[0]
    assert oracle["best_score"] == pytest.approx(means.max(), abs=1e-12)
    assert oracle["last_score"] == pytest.approx(means[2], abs=1e-12)

    write_report([run], tmp_path / "report")
    table = pd.read_csv(tmp_path / "report" / "table1.csv")
    overall_row = table[table["task_type"] == "all"].iloc[0]
    assert overall_row["n_tasks"] == 2
    assert overall_row["avg_last"] == pytest.approx(means[2], abs=1e-12)
    assert set(pd.read_csv(tmp_path / "report" / "per_task.csv")["task"]) == {PLAIN, AGGREGATE}


def test_a_table_written_before_the_column_is_read_whole(swept, tmp_path):
    _, run = swept
    old = tmp_path / "old"
    old.mkdir()
    pd.read_csv(run / "scores.csv").drop(columns="aggregate").to_csv(old / "scores.csv", index=False)
    assert set(RunFolder(old).scores()["task"]) == {PLAIN, AGGREGATE, *SUBTASKS}


def test_a_writer_keeps_the_subtask_rows(swept, tmp_path):
    """Every rewrite of ``scores.csv`` (a resumed or widened run, a shard merge) starts from every row it holds."""
    _, run = swept
    copy = tmp_path / "run"
    copy.mkdir()
    shutil.copy(run / "scores.csv", copy / "scores.csv")
    folder = RunFolder(copy)
    before = folder.scores(subtasks=True)
    changed = before[before["task"] == PLAIN].head(1).assign(main_score=0.5)
    folder.update_scores(changed.to_dict("records"))
    after = pd.read_csv(copy / "scores.csv", keep_default_na=False)
    assert len(after) == len(before) and set(after["task"]) == {PLAIN, AGGREGATE, *SUBTASKS}
    assert (after.loc[after["task"].isin(SUBTASKS), "aggregate"] == AGGREGATE).all()


def test_an_imported_folder_names_the_subtasks_of_an_aggregate_it_holds(swept, tmp_path):
    """mteb result JSONs of an aggregate mteb knows (CQADupstackRetrieval) and two of its subtasks: the subtasks'
    rows name it; without the aggregate's own results they are tasks of their own."""
    _, run = swept
    names = {AGGREGATE: "CQADupstackRetrieval", SUBTASKS[0]: "CQADupstackAndroidRetrieval"}
    names[SUBTASKS[1]] = "CQADupstackEnglishRetrieval"
    results = tmp_path / "results"
    for path in (run / "mteb").rglob("*.json"):
        target = results / path.relative_to(run / "mteb")
        target.parent.mkdir(parents=True, exist_ok=True)
        result = json.loads(path.read_text())
        if path.stem != "model_meta":
            if path.stem == PLAIN:
                continue
            result["task_name"] = names[path.stem]
            target = target.with_name(f"{names[path.stem]}.json")
        target.write_text(json.dumps(result))
    imported = import_folder(results).drop_duplicates("task").set_index("task")["aggregate"]
    assert imported.to_dict() == {
        "CQADupstackRetrieval": "",
        "CQADupstackAndroidRetrieval": "CQADupstackRetrieval",
        "CQADupstackEnglishRetrieval": "CQADupstackRetrieval",
    }
    for path in results.rglob("CQADupstackRetrieval.json"):
        path.unlink()
    assert set(import_folder(results)["aggregate"]) == {""}
