"""A sentence-transformers model is scored as its own pipeline by default: with no flags, ``layer-mteb run`` takes
its maximum length (all-MiniLM-L6-v2 says 256 tokens), its ``Normalize`` and its pooling mode, so its last layer is
``mteb.evaluate(SentenceTransformer(folder))`` even where the texts are longer than the model reads; the paper's
protocol (512 tokens, no normalisation) stays one named choice, and the settings columns say which applied."""

from __future__ import annotations

import json
import shutil
import warnings

import mteb
import pandas as pd
import pytest
from _task_files import SENTENCES, write_csv, write_jsonl
from conftest import minilm_folder

from layer_mteb.cli import main
from layer_mteb.common.errors import UserError
from layer_mteb.evaluation.request import RunRequest
from layer_mteb.model.pipeline import read_pipeline
from layer_mteb.tasks.catalog import load_tasks

#: facts, each hidden at the end of a long document: a model that reads 256 tokens never sees them
FACTS = [
    ("The lighthouse keeper painted the door bright green.", "what colour is the lighthouse door"),
    ("Our bakery sells rye bread only on Thursdays.", "which day is rye bread sold"),
    ("The museum moved its dinosaur skeleton to the north wing.", "where is the dinosaur skeleton now"),
    ("A violin was found in the attic of the old school.", "what was found in the school attic"),
    ("The ferry to the island leaves at half past seven.", "when does the island ferry leave"),
    ("Volunteers planted three hundred oak trees by the river.", "how many oaks were planted by the river"),
]


def _preamble(i: int) -> str:
    """About 330 word-piece tokens of on-topic-for-nobody text, different per document."""
    words = " ".join(SENTENCES[(i + k) % len(SENTENCES)] for k in range(36))
    return f"Document {i}. {words}"


@pytest.fixture(scope="module")
def long_tasks(tmp_path_factory):
    """A task file with a Retrieval task whose answers sit past token 256 of each document, and a Classification
    task of long texts whose label is said only at their ends."""
    folder = tmp_path_factory.mktemp("long")
    corpus = [{"id": f"d{i}", "text": f"{_preamble(i)} {fact}"} for i, (fact, _) in enumerate(FACTS)]
    write_jsonl(folder / "corpus.jsonl", corpus)
    write_csv(folder / "queries.csv", ["id", "text"], [[f"q{i}", q] for i, (_, q) in enumerate(FACTS)])
    write_csv(folder / "qrels.csv", ["query-id", "corpus-id"], [[f"q{i}", f"d{i}"] for i in range(len(FACTS))])
    endings = ["It was a happy day for everyone.", "It was a sad and gloomy day."]
    rows = [[f"{_preamble(i)} {endings[i % 2]}", i % 2] for i in range(16)]
    write_csv(folder / "train.csv", ["text", "label"], rows[:10])
    write_csv(folder / "test.csv", ["text", "label"], rows[10:])
    path = folder / "long.yaml"
    path.write_text(
        "custom:\n"
        "  - name: LongFacts\n"
        "    type: Retrieval\n"
        "    files: {corpus: corpus.jsonl, queries: queries.csv, qrels: qrels.csv}\n"
        "  - {name: LongMood, type: Classification, files: {train: train.csv, test: test.csv}, samples_per_label: 4}\n"
    )
    return path


@pytest.fixture(scope="module")
def minilm_copy(tmp_path_factory):
    """A copy of all-MiniLM-L6-v2 as a local folder: Transformer (256 tokens) -> mean Pooling -> Normalize."""
    folder = tmp_path_factory.mktemp("copy") / "all-MiniLM-L6-v2-copy"
    shutil.copytree(minilm_folder(), folder)
    return folder


def test_the_pipeline_is_read_from_the_folders_files(minilm_copy, tmp_path):
    pipeline = read_pipeline(minilm_copy)
    assert (pipeline.pooling, pipeline.normalize, pipeline.max_length) == ("mean", True, 256)
    request = RunRequest(str(minilm_copy), "STS12")
    assert (request.config.pooling, request.config.normalize, request.config.max_length) == ("mean", True, 256)
    assert request.settings_from.startswith("model")
    paper = RunRequest(str(minilm_copy), "STS12", protocol="paper")
    assert (paper.config.pooling, paper.config.normalize, paper.config.max_length) == ("mean", False, 512)
    assert paper.settings_from == "paper"
    # the packaged model, and its hub id with the hub offline (it loads as the packaged model), alike
    for name in ("minilm-l6", "sentence-transformers/all-MiniLM-L6-v2"):
        assert RunRequest(name, "STS12").config.key() == request.config.key(), name
    # a pipeline the layers cannot follow is one line naming the fix
    dense = tmp_path / "dense"
    shutil.copytree(minilm_copy, dense)
    modules = json.loads((dense / "modules.json").read_text())
    modules.append({"idx": 3, "name": "3", "path": "3_Dense", "type": "sentence_transformers.models.Dense"})
    (dense / "modules.json").write_text(json.dumps(modules))
    with pytest.raises(UserError, match="has Dense, which a layer's pooled vectors cannot pass through"):
        RunRequest(str(dense), "STS12")
    assert RunRequest(str(dense), "STS12", protocol="paper").config.max_length == 512


@pytest.mark.slow
def test_no_flags_is_mtebs_evaluation_of_the_sentence_transformer_on_texts_longer_than_it_reads(
    minilm_copy, long_tasks, tmp_path
):
    from sentence_transformers import SentenceTransformer

    own, paper = tmp_path / "own", tmp_path / "paper"
    common = ["run", "--model", str(minilm_copy), "--tasks", str(long_tasks), "--layers", "-1", "--eval-workers", "1"]
    assert main([*common, "--output", str(own)]) == 0
    assert main([*common, "--protocol", "paper", "--output", str(paper)]) == 0
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        model = SentenceTransformer(str(minilm_copy), device="cpu")
        result = mteb.evaluate(model, load_tasks(str(long_tasks)), cache=None, show_progress_bar=False)
    theirs = {r.task_name: r.get_score() for r in result.task_results}
    ours = pd.read_csv(own / "scores.csv").set_index("task")
    assert set(theirs) == set(ours.index) == {"LongFacts", "LongMood"}
    for task, score in theirs.items():
        assert ours.loc[task, "main_score"] == pytest.approx(score, abs=1e-6), task
    # the settings columns say what applied: the model's 256 tokens and Normalize, or the paper's 512 and none
    assert set(ours["max_length"]) == {256} and set(ours["normalize"]) == {True}
    papers = pd.read_csv(paper / "scores.csv").set_index("task")
    assert set(papers["max_length"]) == {512} and set(papers["normalize"]) == {False}
    # the texts are longer than the model reads: reading past 256 tokens finds the facts it cannot see
    assert papers.loc["LongFacts", "main_score"] > ours.loc["LongFacts", "main_score"] + 0.1
    entry = json.loads((own / "run.json").read_text())["tasks"][0]
    assert entry["settings_from"].startswith("model")
