"""A run folder as one object (:class:`RunFolder`): what it writes it reads back unchanged, an update keeps every row
it does not replace, and a missing, torn or mixed table is refused in one line, the file left as it was."""

from __future__ import annotations

import json
import logging
import os
import subprocess
import sys
from functools import partial

import pandas as pd
import pytest

from layer_mteb.analysis.labels.budget import labels_file
from layer_mteb.analysis.selection.picks import selection_file
from layer_mteb.analysis.selection.selectors import PICKS_TABLE
from layer_mteb.common.config import SETTINGS_COLUMNS, EncodeConfig
from layer_mteb.common.errors import UserError
from layer_mteb.common.run_folder import RUN_LOG, SCORES_FILE, RunFolder, sharded
from layer_mteb.evaluation.sweep import merged_log
from layer_mteb.metrics import METRIC_COLUMNS, METRICS_TABLE
from layer_mteb.metrics.agreement import AGREEMENT_COLUMNS, AGREEMENT_TABLE
from layer_mteb.metrics.bimodality import DIP_COLUMNS, DIPS_TABLE, STRESS_COLUMNS, STRESS_TABLE
from layer_mteb.metrics.stress_tests import record_stress_run

SETTINGS = EncodeConfig(attention="causal").key()  # as a sweep records it: the attention that ran


def _score(task: str, layer: int, score: float, model: str = "org/m", **settings: object) -> dict:
    return {
        "model": model,
        "revision": "r1",
        "layer": layer,
        "n_layers": 2,
        "relative_depth": layer / 2,
        "task": task,
        "task_type": "STS",
        "split": "test",
        "subset": "default",
        "main_score": score,
        **{**SETTINGS, **settings},
        "data": "local",
    }


def _metric(texts: str, layer: int, value: float, model: str = "org/m") -> dict:
    return {
        "model": model,
        "revision": "r1",
        "layer": layer,
        "n_layers": 2,
        "relative_depth": layer / 2,
        "texts": texts,
        "task": "",
        "metric": "prompt_entropy",
        "value": value,
        "n": 10,
        **SETTINGS,
    }


def test_scores_written_are_read_back_and_an_update_replaces_only_its_rows(tmp_path):
    folder = RunFolder(tmp_path / "run")
    assert folder.scores(missing_ok=True).empty  # a new folder holds nothing yet
    (tmp_path / "run").mkdir()
    first = folder.update_scores([_score("A", 0, 0.5), _score("B", 0, 0.25)])
    read = folder.scores()
    assert read[["task", "layer", "main_score"]].values.tolist() == [["A", 0, 0.5], ["B", 0, 0.25]]
    assert read["layer"].dtype.kind == "i" and len(first) == 2
    before = folder.scores_file.read_bytes()
    folder.write_scores(folder.scores())  # read and written again: the same bytes
    assert folder.scores_file.read_bytes() == before
    folder.update_scores([_score("A", 0, 0.75), _score("A", 1, 0.5)])
    rows = folder.scores().set_index(["task", "layer"])["main_score"].to_dict()
    assert rows == {("A", 0): 0.75, ("A", 1): 0.5, ("B", 0): 0.25}  # A@0 replaced, B kept, A@1 added


def test_each_table_is_read_once_per_object_and_again_after_its_own_write(tmp_path, monkeypatch):
    reads: list[str] = []
    read_csv = pd.read_csv
    monkeypatch.setattr(pd, "read_csv", lambda path, **kw: reads.append(os.path.basename(path)) or read_csv(path, **kw))
    folder = RunFolder(tmp_path)
    folder.update_scores([_score("A", 0, 0.5)])
    reads.clear()
    changed = folder.scores()
    changed["main_score"] = 0.0  # a caller's change stays in its own copy
    assert folder.scores()["main_score"].tolist() == [0.5] and RunFolder(folder).scores().shape[0] == 1
    assert reads == [SCORES_FILE]  # one read, shared by a RunFolder built from this one
    folder.write_scores(pd.DataFrame([_score("A", 0, 0.5), _score("A", 1, 0.75)]))
    assert folder.scores()["layer"].tolist() == [0, 1] and reads == [SCORES_FILE] * 2
    folder.update(METRICS_TABLE, pd.DataFrame([_metric("wikitext", 0, 1.0)]))
    assert len(folder.read(METRICS_TABLE)) == 1
    RunFolder(tmp_path).update(METRICS_TABLE, pd.DataFrame([_metric("task:A", 0, 2.0)]))  # another writer's rows
    folder.update(METRICS_TABLE, pd.DataFrame([_metric("task:B", 0, 3.0)]))  # read under the lock, not the kept copy
    assert sorted(folder.read(METRICS_TABLE)["texts"]) == ["task:A", "task:B", "wikitext"]


