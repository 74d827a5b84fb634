"""tasks.yaml holds the paper's 32 tasks with the right subsets; local folders load through the real mteb classes."""

from __future__ import annotations

import logging
from collections import Counter

import pytest

from layer_mteb.common.errors import UserError
from layer_mteb.tasks import catalog as tasks
from layer_mteb.tasks.catalog import TaskSpec, load_task, read_task_file, select_tasks


def test_task_file_lists_the_papers_32_tasks_by_category():
    task_file = read_task_file()
    assert task_file.split == "test"
    assert len(task_file.tasks) == 32 == len({t.name for t in task_file.tasks})
    counts = Counter(t.category for t in task_file.tasks)
    assert counts == {"PairClassification": 3, "Classification": 10, "Clustering": 6, "Reranking": 4, "STS": 9}


@pytest.mark.parametrize(
    ("name", "subsets"),
    [
        ("AmazonCounterfactualClassification", ["en"]),
        ("STS17", ["en-en"]),
        ("MassiveIntentClassification", ["en"]),
        ("MTOPDomainClassification", ["en"]),
        ("STSBenchmark", ["default"]),
    ],
)
def test_mteb_tasks_get_the_papers_subsets_and_test_split(name, subsets):
    task = load_task(read_task_file().spec(name))
    assert list(task.hf_subsets) == subsets
    assert list(task.eval_splits) == ["test"]


def test_every_listed_task_is_known_to_mteb_and_fast_variants_exist():
    _, specs = select_tasks("paper32-fast")
    names = [load_task(spec).metadata.name for spec in specs]
    assert "RedditClustering.v2" in names and "RedditClustering" not in names
    assert len(names) == 32


def test_offline_suite_is_the_tasks_with_a_local_folder(data_dir):
    _, specs = select_tasks("offline", data_dir)
    assert len(specs) == 19
    assert "WikiText2" not in {s.name for s in specs}


def test_selection_forms(tmp_path):
    assert [s.name for s in select_tasks("demo")[1]][:2] == ["STS17", "AmazonCounterfactualClassification"]
    assert [s.name for s in select_tasks("STS12, STS13")[1]] == ["STS12", "STS13"]
    custom = tmp_path / "mine.yaml"
    custom.write_text("tasks:\n  STS:\n    - STS12\n    - {name: STS17, subsets: [en-en]}\nsuites:\n  one: [STS17]\n")
    assert [s.name for s in select_tasks(str(custom))[1]] == ["STS12", "STS17"]
    assert select_tasks(f"{custom}:one")[1][0].subsets == ("en-en",)


@pytest.mark.parametrize(
    ("content", "message"),
    [
        ("", "non-empty 'tasks:'"),
        ("tasks: {}\n", "non-empty"),
        ("tasks:\n  STS: STS12\n", "must hold a list"),
        ("tasks:\n  STS:\n    - {nam: STS12}\n", "needs a 'name:'"),
        ("tasks: [", "cannot read task file"),
    ],
)
def test_bad_task_files_are_one_clear_error(tmp_path, content, message):
    path = tmp_path / "bad.yaml"
    path.write_text(content)
    with pytest.raises(UserError, match=message):
        select_tasks(str(path))


@pytest.mark.parametrize(
    ("content", "message"),
    [
        (
            "tasks:\n  STS:\n    - name: STS12\n      fast: STS12\n      fast: STS13\n",
            "bad.yaml: duplicate key 'fast' at line 5 (first at line 4); keep one of them",
        ),
        (
            "tasks:\n  STS: [STS12]\n  Clustering: [RedditClustering]\n  STS: [STS13]\n",
            "bad.yaml: duplicate key 'STS' at line 4 (first at line 2); keep one of them",
        ),
        ("tasks: {STS: [STS12], STS: [STS13]}\n", "duplicate key 'STS' at line 1 (first at line 1)"),
        (
            "tasks:\n  STS: [STS12\n  Clustering: [RedditClustering]\n",
            "bad.yaml': while parsing a flow sequence started at line 2, column 8: expected ',' or ']', but got ':' "
            "at line 3, column 13",
        ),
        ("tasks:\n  STS:\n    - {nam: STS12}\n", "bad.yaml, line 3, column 7: every task under 'STS' needs a 'name:'"),
        (
            "tasks:\n  STS:\n    - STS12\n    - name: STS13\n      fats: STS14\n",
            "bad.yaml, line 4, column 7: task 'STS13' has unknown keys ['fats']",
        ),
        ("tasks:\n  STS: STS12\n", "bad.yaml, line 2, column 3: category 'STS' must hold a list of tasks"),
        ("tasks:\n  STS: STS12: x\n", "bad.yaml': mapping values are not allowed here at line 2, column 13"),
    ],
)
def test_task_files_are_read_strictly_with_the_line_of_the_problem(tmp_path, content, message):
    path = tmp_path / "bad.yaml"
    path.write_text(content)
    with pytest.raises(UserError) as raised:
        read_task_file(path)
    assert message in str(raised.value) and "\n" not in str(raised.value)


def test_a_key_beside_a_merge_overrides_the_merged_one(tmp_path):
    path = tmp_path / "merge.yaml"
    path.write_text("base: &b {name: STS12, fast: STS13}\ntasks:\n  STS:\n    - {<<: *b, fast: STS14}\n")
    assert read_task_file(path).spec("STS12").fast == "STS14"  # YAML's merge rule, not a duplicate key


