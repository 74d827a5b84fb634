"""Custom tasks are real mteb tasks: every type is scored by mteb's own evaluator through the sweep, a task declared
from the rows of an offline mteb task scores exactly as that task does, and the run's later commands (labelled
selection, own-text metrics) find the task again from the run folder."""

from __future__ import annotations

import json
import math
import pickle
from pathlib import Path

import pytest
from _task_files import SENTENCES, write_csv, write_jsonl
from conftest import REPO

from layer_mteb.common.errors import UserError
from layer_mteb.common.run_folder import RunFolder
from layer_mteb.evaluation.sweep import sweep
from layer_mteb.tasks.catalog import load_tasks, select_tasks, task_data
from layer_mteb.tasks.custom import declared_in, read_custom_data

EXAMPLE = REPO / "docs" / "examples" / "support_intents.yaml"


def every_type(folder: Path) -> Path:
    """A task file declaring one small task of every supported type, in CSV, JSONL and Parquet files."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    s = SENTENCES
    topics = ["cats", "cats", "markets", "markets", "home", "home", "weather", "music"]
    write_csv(folder / "cls" / "train.csv", ["text", "label"], [[t, c] for t, c in zip(s, topics, strict=True)])
    write_csv(folder / "cls" / "test.csv", ["text", "label"], [[t.upper(), c] for t, c in zip(s, topics, strict=True)])
    pairs = [[s[0], s[1], 1], [s[2], s[3], 1], [s[0], s[2], 0], [s[4], s[5], 0], [s[6], s[7], 0]]
    write_jsonl(folder / "pairs" / "test.jsonl", [{"a": a, "b": b, "same": y} for a, b, y in pairs])
    sts = pa.table(
        {"sentence1": [p[0] for p in pairs], "sentence2": [p[1] for p in pairs], "score": [4.5, 4, 0.5, 1, 2]}
    )
    (folder / "sts").mkdir()
    pq.write_table(sts, folder / "sts" / "test.parquet")
    write_csv(folder / "clusters" / "test.csv", ["headline", "topic"], [[t, c] for t, c in zip(s, topics, strict=True)])
    write_jsonl(folder / "ret" / "corpus.jsonl", [{"id": f"d{i}", "text": t} for i, t in enumerate(s)])
    write_csv(folder / "ret" / "queries.csv", ["id", "text"], [["q1", "a cat by the window"], ["q2", "markets fell"]])
    write_csv(folder / "ret" / "qrels.csv", ["query-id", "corpus-id"], [["q1", "d0"], ["q1", "d1"], ["q2", "d2"]])
    qrels = [["q1", "d0", 1], ["q1", "d2", 0], ["q1", "d4", 0], ["q2", "d3", 1], ["q2", "d6", 0]]
    write_csv(folder / "ret" / "candidates.csv", ["query-id", "corpus-id", "score"], qrels)
    path = folder / "mine.yaml"
    path.write_text(
        """custom:
  - {name: MyTopics, type: Classification, files: {train: cls/train.csv, test: cls/test.csv}, samples_per_label: 2}
  - name: MyPairs
    type: PairClassification
    files: {test: pairs/test.jsonl}
    columns: {text1: a, text2: b, label: same}
  - {name: MySTS, type: STS, files: {test: sts/test.parquet}}
  - {name: MyClusters, type: Clustering, files: {test: clusters/test.csv}, columns: {text: headline, label: topic}}
  - {name: MySearch, type: Retrieval, files: {corpus: ret/corpus.jsonl, queries: ret/queries.csv, qrels: ret/qrels.csv}}
  - name: MyRerank
    type: Reranking
    files: {corpus: ret/corpus.jsonl, queries: ret/queries.csv, qrels: ret/candidates.csv}