def test_a_missing_torn_column_short_or_empty_scores_table_is_one_line(tmp_path):
    with pytest.raises(UserError, match="does not exist"):
        RunFolder(tmp_path / "nowhere").scores()
    with pytest.raises(UserError, match=r"no scores\.csv in .*layer-mteb run --model MODEL"):
        RunFolder(tmp_path).scores()
    cases = {
        b'model,layer,n_layers,task,main_score\n"m,0,2,A,0.5\n': "cannot read",
        b"\xff\xfe\x00": "cannot read",
        b"model,layer,task\nm,0,A\n": r"is missing column\(s\) \['main_score', 'n_layers'\]",
        b"model,layer,n_layers,task,main_score\n": "has no scores yet",
    }
    for content, message in cases.items():
        (tmp_path / SCORES_FILE).write_bytes(content)
        with pytest.raises(UserError, match=message) as err:
            RunFolder(tmp_path).scores()
        assert "\n" not in str(err.value)
    assert RunFolder(tmp_path).scores(missing_ok=True).empty  # the header alone: a run that wrote no row yet


def test_a_side_table_update_keeps_the_rows_it_does_not_replace(tmp_path):
    folder = RunFolder(tmp_path)
    folder.update(METRICS_TABLE, pd.DataFrame([_metric("wikitext", 0, 1.0), _metric("wikitext", 1, 2.0)]))
    folder.update(METRICS_TABLE, pd.DataFrame([_metric("task:A", 0, 3.0)]))
    # a row the user added by hand (another model) is not this update's to drop
    by_hand = pd.concat([folder.read(METRICS_TABLE), pd.DataFrame([_metric("wikitext", 0, 9.0, model="org/other")])])
    by_hand.to_csv(folder.file("metrics.csv"), index=False)
    folder.update(METRICS_TABLE, pd.DataFrame([_metric("wikitext", 0, 5.0)]))
    stored = folder.read(METRICS_TABLE)
    assert list(stored.columns) == METRIC_COLUMNS
    values = stored.set_index(["model", "texts", "layer"])["value"].to_dict()
    assert values == {("org/m", "wikitext", 0): 5.0, ("org/m", "task:A", 0): 3.0, ("org/other", "wikitext", 0): 9.0}


def test_agreement_curves_replace_their_key_and_rewrite_to_the_same_bytes(tmp_path):
    folder = RunFolder(tmp_path)

    def curve(metric: str, values: list[float]) -> pd.DataFrame:
        key = {"task": "A", "reference": "ref", "reference_revision": "x", "metric": metric, "outlier": "none"}
        rows = [{**_score("A", k, 0.0), **key, "n": 8, "k": 2, "seed": 0, "value": v} for k, v in enumerate(values)]
        rows = [{**row, "all_texts": False} for row in rows]
        return pd.DataFrame(rows)[AGREEMENT_COLUMNS]

    folder.update(AGREEMENT_TABLE, curve("mknn", [0.1, 0.2, 0.3]))
    folder.update(AGREEMENT_TABLE, curve("cka", [0.4, 0.5, 0.6]))
    once = folder.file("agreement.csv").read_bytes()
    folder.update(AGREEMENT_TABLE, curve("cka", [0.4, 0.5, 0.6]))
    assert folder.file("agreement.csv").read_bytes() == once
    folder.update(AGREEMENT_TABLE, curve("mknn", [0.7, 0.8, 0.9]))
    stored = folder.read(AGREEMENT_TABLE)
    assert stored[stored["metric"] == "mknn"]["value"].tolist() == [0.7, 0.8, 0.9]
    assert stored[stored["metric"] == "cka"]["value"].tolist() == [0.4, 0.5, 0.6]