def test_the_packaged_task_file_keeps_the_local_copies_described_once():
    task_file = read_task_file()
    mtop, news = task_file.spec("MTOPIntentClassification"), task_file.spec("TwentyNewsgroupsClustering")
    assert mtop.local_files == {"train": ("validation.jsonl",)} and mtop.partial.startswith("1237 of mteb's 4386")
    assert news.local_files == {"test": ("test.jsonl",)} and news.partial.startswith("subject lines")


def test_unknown_task_suggests_close_names():
    with pytest.raises(UserError, match="did you mean STSBenchmark"):
        load_task(TaskSpec("STSBenchmarc"))


@pytest.mark.parametrize(
    ("name", "subset", "columns", "n_test"),
    [
        ("STSBenchmark", None, {"sentence1", "sentence2", "score"}, 1379),
        ("TwitterSemEval2015", None, {"sentence1", "sentence2", "labels"}, 838),
        ("Banking77Classification", None, {"text", "label"}, 3080),
        ("STS17", "en-en", {"sentence1", "sentence2", "score"}, 250),
        ("MTOPIntentClassification", "en", {"text", "label"}, 1237),
        ("TwentyNewsgroupsClustering", None, {"sentences", "labels"}, 1),
    ],
)
def test_local_data_has_mtebs_shape(data_dir, name, subset, columns, n_test):
    task = load_task(read_task_file().spec(name), "test", data_dir)
    task.load_data()
    data = task.dataset[subset] if subset else task.dataset
    assert set(data["test"].column_names) == columns
    assert len(data["test"]) == n_test


def test_local_classification_labels_share_one_id_mapping(data_dir):
    task = load_task(read_task_file().spec("MassiveScenarioClassification"), "test", data_dir)
    task.load_data()
    train, test = task.dataset["en"]["train"], task.dataset["en"]["test"]
    assert len(train) == 2033  # SLURP validation stands in for the missing train split
    assert set(test["label"]) <= set(range(len(set(train["label"]) | set(test["label"]))))


def test_local_folder_without_the_needed_split_is_one_clear_error(tmp_path):
    (tmp_path / "STS12").mkdir()
    (tmp_path / "STS12" / "train.jsonl").write_text('{"sentence1": "a", "sentence2": "b", "score": 1}\n')
    with pytest.raises(UserError, match=r"no test\.jsonl"):
        load_task(TaskSpec("STS12"), "test", tmp_path)


def test_local_folder_with_wrong_columns_is_one_clear_error(tmp_path):
    (tmp_path / "STS12").mkdir()
    (tmp_path / "STS12" / "test.jsonl").write_text('{"text": "a", "score": 1}\n')
    with pytest.raises(UserError, match="missing column"):
        load_task(TaskSpec("STS12"), "test", tmp_path)


def test_data_folder_is_the_flag_then_the_environment_then_the_shared_folder_beside_the_checkout(
    tmp_path, monkeypatch, caplog
):
    flag, env, sibling = (tmp_path / name for name in ("flag", "env", "shared"))
    for folder in (flag, env, sibling):
        folder.mkdir()
    monkeypatch.setattr(tasks, "SIBLING_DATA_DIR", sibling)
    monkeypatch.setattr(tasks, "_announced", set())
    monkeypatch.setattr(tasks, "_implicit", set())
    monkeypatch.setenv(tasks.DATA_DIR_ENV, str(env))
    assert tasks.data_dir_from_env(str(flag)) == flag
    assert tasks.data_dir_from_env(None) == env
    tasks.note_data_read(env)  # named by the environment: nothing to say
    monkeypatch.delenv(tasks.DATA_DIR_ENV)
    with caplog.at_level(logging.WARNING, logger="layer_mteb.tasks.catalog"):
        assert tasks.data_dir_from_env(None) == sibling
        assert tasks.data_dir_from_env("") == sibling
        assert not caplog.records  # nothing has read it yet (a run of custom tasks only never does)
        tasks.note_data_read(sibling)
        tasks.note_data_read(sibling)
    assert [str(sibling) in r.getMessage() for r in caplog.records] == [True]  # said once, when read
    monkeypatch.setattr(tasks, "SIBLING_DATA_DIR", tmp_path / "absent")
    assert tasks.data_dir_from_env(None) is None  # then the hub


def test_load_tasks_gives_mteb_tasks_on_the_local_copy(data_dir):
    loaded = tasks.load_tasks("BIOSSES,STS17", data_dir=data_dir)
    assert [t.metadata.name for t in loaded] == ["BIOSSES", "STS17"]
    assert loaded[1].hf_subsets == ["en-en"] and loaded[0].eval_splits == ["test"]  # the paper's subset and split
    with pytest.raises(UserError, match="unknown mteb task"):
        tasks.load_tasks("NoSuchTask", data_dir=data_dir)


def test_a_task_type_is_mtebs_and_only_an_unknown_name_has_none(monkeypatch):
    import mteb

    assert tasks.task_type("STS17") == "STS" and tasks.task_type("Banking77Classification") == "Classification"
    assert tasks.task_type("NoSuchTaskInAnyMteb") is None  # the documented fallback: kept, untyped
    real = mteb.get_task

    def broken(name, *args, **kwargs):
        if name == "STS17":
            raise KeyError("a column missing inside the task class")
        if name == "BIOSSES":
            raise RuntimeError("mteb changed its task registry")
        return real(name, *args, **kwargs)

    monkeypatch.setattr(mteb, "get_task", broken)
    with pytest.raises(KeyError, match="column missing"):  # a known task failing is not an unknown name
        tasks.task_type("STS17")
    with pytest.raises(RuntimeError, match="registry"):
        tasks.task_type("BIOSSES")
