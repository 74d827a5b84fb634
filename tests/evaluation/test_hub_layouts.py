"""MTEB(eng, v2)'s task types with data in the hub's own layouts, read by mteb's own loaders: small local datasets
written the way the hub holds them (BEIR-style ``corpus``/``queries``/qrels configs, reranking's ``top_ranked``,
hard-negative retrieval, SummEval-style summaries, v2 clustering, STS22's one ``default`` config with a ``lang``
column) and loaded by the real task class (``load_data`` with its ``dataset.path`` pointed at the folder). Every
layer's score through the sweep equals ``mteb.evaluate`` of a plain encoder computing the same vectors."""

from __future__ import annotations

import json
import warnings
from pathlib import Path

import mteb
import pytest
from conftest import tiny_model_of_depth
from test_task_types import CONFIG, DirectEncoder
from threadpoolctl import threadpool_limits

from layer_mteb.evaluation.sweep import sweep


def _write_configs(folder: Path, configs: dict[str, list[dict]]) -> Path:
    """One JSONL file per config and split ``test``, named in the README's ``configs:`` as the hub's datasets do."""
    lines = ["---", "configs:"]
    for name, rows in configs.items():
        path = folder / name / "test.jsonl"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text("".join(json.dumps(row) + "\n" for row in rows))
        lines += [f"- config_name: {name}", "  data_files:", "  - split: test", f"    path: {name}/test.jsonl"]
    (folder / "README.md").write_text("\n".join([*lines, "---", ""]))
    return folder


TOPICS = ("rivers and lakes", "stars and planets", "bread and cheese", "trains and roads")


def _retrieval(folder: Path, top_ranked: bool = False) -> Path:
    docs = [{"_id": f"d{i}", "title": f"note {i}", "text": f"{TOPICS[i % 4]}, part {i}"} for i in range(12)]
    queries = [{"_id": f"q{i}", "text": f"tell me about {TOPICS[i]}"} for i in range(4)]
    qrels = [{"query-id": f"q{i % 4}", "corpus-id": f"d{i}", "score": 1} for i in range(12) if i % 3 != 1]
    configs = {"corpus": docs, "queries": queries, "default": qrels}
    if top_ranked:
        configs["top_ranked"] = [{"query-id": f"q{i}", "corpus-ids": [f"d{j}" for j in range(12)]} for i in range(4)]
    return _write_configs(folder, configs)


def _summarization(folder: Path) -> Path:
    rows = [
        {
            "text": f"A long article on {topic}, with many details about {topic}.",
            "human_summaries": [f"about {topic}", f"{topic} in short"],
            "machine_summaries": [f"{topic}", "an article", f"details on {topic}"],
            "relevance": [4.0, 1.5, 3.0 + i / 4],
        }
        for i, topic in enumerate(TOPICS)
    ]
    return _write_configs(folder, {"default": rows})


def _clustering(folder: Path) -> Path:
    rows = [{"sentences": f"{topic}: item {i}", "labels": topic.split()[0]} for topic in TOPICS for i in range(8)]
    return _write_configs(folder, {"default": rows})


def _multilingual_sts(folder: Path) -> Path:
    rows = [
        {"sentence1": f"{a} today", "sentence2": f"{b} today", "score": float(1 + (i * 3) % 4), "lang": lang}
        for lang in ("en", "de")
        for i, (a, b) in enumerate(zip(TOPICS, TOPICS[1:] + TOPICS[:1], strict=True))
    ]
    return _write_configs(folder, {"default": rows})


#: task of MTEB(eng, v2) -> (writer of its hub layout, the subsets the benchmark scores)
LAYOUTS = {
    "ArguAna": (_retrieval, None),
    "ClimateFEVERHardNegatives": (_retrieval, None),
    "AskUbuntuDupQuestions": (lambda folder: _retrieval(folder, top_ranked=True), None),
    "SummEvalSummarization.v2": (_summarization, None),
    "BiorxivClusteringP2P.v2": (_clustering, None),
    "STS22.v2": (_multilingual_sts, ["en"]),
}


def _task(name: str, folder: Path, subsets: list[str] | None):
    """The real mteb task reading ``folder`` through its own ``load_data``."""
    task = mteb.get_task(name, hf_subsets=subsets)
    task.metadata = task.metadata.model_copy(update={"dataset": {"path": str(folder), "revision": "local"}})
    return task


@pytest.fixture(scope="module")
def model(bert_tokenizer):
    return tiny_model_of_depth("gpt2", bert_tokenizer, 3)


@pytest.mark.parametrize("name", list(LAYOUTS))
def test_every_layer_of_a_hub_layout_task_is_mtebs_score_of_the_same_vectors(model, name, tmp_path):
    write, subsets = LAYOUTS[name]
    folder = write(tmp_path / name)
    with threadpool_limits(limits=1), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        frame = sweep(model, [_task(name, folder, subsets)], config=CONFIG, vector_cache=False, progress=False)
        assert sorted(frame["layer"].unique()) == [0, 1, 2, 3]
        for layer in range(4):
            result = mteb.evaluate(
                DirectEncoder(model, layer), _task(name, folder, subsets), cache=None, show_progress_bar=False
            )
            expected = {
                (split, scores["hf_subset"]): scores["main_score"]
                for split, per_subset in result.task_results[0].scores.items()
                for scores in per_subset
            }
            rows = frame[frame["layer"] == layer]
            got = {(r.split, r.subset): r.main_score for r in rows.itertuples()}
            assert got.keys() == expected.keys()
            for key, score in expected.items():
                assert got[key] == pytest.approx(score, abs=1e-6), (name, layer, key)
    if subsets is not None:
        assert set(frame["subset"]) == set(subsets)  # the benchmark's subset only, though the data holds others