"""
    )
    return path


def test_the_example_is_a_real_mteb_classification_task_with_its_files_loaded():
    from mteb.abstasks import AbsTaskClassification

    (task,) = load_tasks(str(EXAMPLE))
    assert isinstance(task, AbsTaskClassification)
    assert task.metadata.name == "SupportIntentClassification" and task.metadata.main_score == "accuracy"
    assert task.data_loaded and {split: len(rows) for split, rows in task.dataset.items()} == {
        "train": 200,
        "test": 100,
    }
    assert sorted(set(task.dataset["train"]["label"])) == list(range(10))
    assert declared_in(task) == EXAMPLE.resolve()
    copy = pickle.loads(pickle.dumps(task))  # its class is made at run time: rebuilt from the declaration
    assert type(copy).__name__ == type(task).__name__ and copy.dataset["test"][:] == task.dataset["test"][:]
    task.unload_data()  # mteb's unload keeps the metadata; its own load_data reads the files again
    task.load_data()
    assert task.data_loaded and task.metadata.name == "SupportIntentClassification"


def test_a_custom_task_is_selected_from_its_file_alone_and_never_waits_on_the_hub(tmp_path):
    from layer_mteb.cli.main import build_parser, check

    path = every_type(tmp_path)
    assert [s.name for s in select_tasks(f"{path}:MySTS")[1]] == ["MySTS"]
    assert len(select_tasks(str(path))[1]) == 6
    argv = ["run", "--model", "minilm-l6", "--tasks", str(path), "--data-dir", str(tmp_path), "--output", str(tmp_path)]
    request = check(build_parser().parse_args(argv))
    assert {task_data(spec, request.data_dir)[0] for spec in request.tasks} == {"custom"}  # read from its files


def test_the_same_rows_read_alike_from_csv_jsonl_and_parquet(tmp_path):
    import pyarrow as pa
    import pyarrow.parquet as pq

    rows = [{"text": t, "label": i % 2} for i, t in enumerate(SENTENCES)]
    write_jsonl(tmp_path / "a" / "test.jsonl", rows)
    write_csv(tmp_path / "b" / "test.csv", ["text", "label"], [[r["text"], r["label"]] for r in rows])
    (tmp_path / "c").mkdir()
    pq.write_table(pa.Table.from_pylist(rows), tmp_path / "c" / "test.parquet")
    entries = [
        f"  - {{name: T{x}, type: Clustering, files: {{test: {x}/test.{e}}}}}"
        for x, e in zip("abc", ["jsonl", "csv", "parquet"], strict=True)
    ]
    (tmp_path / "t.yaml").write_text("custom:\n" + "\n".join(entries) + "\n")
    read = [read_custom_data(spec.custom) for spec in select_tasks(str(tmp_path / "t.yaml"))[1]]
    assert read[0] == read[1] == read[2]


def test_every_type_is_scored_by_mtebs_evaluator_and_recorded_as_custom_data(tmp_path, tiny_gpt_neox):
    path = every_type(tmp_path)
    frame = sweep(tiny_gpt_neox, str(path), layers="0,-1", output=tmp_path / "run", progress=False, eval_workers=1)
    types = frame.groupby("task")["task_type"].first().to_dict()
    assert types == {
        "MyClusters": "Clustering",
        "MyPairs": "PairClassification",
        "MyRerank": "Reranking",
        "MySTS": "STS",
        "MySearch": "Retrieval",
        "MyTopics": "Classification",
    }
    assert len(frame) == 12 and all(math.isfinite(s) for s in frame["main_score"]) and set(frame["data"]) == {"custom"}
    log = json.loads((tmp_path / "run" / "run.json").read_text())["tasks"]
    assert {entry["task_file"] for entry in log} == {str(path.resolve())}
    assert all(entry["data_fingerprint"] for entry in log)
    assert RunFolder(tmp_path / "run").recorded_tasks().task_files["MySTS"] == f"{path.resolve()}:MySTS"
    stored = sorted(p.stem for p in (tmp_path / "run" / "mteb").rglob("My*.json"))
    assert stored == sorted([*types] * 2)  # mteb's own result files, one per layer


def test_a_changed_file_changes_the_fingerprint_so_no_stored_score_is_reused(tmp_path):
    path = every_type(tmp_path)
    (before,) = load_tasks(f"{path}:MyTopics")
    (again,) = load_tasks(f"{path}:MyTopics")
    test = tmp_path / "cls" / "test.csv"
    test.write_text(test.read_text().replace("CATS", "DOGS"))
    (changed,) = load_tasks(f"{path}:MyTopics")
    assert before.metadata.revision == again.metadata.revision != changed.metadata.revision


def _declared_copy(tmp_path: Path, name: str, kind: str, files: dict[str, Path], extra: str = "") -> str:
    listed = ", ".join(f"{split}: {file}" for split, file in files.items())
    path = tmp_path / "copy.yaml"
    path.write_text(f"custom:\n  - {{name: {name}, type: {kind}, files: {{{listed}}}{extra}}}\n")
    return str(path)


def _per_layer(frame) -> list[tuple[int, float]]:
    return list(zip(frame["layer"], frame["main_score"], strict=True))


def test_biosses_declared_as_a_custom_task_scores_exactly_as_its_offline_copy(tmp_path, data_dir, tiny_gpt_neox):
    options = {"layers": "all", "progress": False, "eval_workers": 1, "vector_cache": False}
    named = sweep(tiny_gpt_neox, ["BIOSSES"], data_dir=data_dir, **options)
    declared = _declared_copy(tmp_path, "MyBIOSSES", "STS", {"test": data_dir / "BIOSSES" / "test.jsonl"})
    custom = sweep(tiny_gpt_neox, declared, data_dir=data_dir, **options)
    assert len(named) == 3 and _per_layer(named) == _per_layer(custom)


def test_emotion_declared_as_a_custom_task_scores_exactly_as_its_offline_copy(tmp_path, data_dir, tiny_gpt_neox):
    """A subsample of EmotionClassification's rows, as an offline copy and as a custom task with the same
    evaluator setting (mteb's EmotionClassification fits on 16 examples per label)."""
    copy = tmp_path / "data" / "EmotionClassification"
    for split, n in (("train", 600), ("test", 200)):
        lines = (data_dir / "EmotionClassification" / f"{split}.jsonl").read_text().splitlines()[:n]
        write_jsonl(copy / f"{split}.jsonl", [json.loads(line) for line in lines])
    options = {"layers": "all", "progress": False, "eval_workers": 1, "vector_cache": False}
    named = sweep(tiny_gpt_neox, ["EmotionClassification"], data_dir=copy.parent, **options)
    files = {split: copy / f"{split}.jsonl" for split in ("train", "test")}
    declared = _declared_copy(tmp_path, "MyEmotion", "Classification", files, ", samples_per_label: 16")
    custom = sweep(tiny_gpt_neox, declared, data_dir=copy.parent, **options)
    assert len(named) == 3 and _per_layer(named) == _per_layer(custom)


@pytest.mark.slow
def test_stsbenchmark_declared_as_a_custom_task_scores_exactly_as_its_offline_copy_on_minilm(tmp_path, data_dir):
    options = {"layers": "all", "progress": False, "vector_cache": False}
    named = sweep("minilm-l6", ["STSBenchmark"], data_dir=data_dir, **options)
    declared = _declared_copy(tmp_path, "MySTSBenchmark", "STS", {"test": data_dir / "STSBenchmark" / "test.jsonl"})
    custom = sweep("minilm-l6", declared, data_dir=data_dir, **options)
    assert len(named) == 7 and _per_layer(named) == _per_layer(custom)


def test_labelled_selection_own_texts_and_cost_find_the_custom_task_from_the_run(tmp_path, bert_tokenizer, monkeypatch):
    from conftest import save_tiny_model

    from layer_mteb.analysis.labels.budget import select_with_labels
    from layer_mteb.metrics.layer_cost import CostSettings, run_cost
    from layer_mteb.metrics.texts import load_texts

    model = save_tiny_model("bert", bert_tokenizer, tmp_path / "model")
    path = every_type(tmp_path)
    run = tmp_path / "run"
    sweep(str(model), f"{path}:MySTS", layers="all", output=run, progress=False, eval_workers=1)
    monkeypatch.chdir(tmp_path / "cls")  # another folder: the run names the task file by its absolute path
    picks = select_with_labels(run, 3, draws=2, model=str(model), workers=1)
    assert picks["task"].tolist() == ["MySTS"] and picks["chosen_layer"].between(0, 2).all()
    texts = load_texts(f"task:{path}:MySTS", n_prompts=100)
    assert texts.name == "task:MySTS" and texts.task == "MySTS" and len(texts.texts) == 8
    cost = run_cost(run, model=str(model), settings=CostSettings(n_texts=4), batch_size=4)  # its texts, from the file
    assert cost["layer"].tolist() == [0, 1, 2] and set(cost["texts"]) == {"task:MySTS"}


def test_a_task_file_names_a_suite_or_one_task(tmp_path):
    path = every_type(tmp_path)
    with pytest.raises(UserError, match="unknown suite 'NoSuch'"):
        select_tasks(f"{path}:NoSuch")
