"""WikiText comes from the data folder's copy, else the hub (the texts the paper measured, selected as the authors'
code selects them), else the sample the package ships; each number says which (``data`` in ``metrics.csv`` and
``stress.json``). The hub is not reachable here: the authors' selection is checked on a real in-memory
``datasets.Dataset`` of WikiText-2 raw lines."""

from __future__ import annotations

import json
import logging
import socket
from pathlib import Path, PurePosixPath

import numpy as np
import pandas as pd
import pytest
from _metric_fixtures import minilm_tokenizer
from conftest import REPO, SHARED_DATA, needs
from datasets import Dataset
from huggingface_hub import constants

from layer_mteb.cli import main
from layer_mteb.common.run_folder import RunFolder
from layer_mteb.metrics import METRIC_COLUMNS, METRICS_TABLE
from layer_mteb.metrics.texts import load_texts
from layer_mteb.metrics.wikitext import (
    LOCAL_FILE,
    ORIGIN_HUB,
    ORIGIN_LOCAL,
    ORIGIN_PACKAGED,
    SAMPLE_FILE,
    authors_selection,
    is_heading,
    wikitext_origin,
)

WIKITEXT2 = SHARED_DATA / "WikiText2"
needs_wikitext2 = needs(WIKITEXT2 / "wiki.test.raw", "WikiText-2 in the shared data folder")


@pytest.fixture
def no_data_folder(tmp_path, monkeypatch) -> Path:
    """A fresh clone: no ``$LAYER_MTEB_DATA``, nothing beside the checkout, the hub offline (``HF_HUB_OFFLINE=1``)."""
    monkeypatch.delenv("LAYER_MTEB_DATA", raising=False)
    monkeypatch.setattr("layer_mteb.tasks.catalog.SIBLING_DATA_DIR", tmp_path / "no-shared-data")
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setattr(constants, "HF_HUB_OFFLINE", True)
    return tmp_path


def _sample_texts() -> list[str]:
    return [json.loads(line)["text"] for line in SAMPLE_FILE.read_text(encoding="utf-8").splitlines()]


def _data_folder(root: Path, texts: list[str]) -> Path:
    (root / LOCAL_FILE).parent.mkdir(parents=True)
    (root / LOCAL_FILE).write_text("".join(json.dumps({"text": t}) + "\n" for t in texts), encoding="utf-8")
    return root


# ------------------------------------------------------------------------------------------- the authors' selection
def test_a_heading_starts_and_ends_with_equals_signs():
    assert is_heading(" = Robert Boulter = \n") and is_heading(" = = = 2000 – 2005 = = = \n")
    assert not is_heading(" = the start of an equation\n") and not is_heading("a = b\n") and not is_heading("\n")


def test_the_authors_selection_keeps_the_first_rows_drops_headings_and_short_rows_then_shuffles_with_seed_42():
    rows = [" = Title = \n", "tiny row\n", "ten chars!", "= not a heading\n", "\n", " = = Part = = \n", "kept rows\n"]
    rows += [f"row number {i}\n" for i in range(1000)]  # rows 7 ... 1006: only the first 993 are read
    selected = authors_selection(Dataset.from_dict({"text": rows}))
    kept = ["ten chars!", "= not a heading\n", "kept rows\n", *(f"row number {i}\n" for i in range(993))]
    assert len(selected) == 996 and sorted(selected) == sorted(kept)  # "tiny row\n": 9 characters, under 10
    assert selected == [kept[i] for i in np.random.default_rng(42).permutation(len(kept))]  # Dataset.shuffle(seed=42)