def test_a_torn_side_table_is_refused_and_left_as_it_was(tmp_path):
    folder = RunFolder(tmp_path)
    torn = b'model,revision,layer\n"org/m,r1,0\n'
    folder.file("metrics.csv").write_bytes(torn)
    with pytest.raises(UserError, match=r"cannot read .*metrics\.csv.*layer-mteb metrics --run") as err:
        folder.update(METRICS_TABLE, pd.DataFrame([_metric("wikitext", 0, 1.0)]))
    assert "\n" not in str(err.value)
    assert folder.file("metrics.csv").read_bytes() == torn  # never replaced by this run's rows alone
    folder.file("agreement.csv").write_text("model,layer\norg/m,0\n")
    with pytest.raises(UserError, match=r"agreement\.csv is missing column\(s\)"):
        folder.read(AGREEMENT_TABLE)


def test_stress_tables_merge_across_forms_and_runs_are_recorded_once_per_key(tmp_path):
    folder = RunFolder(tmp_path)

    def values(test: str, value: float) -> pd.DataFrame:
        row = {"model": "m", "test": test, "level": 0.0, "prompt": 0, "layer": 0, "normalization": "maxEntropy"}
        return pd.DataFrame([{**row, "value": value, "texts": "wikitext", "readout": "raw"}])[STRESS_COLUMNS]

    def dips(test: str) -> pd.DataFrame:
        row = {"model": "m", "texts": "wikitext", "test": test, "level": 0.0, "layer": 0, "dip": 0.1}
        return pd.DataFrame([{**row, "p_value": 0.5, "n": 8, "readout": "raw"}])[DIP_COLUMNS]

    folder.update(STRESS_TABLE, values("randomness", 1.0)), folder.update(DIPS_TABLE, dips("randomness"))
    path = folder.update(STRESS_TABLE, values("repetition", 2.0), gzip=True)
    folder.update(DIPS_TABLE, dips("repetition"))
    assert path.name == "stress.csv.gz" and not folder.file("stress.csv").exists()
    assert sorted(folder.read(STRESS_TABLE)["test"]) == ["randomness", "repetition"]
    assert sorted(folder.read(DIPS_TABLE)["test"]) == ["randomness", "repetition"]
    for seconds in (1.0, 2.0):
        record_stress_run(folder, {"model": "m", "texts": "wikitext", "readout": "raw", "tests": ["x"], "s": seconds})
    assert [run["s"] for run in json.loads(folder.file("stress.json").read_text())["runs"]] == [2.0]


def test_the_one_model_and_setting_of_a_folder_or_its_one_line_refusal(tmp_path):
    folder = RunFolder(tmp_path)
    folder.update_scores([_score("A", 0, 0.5), _score("A", 2, 0.75)])
    scored = folder.setting(device="cpu")
    assert (scored.model, scored.revision, scored.n_layers) == ("org/m", "r1", 2)
    assert scored.config == EncodeConfig(device="cpu", attention="causal")
    folder.update_scores([_score("A", 0, 0.5, model="org/b")])
    with pytest.raises(UserError, match=r"several models or revisions \(org/b @ r1, org/m @ r1\)") as err:
        folder.setting()
    assert "\n" not in str(err.value)
    other = RunFolder(tmp_path / "other")
    (tmp_path / "other").mkdir()
    other.write_scores(pd.DataFrame([_score("A", 0, 0.5), _score("A", 1, 0.5, readout="raw")]))
    with pytest.raises(UserError, match=r"several settings of org/m \(readout differ\)"):
        other.one_setting()
    with pytest.raises(UserError, match="already holds scores of several settings: give a new --output"):
        other.held_setting()  # what a new run into the folder is checked against
    runs, setting = folder.held_setting()
    assert runs == {("org/m", "r1"), ("org/b", "r1")} and setting["attention"] == "causal"
    bare = RunFolder(tmp_path / "bare")  # a table made by hand: model, layer, task and score only
    (tmp_path / "bare").mkdir()
    bare.write_scores(pd.DataFrame([{"model": "org/m", "layer": 0, "n_layers": 2, "task": "A", "main_score": 0.5}]))
    said = ", ".join(["revision", *SETTINGS_COLUMNS])  # every setting, however many the package has
    with pytest.raises(UserError, match=rf"do not say their {said} \(not written by") as err:
        bare.held_setting()
    assert "\n" not in str(err.value)


