"""A bad custom task is one line naming the file and the fix, found before any model loads: through the real command
line (exit 2, nothing heavy imported, nothing written) for a few cases, through the validator for the rest."""

from __future__ import annotations

from pathlib import Path

import pytest
from _fresh_process import fresh_mains
from _task_files import SENTENCES, write_csv, write_jsonl

from layer_mteb.common.errors import UserError
from layer_mteb.tasks.catalog import select_tasks
from layer_mteb.tasks.custom import check_custom_files

TOPICS = ["cats", "cats", "markets", "markets", "home", "home", "weather", "music"]


def files(folder: Path) -> None:
    """Good files of every kind, and bad ones next to them, under ``folder``."""
    rows = [[t, c] for t, c in zip(SENTENCES, TOPICS, strict=True)]
    write_csv(folder / "train.csv", ["text", "label"], rows)
    write_csv(folder / "test.csv", ["text", "label"], rows)
    write_csv(folder / "empty.csv", ["text", "label"], [])
    write_csv(folder / "one_class.csv", ["text", "label"], [[t, "cats"] for t in SENTENCES])
    write_csv(folder / "intent.csv", ["text", "intent"], rows)
    write_jsonl(folder / "numbers.jsonl", [{"text": i, "label": c} for i, c in enumerate(TOPICS)])
    write_jsonl(folder / "null_text.jsonl", [{"text": t, "label": "a"} for t in [*SENTENCES[:3], None]])
    pairs = [[SENTENCES[i], SENTENCES[i + 1], s] for i, s in zip(range(4), ["4.5", "high", "1", "2"], strict=True)]
    write_csv(folder / "sts_words.csv", ["sentence1", "sentence2", "score"], pairs)
    write_csv(folder / "pairs.csv", ["sentence1", "sentence2", "label"], [[SENTENCES[0], SENTENCES[1], 2]])
    write_jsonl(folder / "corpus.jsonl", [{"id": f"d{i}", "text": t} for i, t in enumerate(SENTENCES)])
    write_csv(folder / "queries.csv", ["id", "text"], [["q1", "a cat"], ["q2", "markets"]])
    write_csv(folder / "qrels.csv", ["query-id", "corpus-id"], [["q1", "d0"], ["q2", "d99"]])
    write_csv(folder / "qrels_query.csv", ["query-id", "corpus-id"], [["q7", "d0"]])
    write_csv(folder / "twice.csv", ["id", "text"], [["q1", "a cat"], ["q1", "markets"]])
    (folder / "texts.txt").write_text("one\ntwo\n")


def task_file(folder: Path, *entries: str, tasks: str = "") -> Path:
    path = folder / "tasks.yaml"
    path.write_text((f"tasks:\n{tasks}" if tasks else "") + "custom:\n" + "".join(f"  - {e}\n" for e in entries))
    return path