@needs_wikitext2
def test_the_authors_selection_of_real_wikitext_rows():
    """WikiText-2's raw test lines, as rows of a real ``datasets.Dataset``: of the first 1,000 lines, 758 are blank
    and 66 headings, 176 paragraphs remain, in the order seed 42 shuffles them."""
    with (WIKITEXT2 / "wiki.test.raw").open(encoding="utf-8") as raw:
        lines = raw.readlines()  # as datasets' text loader reads them: one row a line, newline kept
    selected = authors_selection(Dataset.from_dict({"text": lines}))
    assert len(selected) == 176 and len(set(selected)) == 176
    paragraphs = [i for i, line in enumerate(lines[:1000]) if line.strip() and not line.strip().startswith("=")]
    assert paragraphs[:3] == [7, 10, 27] and len(paragraphs) == 176
    order = [927, 327, 86, 220, 781]  # the first five after the shuffle, as line numbers of the file (from 0)
    assert selected[:5] == [lines[i] for i in order]
    assert selected[0].startswith(" The NK 9th Division 's infantry") and selected[0].endswith(" . \n")  # as read
    assert all(lines[i] in selected for i in paragraphs) and lines[1002] not in selected  # line 1002: the next one


# ------------------------------------------------------------------------------------------------- the sample
@needs_wikitext2
def test_the_packaged_sample_is_every_fifth_paragraph_of_the_data_folders_copy():
    paragraphs = (WIKITEXT2 / "test_paragraphs.jsonl").read_bytes().splitlines(keepends=True)
    sample = SAMPLE_FILE.read_bytes()
    assert sample == b"".join(paragraphs[::5]) and len(sample.splitlines()) == 437
    assert len(sample) < 300_000


def test_the_sample_has_enough_paragraphs_for_the_default_sizes(no_data_folder):
    """``metrics``' default 200 prompts (of at least 30 tokens) and ``stress``'s 16 come from the sample alone."""
    usable = load_texts("wikitext", tokenizer=minilm_tokenizer(), n_prompts=10**6)
    assert usable.data == ORIGIN_PACKAGED and usable.n_available == 359 >= 200


def test_the_package_data_lists_the_sample():
    tomllib = pytest.importorskip("tomllib")  # Python 3.11 on
    patterns = tomllib.loads((REPO / "pyproject.toml").read_text())["tool"]["setuptools"]["package-data"]["layer_mteb"]
    shipped = sorted(p.relative_to(REPO / "layer_mteb").as_posix() for p in SAMPLE_FILE.parent.iterdir())
    assert shipped == ["metrics/wikitext_sample/README.md", "metrics/wikitext_sample/test_paragraphs.jsonl"]
    assert all(
        any(PurePosixPath(path).match(p) and p.count("/") == path.count("/") for p in patterns) for path in shipped
    )


# --------------------------------------------------------------------------------------------------- precedence
def test_the_data_folder_wins_then_the_hub_then_the_sample(no_data_folder, monkeypatch):
    folder = _data_folder(no_data_folder / "data", ["word " * 40 + "local"])
    assert wikitext_origin() == ORIGIN_PACKAGED and wikitext_origin(folder) == ORIGIN_LOCAL
    monkeypatch.setenv("LAYER_MTEB_DATA", str(folder))
    assert wikitext_origin() == ORIGIN_LOCAL
    monkeypatch.setenv("HF_HUB_OFFLINE", "0")  # the hub answers (decided by the user: never probed)
    monkeypatch.setattr(constants, "HF_HUB_OFFLINE", False)
    assert wikitext_origin() == ORIGIN_LOCAL
    monkeypatch.delenv("LAYER_MTEB_DATA")
    assert wikitext_origin() == ORIGIN_HUB == "wikitext-103-v1 train (hub, authors' recipe)"


@pytest.mark.parametrize("answers", [True, False])
def test_unset_hf_hub_offline_the_one_probe_decides_between_hub_and_sample(answers, no_data_folder, monkeypatch):
    """``HF_HUB_OFFLINE`` unset: the package's one hub decision (``hub_online``) is asked, once; a hub that refuses
    connections (a bound port that never listens) sends WikiText to the packaged sample."""
    with socket.socket() as listening, socket.socket() as refusing:
        listening.bind(("127.0.0.1", 0))
        listening.listen()
        refusing.bind(("127.0.0.1", 0))
        port = (listening if answers else refusing).getsockname()[1]
        monkeypatch.setattr(constants, "ENDPOINT", f"http://127.0.0.1:{port}")
        monkeypatch.delenv("HF_HUB_OFFLINE")
        monkeypatch.setattr(constants, "HF_HUB_OFFLINE", False)
        monkeypatch.setattr("layer_mteb.common.hub._probed", False)  # a new process: nothing decided yet
        monkeypatch.setattr("layer_mteb.common.hub._unreachable", False)
        assert wikitext_origin() == (ORIGIN_HUB if answers else ORIGIN_PACKAGED)
        assert constants.HF_HUB_OFFLINE is not answers