def test_run_log_keeps_other_units_and_the_computing_runs_record(tmp_path, caplog):
    folder = RunFolder(tmp_path)
    computed = {"model": "m", "task": "A", "settings": {}, "units_evaluated": 3, "texts_encoded": 9, "seconds": {}}
    other = {"model": "m", "task": "B", "settings": {}, "task_file": "tasks.yaml", "data_dir": str(tmp_path)}
    folder.update_log(partial(merged_log, new=[computed, other]))
    reused = {"model": "m", "task": "A", "settings": {}, "units_evaluated": 0, "texts_encoded": 0}
    folder.update_log(partial(merged_log, new=[reused]))
    entries = {entry["task"]: entry for entry in folder.log()}
    assert entries["A"]["computed"]["units_evaluated"] == 3 and entries["B"] == other
    recorded = folder.recorded_tasks()
    assert recorded.task_files == {"B": "tasks.yaml:B"} and recorded.tasks_value("A") == "A"
    assert recorded.data_dir == tmp_path
    folder.file(RUN_LOG).write_text("{")  # by another hand: a new RunFolder reads it (this one keeps what it read)
    with caplog.at_level(logging.WARNING, logger="layer_mteb"):
        assert RunFolder(tmp_path).log() == []
    assert "is unreadable" in caplog.text


def test_side_files_older_than_the_scores_are_named_with_their_command(tmp_path):
    folder = RunFolder(tmp_path)
    for name in ("selection.csv", "metrics.csv", "correlation.csv"):
        folder.file(name).write_text("model\nm\n")
        os.utime(folder.file(name), (1, 1))
    folder.update_scores([_score("A", 0, 0.5)])
    stale = {path.name: command for path, command in folder.stale_side_files()}
    assert stale == {"selection.csv": "layer-mteb select", "correlation.csv": "layer-mteb correlate"}


def test_shard_tables_and_named_tables_land_where_their_readers_look(tmp_path):
    shard = RunFolder(tmp_path, (1, 2))
    shard.update_scores([_score("B", 0, 0.25)])
    assert shard.scores_file.name == sharded(SCORES_FILE, (1, 2)) == "scores.shard-1-of-2.csv"
    assert shard.log_file.name == "run.shard-1-of-2.json"
    folder = RunFolder(tmp_path)
    assert folder.shard_score_files() == [shard.scores_file] and not folder.has_scores()
    folder.update_scores([_score("A", 0, 0.5)])
    assert sorted(folder.held_scores()["task"]) == ["A", "B"]  # the whole run's and the unmerged shard's
    picks = pd.DataFrame({"model": ["m"], "selector": ["last_layer"], "task": ["mean"], "chosen_layer": [2]})
    folder.write_table(selection_file("prompt_entropy"), picks)
    assert folder.read(PICKS_TABLE._replace(file=selection_file("prompt_entropy"))).equals(picks)
    assert selection_file(["a", "b"]) == "selection.a+b.csv" and labels_file(8) == "selection.labels-8.csv"
    with pytest.raises(UserError, match=r"no selection\.csv in .*layer-mteb select --run"):
        folder.read(PICKS_TABLE)


def test_the_run_folder_module_loads_no_pandas():
    code = "import sys, layer_mteb.common.run_folder; print('pandas' in sys.modules)"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stdout.strip() == "False"


def test_a_setting_added_since_a_table_was_written_reads_as_its_default(tmp_path):
    """A run folder written before a setting existed stays readable: in a table that records the settings, the
    missing one is its default (the behaviour it was written with); a table without settings gains none."""
    from conftest import write_tiny_gpt2_scores

    run = write_tiny_gpt2_scores(tmp_path / "run")
    pd.read_csv(run / "scores.csv").drop(columns=["normalize"]).to_csv(run / "scores.csv", index=False)
    pd.DataFrame({"model": ["m"], "selector": ["oracle"], "task": ["BIOSSES"]}).to_csv(run / "selection.csv")
    folder = RunFolder(run)
    assert (folder.scores()["normalize"] == False).all()  # noqa: E712 (a column of booleans)
    assert folder.held_setting()[1]["normalize"] == "False"
    assert "normalize" not in folder.read(PICKS_TABLE).columns
