"""Labelled selection of retrieval and reranking tasks: K labelled queries (their qrels) search the whole corpus, each
layer scored with mteb's own retrieval metrics; on every query the scores are mteb's full-split scores exactly.
A task type K examples cannot score is skipped with one line, before any model loads, and the others are picked."""

from __future__ import annotations

import json
import logging

import numpy as np
import pandas as pd
import pytest
from _task_files import write_search_tasks
from conftest import save_tiny_model

from layer_mteb.analysis.labels.budget import iter_task_layers, labelled_tasks, select_with_labels
from layer_mteb.analysis.labels.labelled import layer_scores
from layer_mteb.common.errors import UserError
from layer_mteb.evaluation.sweep import sweep


def _search_tasks(folder, data_dir) -> str:
    """A retrieval task and a reranking task from real STSBenchmark pairs: a pair's first sentence asks for its
    second (relevant when the pair scores 4 or more); the corpus is every second sentence of the first 60 pairs."""
    lines = (data_dir / "STSBenchmark" / "test.jsonl").read_text().splitlines()[:60]
    pairs = [json.loads(line) for line in lines]
    asked = [(i, p) for i, p in enumerate(pairs) if p["score"] >= 4][:10]
    return write_search_tasks(
        folder,
        ("PairSearch", "PairRerank"),
        corpus=[{"id": f"d{i}", "text": p["sentence2"]} for i, p in enumerate(pairs)],
        queries=[[f"q{i}", p["sentence1"]] for i, p in asked],
        qrels=[[f"q{i}", f"d{i}"] for i, _ in asked],
        candidates=[[f"q{i}", f"d{j}", int(i == j)] for i, _ in asked for j in (i, (i + 1) % 60, (i + 7) % 60)],
    )


@pytest.fixture(scope="module")
def search_run(tmp_path_factory, bert_tokenizer, data_dir):
    folder = tmp_path_factory.mktemp("search")
    model = save_tiny_model("bert", bert_tokenizer, folder / "model")
    run = folder / "run"
    sweep(str(model), _search_tasks(folder, data_dir), layers="all", output=run, progress=False, eval_workers=1)
    return run, model


def test_every_query_scores_each_layer_exactly_as_mteb_scored_the_split(search_run):
    run, model = search_run
    scores = pd.read_csv(run / "scores.csv")
    for unit in iter_task_layers(run, model=str(model)):
        assert unit.examples.search is not None and len(unit.examples) == 10
        ours = layer_scores(unit.examples, unit.vectors, np.arange(len(unit.examples)))
        theirs = scores[scores["task"] == unit.task].sort_values("layer")["main_score"].to_numpy()
        np.testing.assert_allclose(ours, theirs, atol=2e-6)


def test_k_labelled_queries_pick_a_layer_for_retrieval_and_reranking(search_run):
    run, model = search_run
    picks = select_with_labels(run, 4, draws=3, model=str(model), workers=1).set_index("task")
    assert sorted(picks.index) == ["PairRerank", "PairSearch"]
    assert (picks["n_examples"] == 10).all() and (picks["draws"] == 3).all()
    assert picks["chosen_layer"].between(0, 2).all() and (picks["regret"] >= 0).all()


def test_a_type_k_examples_cannot_score_is_skipped_in_one_line_and_the_others_kept(caplog):
    table = pd.DataFrame({"task": ["S", "B", "R"], "task_type": ["STS", "BitextMining", "Retrieval"]})
    with caplog.at_level(logging.WARNING):
        kept = labelled_tasks(table)
    assert kept["task"].tolist() == ["S", "R"]
    [line] = [r.getMessage() for r in caplog.records]
    assert line.startswith("B skipped: labelled selection scores STS, PairClassification,")
    assert line.endswith("Retrieval, Reranking, not BitextMining")
    with pytest.raises(UserError, match="no task of the run is of a type labelled selection scores"):
        labelled_tasks(table[table["task"] == "B"])