def test_with_no_data_folder_the_texts_are_the_packaged_samples(no_data_folder):
    source = load_texts("wikitext", tokenizer=minilm_tokenizer(), n_prompts=20, seed=3)
    assert source.name == "wikitext" and source.data == ORIGIN_PACKAGED
    assert len(source.texts) == 20 and set(source.texts) <= {t.strip() for t in _sample_texts()}


def test_a_data_folder_given_wins_over_the_sample(no_data_folder):
    long = "word " * 40
    folder = _data_folder(no_data_folder / "data", [" = Heading = ", long + "one", long + "two"])
    source = load_texts("wikitext", tokenizer=minilm_tokenizer(), data_dir=folder, n_prompts=20)
    assert source.data == ORIGIN_LOCAL and source.texts == ((long + "one").strip(), (long + "two").strip())


# ------------------------------------------------------------------------------------------------- what is recorded
def test_metrics_with_no_data_folder_use_the_packaged_sample_and_say_so(no_data_folder, caplog):
    out = no_data_folder / "run"
    argv = ["metrics", "--model", "minilm-l6", "--texts", "wikitext", "--n-prompts", "6", "--views", "0"]
    with caplog.at_level(logging.INFO):
        assert main([*argv, "--output", str(out)]) == 0
    stored = RunFolder(out).read(METRICS_TABLE)
    assert set(stored["texts"]) == {"wikitext"} and set(stored["data"]) == {ORIGIN_PACKAGED}
    assert set(stored.loc[stored["metric"] == "dataset_entropy", "n"]) == {6}
    said = [r.getMessage() for r in caplog.records if r.name == "layer_mteb.metrics.runner"]
    assert said[0].startswith(f"metrics of wikitext [{ORIGIN_PACKAGED}]: 6 prompts")


def test_metrics_with_a_data_dir_record_the_local_copy(no_data_folder):
    long = "word " * 40
    folder = _data_folder(no_data_folder / "data", [long + str(i) for i in range(4)])
    out = no_data_folder / "run"
    argv = ["metrics", "--model", "minilm-l6", "--texts", "wikitext", "--views", "0", "--data-dir", str(folder)]
    assert main([*argv, "--output", str(out)]) == 0
    stored = RunFolder(out).read(METRICS_TABLE)
    assert set(stored["data"]) == {ORIGIN_LOCAL} and set(stored["n"]) == {4}


def test_stress_records_where_its_prompts_came_from(no_data_folder):
    out = no_data_folder / "run"
    argv = ["stress", "--model", "minilm-l6", "--tests", "randomness", "--n-prompts", "4", "--output", str(out)]
    assert main(argv) == 0
    runs = json.loads((out / "stress.json").read_text())["runs"]
    assert [(r["texts"], r["data"]) for r in runs] == [("wikitext", ORIGIN_PACKAGED)]


def test_a_metrics_table_written_before_the_origin_was_recorded_reads_and_updates(tmp_path):
    old = pd.DataFrame([{c: 0 for c in METRIC_COLUMNS if c != "data"} | {"texts": "wikitext", "model": "m"}])
    old.to_csv(tmp_path / "metrics.csv", index=False)
    folder = RunFolder(tmp_path)
    assert folder.read(METRICS_TABLE)["data"].isna().all()
    new = pd.DataFrame([{c: 0 for c in METRIC_COLUMNS} | {"texts": "task:A", "model": "m", "data": ORIGIN_LOCAL}])
    folder.update(METRICS_TABLE, new)
    stored = RunFolder(tmp_path).read(METRICS_TABLE).set_index("texts")["data"]
    assert pd.isna(stored["wikitext"]) and stored["task:A"] == ORIGIN_LOCAL
