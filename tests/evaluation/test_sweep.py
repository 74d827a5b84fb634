"""The sweep: one forward pass per unique text per task, whatever the number of layers; tidy results on disk."""

from __future__ import annotations

import json

import pandas as pd
import pytest
from conftest import ForwardCounter, tiny_model

from layer_mteb.common.config import EncodeConfig
from layer_mteb.common.errors import UserError
from layer_mteb.common.scores import SCORE_COLUMNS
from layer_mteb.evaluation.encoder import resolve_settings
from layer_mteb.evaluation.plan import parse_layers
from layer_mteb.evaluation.sweep import sweep
from layer_mteb.tasks.catalog import TaskSpec, load_task
from layer_mteb.vectors.store import store_folder


def unique_texts(data_dir, name):
    rows = [json.loads(line) for line in (data_dir / name / "test.jsonl").open()]
    return {r[k] for r in rows for k in ("sentence1", "sentence2")}


def test_forward_runs_once_per_unique_text_whatever_the_layers(tiny_gpt_neox, data_dir, tmp_path):
    config = EncodeConfig(batch_size=32)
    expected = len(unique_texts(data_dir, "STS17")) + len(unique_texts(data_dir, "BIOSSES"))
    for layers in ("0", "all"):
        counter = ForwardCounter(tiny_gpt_neox.model)
        try:
            frame = sweep(
                tiny_gpt_neox,
                "STS17,BIOSSES",
                layers=layers,
                config=config,
                data_dir=data_dir,
                vector_cache=False,
                progress=False,
            )
        finally:
            counter.close()
        assert counter.texts == expected
        assert len(frame) == 2 * len(parse_layers(layers, tiny_gpt_neox.n_layers))


def test_results_are_written_per_unit_and_reused(tiny_gpt_neox, data_dir, tmp_path):
    out = tmp_path / "run"
    config = EncodeConfig(batch_size=32)
    first = sweep(tiny_gpt_neox, ["STS17"], config=config, data_dir=data_dir, output=out, progress=False)
    on_disk = pd.read_csv(out / "scores.csv")
    assert list(on_disk.columns) == SCORE_COLUMNS
    assert on_disk["layer"].tolist() == [0, 1, 2]
    assert on_disk["subset"].unique().tolist() == ["en-en"]
    assert on_disk["relative_depth"].tolist() == [0.0, 0.5, 1.0]
    assert len(list((out / "mteb").rglob("STS17.json"))) == 3  # one mteb result JSON per layer

    counter = ForwardCounter(tiny_gpt_neox.model)
    try:
        again = sweep(tiny_gpt_neox, ["STS17"], config=config, data_dir=data_dir, output=out, progress=False)
    finally:
        counter.close()
    assert counter.texts == 0
    pd.testing.assert_frame_equal(first, again)


def test_saved_vectors_serve_a_new_run_without_forward_passes(tiny_gpt_neox, data_dir):
    config = EncodeConfig(batch_size=32, max_length=64)
    first = sweep(tiny_gpt_neox, ["BIOSSES"], config=config, data_dir=data_dir, progress=False)
    counter = ForwardCounter(tiny_gpt_neox.model)
    try:
        again = sweep(tiny_gpt_neox, ["BIOSSES"], config=config, data_dir=data_dir, progress=False)
    finally:
        counter.close()
    assert counter.texts == 0
    pd.testing.assert_frame_equal(first, again)


def test_given_task_objects_are_swept_as_they_are(tiny_gpt_neox, data_dir):
    task = load_task(TaskSpec("BIOSSES"), "test", data_dir)
    frame = sweep(tiny_gpt_neox, [task], layers="-1", vector_cache=False, progress=False)
    assert frame["layer"].tolist() == [2] and frame["task"].tolist() == ["BIOSSES"]


@pytest.mark.parametrize(
    ("text", "want"),
    [("all", [0, 1, 2, 3, 4]), ("0,3,-1", [0, 3, 4]), ("1:3", [1, 2]), ("::2", [0, 2, 4]), ("-2:", [3, 4])],
)
def test_parse_layers(text, want):
    assert parse_layers(text, 4) == want


@pytest.mark.parametrize(("text", "message"), [("7", "out of range"), ("a,b", "not 'all'"), ("5:9", "selects no")])
def test_parse_layers_explains_bad_input(text, message):
    with pytest.raises(UserError, match=message):
        parse_layers(text, 4)


def test_torn_vector_cache_and_result_files_are_recomputed_with_a_warning(
    tiny_gpt_neox, data_dir, tmp_path, caplog, monkeypatch
):
    monkeypatch.setenv("LAYER_MTEB_CACHE", str(tmp_path / "cache"))  # a cache of this test's own
    out = tmp_path / "run"
    config = EncodeConfig(batch_size=32, max_length=48)
    first = sweep(tiny_gpt_neox, ["STS17"], config=config, data_dir=data_dir, output=out, progress=False)
    [vectors] = (tmp_path / "cache").glob("vectors/**/STS17/vectors.safetensors")  # the one this sweep wrote
    vectors.write_bytes(vectors.read_bytes()[:100])  # torn: a killed writer without atomic rename
    result = sorted((out / "mteb").rglob("STS17.json"))[0]
    result.write_text(result.read_text()[:50])
    counter = ForwardCounter(tiny_gpt_neox.model)
    try:
        again = sweep(tiny_gpt_neox, ["STS17"], config=config, data_dir=data_dir, output=out, progress=False)
    finally:
        counter.close()
    assert counter.texts > 0  # the torn cache was not trusted
    assert "unreadable cache" in caplog.text and "unreadable result" in caplog.text
    pd.testing.assert_frame_equal(first, again, check_exact=True)


def test_run_log_scores_mteb_experiment_and_vector_store_all_name_the_attention_that_ran(
    bert_tokenizer, data_dir, tmp_path
):
    """A decoder swept with the default ``attention=None`` runs causally, and every record of the run says so; an
    entry already in the folder's run.json (another unit, its own settings) is kept as it was."""
    loaded = tiny_model("llama", bert_tokenizer)
    out = tmp_path / "run"
    out.mkdir()
    old_settings = {**EncodeConfig().key(), "attention": None}
    old_entry = {"model": "old/model", "revision": "r", "task": "STS12", "settings": old_settings, "units_evaluated": 3}
    (out / "run.json").write_text(json.dumps({"tasks": [old_entry]}))
    frame = sweep(
        loaded, ["BIOSSES"], layers="-1", config=EncodeConfig(), data_dir=data_dir, output=out, progress=False
    )
    entries = {entry["model"]: entry for entry in json.loads((out / "run.json").read_text())["tasks"]}
    assert entries["old/model"]["settings"]["attention"] is None and entries["old/model"]["units_evaluated"] == 3
    entry = entries[loaded.name]
    assert entry["settings"]["attention"] == "causal" and entry["data"] == "local" and entry["eval_workers"] >= 1
    assert set(frame["attention"]) == set(pd.read_csv(out / "scores.csv")["attention"]) == {"causal"}
    (meta,) = (out / "mteb").rglob("model_meta.json")
    assert json.loads(meta.read_text())["experiment_kwargs"]["attention"] == "causal"
    assert "attention_causal" in meta.parent.name
    asked_causal = resolve_settings(loaded, EncodeConfig(attention="causal"))
    assert store_folder(loaded, asked_causal, "BIOSSES").is_dir()  # the key of what ran, not of what was asked
    assert entry["settings"] == asked_causal.key()