CLS = "{name: Mine, type: Classification, files: {train: %s, test: %s}}"
RET = "{name: Mine, type: Retrieval, files: {corpus: %s, queries: %s, qrels: %s}}"
CASES = {
    "missing file": (CLS % ("train.csv", "nowhere.csv"), "nowhere.csv: no such file"),
    "missing column": (
        CLS % ("train.csv", "intent.csv"),
        "no column 'label' (label) for custom task 'Mine'; columns are",
    ),
    "empty split": (CLS % ("train.csv", "empty.csv"), "the 'test' split of custom task 'Mine' is empty"),
    "one class": (CLS % ("one_class.csv", "test.csv"), "holds one class only ('cats'); a Classification task needs"),
    "non-numeric STS score": (
        "{name: Mine, type: STS, files: {test: sts_words.csv}}",
        "sts_words.csv, row 2: column 'score' holds 'high', not a number",
    ),
    "pair label not 0/1": (
        "{name: Mine, type: PairClassification, files: {test: pairs.csv}}",
        "row 1: column 'label' holds '2'; pair labels must be 0 or 1",
    ),
    "qrels naming an unknown document": (
        RET % ("corpus.jsonl", "queries.csv", "qrels.csv"),
        "qrels.csv: 1 corpus id(s) not in corpus.jsonl (e.g. 'd99')",
    ),
    "qrels naming an unknown query": (
        RET % ("corpus.jsonl", "queries.csv", "qrels_query.csv"),
        "1 queries id(s) not in queries.csv (e.g. 'q7')",
    ),
    "an id given twice": (RET % ("corpus.jsonl", "twice.csv", "qrels.csv"), "twice.csv: id 'q1' is given twice"),
    "text that is a number": (CLS % ("train.csv", "numbers.jsonl"), "row 1: column 'text' holds 0 (int), not text"),
    "text that is missing": (CLS % ("train.csv", "null_text.jsonl"), "row 4: column 'text' holds None (NoneType)"),
    "classification without a train split": (
        "{name: Mine, type: Classification, files: {test: test.csv}}",
        "Classification task 'Mine' has no 'train' file: mteb fits its classifier on a train split",
    ),
    "no file for the evaluation split": (
        "{name: Mine, type: Clustering, files: {train: train.csv}}",
        "has no file for the evaluation split 'test'",
    ),
    "a file type that is not read": ("{name: Mine, type: Clustering, files: {test: texts.txt}}", "cannot read .txt"),
    "an unknown type": ("{name: Mine, type: Summarization, files: {test: test.csv}}", "needs 'type:' one of"),
    "an unknown key": ("{name: Mine, type: STS, files: {test: x.csv}, colums: {}}", "unknown keys ['colums']"),
    "a setting of another type": (
        "{name: Mine, type: STS, files: {test: test.csv}, samples_per_label: 4}",
        "'samples_per_label:' does not apply to STS task 'Mine'",
    ),
    "an unknown role": (
        "{name: Mine, type: STS, files: {test: test.csv}, columns: {text: a}}",
        "must map roles ['score', 'text1', 'text2'] to column names",
    ),
    "retrieval without qrels": (
        "{name: Mine, type: Retrieval, files: {corpus: corpus.jsonl, queries: queries.csv}}",
        "needs 'files:' with exactly corpus, queries and qrels",
    ),
    "the name of an mteb task": (
        "{name: STS12, type: STS, files: {test: test.csv}}",
        "custom task 'STS12' has the name of an mteb task; rename it",
    ),
    "a bad language code": (
        "{name: Mine, type: Clustering, files: {test: test.csv}, language: english}",
        "custom task 'Mine': mteb rejects its metadata",
    ),
}


@pytest.mark.parametrize("case", list(CASES))
def test_a_bad_custom_task_is_one_line_naming_the_problem(case, tmp_path):
    files(tmp_path)
    entry, message = CASES[case]
    with pytest.raises(UserError) as raised:
        _, specs = select_tasks(str(task_file(tmp_path, entry)))
        check_custom_files(spec.custom for spec in specs)
        if case == "a bad language code":  # mteb's own metadata validation, when the task is built
            from layer_mteb.tasks.custom import task_class

            task_class(specs[0].custom)
    assert message in str(raised.value) and "\n" not in str(raised.value), str(raised.value)


def test_two_tasks_of_one_name_are_refused(tmp_path):
    files(tmp_path)
    entry = "{name: Mine, type: Clustering, files: {test: test.csv}}"
    with pytest.raises(UserError, match="two tasks are named 'Mine'; give each task its own name"):
        select_tasks(str(task_file(tmp_path, entry, entry)))
    with pytest.raises(UserError, match="two tasks are named 'STS12'"):
        select_tasks(str(task_file(tmp_path, entry.replace("Mine", "STS12"), tasks="  STS: [STS12]\n")))


COMMAND_LINE_CASES = [
    "missing file",
    "one class",
    "classification without a train split",
    "the name of an mteb task",
    "empty split",
]


@pytest.fixture(scope="module")
def command_line(tmp_path_factory) -> dict[str, tuple[Path, list[str], tuple[int, list[str], list[str]]]]:
    """Each case's folder, the names in it before, and what ``layer-mteb run`` on its task file did there: all
    cases in one new interpreter."""
    cases = {}
    for case in COMMAND_LINE_CASES:
        folder = tmp_path_factory.mktemp("case")
        files(folder)
        path = task_file(folder, CASES[case][0])
        cases[case] = (folder, sorted(p.name for p in folder.rglob("*")), path)
    results = fresh_mains([(["run", "--model", "minilm-l6", "--tasks", str(path)], f) for f, _, path in cases.values()])
    return {case: (f, before, result) for (case, (f, before, _)), result in zip(cases.items(), results, strict=True)}


@pytest.mark.parametrize("case", COMMAND_LINE_CASES)
def test_the_command_line_stops_at_a_bad_custom_task_before_anything_heavy_loads(case, command_line):
    tmp_path, before, (code, err, heavy) = command_line[case]
    message = CASES[case][1]
    assert code == 2 and len(err) == 1 and err[0].startswith("layer-mteb: error:") and message in err[0], err
    assert heavy == []
    assert sorted(p.name for p in tmp_path.rglob("*")) == before  # no runs/, no output folder, no mteb/
