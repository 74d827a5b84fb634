"""The metrics runner on a tiny real model: streamed token metrics equal those of fully stored token states, and
short, empty or broken inputs give documented skips or one clear error."""

from __future__ import annotations

import json
import logging
import math
import subprocess
import sys
from dataclasses import fields
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import torch
from _metric_fixtures import TEXTS, minilm_tokenizer, tiny_gpt2, tiny_gpt2_words
from conftest import block_states

from layer_mteb.common.config import EncodeConfig
from layer_mteb.common.errors import UserError
from layer_mteb.common.run_folder import RunFolder
from layer_mteb.evaluation.sweep import sweep
from layer_mteb.metrics import METRIC_COLUMNS, METRICS_TABLE
from layer_mteb.metrics.metric_settings import PAPER_METRIC_SIZES, QUICK_METRIC_SIZES, MetricSettings
from layer_mteb.metrics.representation import curvature, matrix_entropy
from layer_mteb.metrics.runner import compute_metrics
from layer_mteb.metrics.texts import encoded_texts_label, load_texts, task_of_label, task_texts_label
from layer_mteb.model.forward import readout_layers, tokenize
from layer_mteb.tasks.catalog import EMBEDDED_DATA_DIR

NO_VIEWS = MetricSettings(views=0)


def _stored_reference(model, texts: list[str], config: EncodeConfig) -> dict[str, list[float]]:
    """Every metric from the full token states of each text, run alone (no padding, no streaming)."""
    per_layer: dict[str, list[list[float]]] = {}
    pooled = []
    ids, _ = tokenize(model.tokenizer, texts, config)
    with torch.inference_mode():
        for row in ids:
            hidden = block_states(model, row)
            states = [h[0].double() for h in readout_layers(hidden, model.final_norm, config.readout)]
            pooled.append(torch.stack([h.mean(dim=0) for h in states]))
            for layer, h in enumerate(states):
                t, d = h.shape
                values = {
                    "prompt_entropy": matrix_entropy(h, normalization="maxEntropy"),
                    "prompt_entropy_raw": matrix_entropy(h),
                    "prompt_entropy_logn": matrix_entropy(h, normalization="logN"),
                    "prompt_entropy_logd": matrix_entropy(h, normalization="logD"),
                }
                if t >= 3:
                    values["curvature"] = curvature(h)
                for name, value in values.items():
                    per_layer.setdefault(name, [[] for _ in states])[layer].append(value)
    reference = {name: [sum(v) / len(v) for v in layers] for name, layers in per_layer.items()}
    stacked = torch.stack(pooled, dim=1)  # [L+1, n, D]
    raw = [matrix_entropy(z) for z in stacked]
    n, d = stacked.shape[1:]
    reference["dataset_entropy_raw"] = raw
    reference["dataset_entropy"] = [v / min(math.log(n), math.log(d)) for v in raw]
    reference["effective_rank"] = [math.exp(v) for v in raw]
    return reference


@pytest.mark.parametrize("readout", ["final_norm", "raw"])
def test_streamed_metrics_equal_metrics_of_stored_token_states(readout: str) -> None:
    model = tiny_gpt2()
    config = EncodeConfig(readout=readout, batch_size=3, max_length=64)  # batches mix lengths: padding is exercised
    frame = compute_metrics(model, TEXTS, config=config, settings=NO_VIEWS, progress=False)
    reference = _stored_reference(model, TEXTS, config)
    assert set(frame["metric"]) == set(reference)
    for metric, expected in reference.items():
        got = frame[frame["metric"] == metric].sort_values("layer")["value"].tolist()
        assert got == pytest.approx(expected, rel=1e-6, abs=1e-9), metric
    assert list(frame.columns) == METRIC_COLUMNS
    assert frame["layer"].max() == model.n_layers and frame["texts"].eq("custom").all()


def test_invariance_metrics_are_finite_and_deterministic() -> None:
    settings = MetricSettings(views=3, augment_prompts=5, seed=1)
    first = compute_metrics(tiny_gpt2(), TEXTS, config=EncodeConfig(batch_size=4), settings=settings, progress=False)
    again = compute_metrics(tiny_gpt2(), TEXTS, config=EncodeConfig(batch_size=7), settings=settings, progress=False)
    for metric in ("infonce", "lidar", "dime"):
        values = first[first["metric"] == metric]
        assert len(values) == tiny_gpt2().n_layers + 1 and values["value"].map(math.isfinite).all()
        assert (values["n"] == 5).all()
    assert first["value"].tolist() == pytest.approx(again["value"].tolist(), rel=1e-6, abs=1e-9)


def test_one_token_prompts_skip_token_metrics_with_a_warning(caplog: pytest.LogCaptureFixture) -> None:
    one_word = ["Rain.", "A", "short", "one."]
    with caplog.at_level(logging.WARNING):
        frame = compute_metrics(tiny_gpt2_words(), one_word, settings=NO_VIEWS, progress=False)
    assert not frame["metric"].str.startswith(("prompt_entropy", "curvature")).any()
    assert {"dataset_entropy", "effective_rank"} <= set(frame["metric"])
    assert frame["value"].map(math.isfinite).all()
    assert "prompt_entropy skipped" in caplog.text


def test_short_prompts_are_left_out_of_the_token_metrics_they_cannot_have() -> None:
    texts = ["Rain.", "He said", "A short one.", TEXTS[0], TEXTS[1]]  # 1, 2, 3 and more tokens
    frame = compute_metrics(tiny_gpt2_words(), texts, settings=NO_VIEWS, progress=False)
    counts = frame.groupby("metric")["n"].unique().map(list).to_dict()
    assert counts["prompt_entropy"] == [4]  # needs 2 tokens
    assert counts["curvature"] == [3]  # needs 3 tokens
    assert counts["dataset_entropy"] == [5]
    reference = _stored_reference(tiny_gpt2_words(), texts[1:], EncodeConfig())
    got = frame[frame["metric"] == "prompt_entropy"].sort_values("layer")["value"].tolist()
    assert got == pytest.approx(reference["prompt_entropy"], rel=1e-6)


def test_empty_texts_are_a_clear_error() -> None:
    with pytest.raises(UserError, match="at least 2 non-empty"):
        compute_metrics(tiny_gpt2(), ["", "   ", "only one"], settings=NO_VIEWS, progress=False)


def test_nan_hidden_states_are_a_clear_error() -> None:
    from transformers import GPT2Config, GPT2Model

    from layer_mteb.model.architectures import wrap_model

    tokenizer = minilm_tokenizer()
    broken = GPT2Model(GPT2Config(n_layer=1, n_embd=16, n_head=2, n_positions=64, vocab_size=len(tokenizer)))
    with torch.no_grad():
        broken.wpe.weight[:] = float("nan")
    model = wrap_model(broken, tokenizer, name="test/broken")
    with pytest.raises(UserError, match="NaN or inf"):
        compute_metrics(model, TEXTS, settings=NO_VIEWS, progress=False)


def test_bad_settings_are_clear_errors() -> None:
    with pytest.raises(UserError, match="--views"):
        MetricSettings(views=1)
    with pytest.raises(UserError, match="--alpha"):
        MetricSettings(alpha=0)


def test_the_metric_settings_are_declared_without_torch() -> None:
    # the command line reads their defaults and meanings before anything heavy loads
    probe = "import sys\nimport layer_mteb.metrics.metric_settings\nprint('torch' in sys.modules)"
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True)
    assert done.stdout.split() == ["False"]
    helps = {f.name: f.metadata["help"] for f in fields(MetricSettings) if "help" in f.metadata}
    assert set(PAPER_METRIC_SIZES) == set(QUICK_METRIC_SIZES) <= set(helps)
    assert PAPER_METRIC_SIZES == {"n_prompts": 1000, "views": 16, "augment_prompts": 200}
    assert {name: getattr(MetricSettings(), name) for name in PAPER_METRIC_SIZES} == PAPER_METRIC_SIZES


def test_metrics_csv_merges_sources_and_replaces_reruns(tmp_path: Path) -> None:
    prompts = tmp_path / "prompts.txt"
    prompts.write_text("\n".join(TEXTS[:4]) + "\n\n")
    compute_metrics(tiny_gpt2(), TEXTS, settings=NO_VIEWS, output=tmp_path, progress=False)
    compute_metrics(tiny_gpt2(), str(prompts), settings=NO_VIEWS, output=tmp_path, progress=False)
    compute_metrics(tiny_gpt2(), str(prompts), settings=NO_VIEWS, output=tmp_path, progress=False)
    stored = RunFolder(tmp_path).read(METRICS_TABLE)
    assert sorted(stored["texts"].unique()) == ["custom", "file:prompts.txt"]
    assert not stored.duplicated(["texts", "metric", "layer"]).any()
    assert (stored[stored["texts"] == "file:prompts.txt"]["n"] == 4).all()


def test_wikitext_source_drops_headings_and_short_prompts(tmp_path: Path) -> None:
    folder = tmp_path / "WikiText2"
    folder.mkdir()
    long = "word " * 40
    rows = [" = Heading = ", "= Broken heading", "too short", long + "one", long + "two", long + "one", long + "three"]
    (folder / "test_paragraphs.jsonl").write_text("\n".join(json.dumps({"text": t}) for t in rows))
    source = load_texts("wikitext", tokenizer=minilm_tokenizer(), data_dir=tmp_path, n_prompts=2, seed=0)
    assert source.name == "wikitext" and source.task is None
    assert len(source.texts) == 2 and source.n_available == 3
    assert all(t.startswith("word") for t in source.texts)
    assert load_texts("wikitext", tokenizer=minilm_tokenizer(), data_dir=tmp_path, n_prompts=2).texts == source.texts


def test_text_source_errors(tmp_path: Path) -> None:
    with pytest.raises(UserError, match="does not exist"):
        load_texts("wikitext", data_dir=tmp_path / "nowhere")  # a folder without WikiText2/: the sample (test_wikitext)
    with pytest.raises(UserError, match="not 'wikitext'"):
        load_texts(str(tmp_path / "missing.txt"))
    (tmp_path / "empty.txt").write_text("\n  \n")
    with pytest.raises(UserError, match="usable"):
        load_texts(str(tmp_path / "empty.txt"))


def test_cli_metrics_on_a_real_model_and_a_text_file(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from layer_mteb.cli import main

    prompts = tmp_path / "prompts.txt"
    prompts.write_text("\n".join(TEXTS))
    args = ["metrics", "--model", "minilm-l6", "--texts", str(prompts), "--views", "2", "--augment-prompts", "4"]
    assert main([*args, "--output", str(tmp_path / "run")]) == 0
    assert "prompt_entropy" in capsys.readouterr().out
    stored = RunFolder(tmp_path / "run").read(METRICS_TABLE)
    assert stored["model"].eq("sentence-transformers/all-MiniLM-L6-v2").all()
    assert sorted(stored["layer"].unique()) == list(range(7)) and stored["value"].map(math.isfinite).all()
    assert main(["metrics", "--model", "minilm-l6", "--texts", "nowhere.txt"]) == 2
    assert "not 'wikitext'" in capsys.readouterr().err


#: the STS17 data the package ships (the data folder's copy, byte for byte): every checkout has it
DEMO_DATA = EMBEDDED_DATA_DIR


def test_a_tasks_own_texts_are_its_evaluation_sentences() -> None:
    source = load_texts("task:STS17", data_dir=DEMO_DATA, n_prompts=10_000)
    rows = [json.loads(line) for line in (DEMO_DATA / "STS17" / "test.jsonl").read_text().splitlines() if line]
    expected = {r["sentence1"].strip() for r in rows} | {r["sentence2"].strip() for r in rows}
    assert source.name == "task:STS17" and source.task == "STS17"
    assert set(source.texts) == expected  # both sides of every pair, en-en only, no scores
    assert len(load_texts("task:STS17", data_dir=DEMO_DATA, n_prompts=50).texts) == 50


def test_a_source_label_names_its_task_and_nothing_else_does() -> None:
    assert task_texts_label("STS17") == "task:STS17" and task_of_label(task_texts_label("STS17")) == "STS17"
    assert encoded_texts_label("STS17") == "encoded:STS17"
    assert [task_of_label(s) for s in ("encoded:STS17", "wikitext", "file:a.txt", float("nan"))] == [None] * 4


def test_a_task_without_data_is_a_clear_error(tmp_path: Path) -> None:
    with pytest.raises(UserError, match="--data-dir"):
        load_texts("task:SciFact", data_dir=tmp_path)


def test_sweep_task_metrics_equal_a_separate_metrics_run_on_the_same_texts(tmp_path) -> None:
    """--task-metrics streams through the sweep's own forward pass and gives what `metrics` gives on those texts."""
    model = tiny_gpt2()
    config = EncodeConfig(batch_size=16)
    sweep(
        model,
        ["STS17"],
        config=config,
        data_dir=DEMO_DATA,
        output=tmp_path,
        vector_cache=False,
        task_metrics=True,
        progress=False,
    )
    streamed = pd.read_csv(tmp_path / "metrics.csv")
    assert set(streamed["texts"]) == {"encoded:STS17"} and set(streamed["task"]) == {"STS17"}
    rows = [json.loads(line) for line in (DEMO_DATA / "STS17" / "test.jsonl").open()]
    texts = list(dict.fromkeys(r[k] for k in ("sentence1", "sentence2") for r in rows))
    separate = compute_metrics(model, texts, config=config, settings=MetricSettings(views=0), progress=False)
    merged = streamed.merge(separate, on=["layer", "metric"], suffixes=("", "_separate"))
    assert set(merged["metric"]) >= {"prompt_entropy", "curvature", "dataset_entropy", "effective_rank"}
    assert np.allclose(merged["value"], merged["value_separate"], rtol=1e-4, atol=1e-6)
    assert (merged["n"] == merged["n_separate"]).all()


def test_task_metrics_from_a_warm_vector_cache_equal_the_first_run(tmp_path, monkeypatch) -> None:
    """Vectors read back from the store skip the forward pass; --task-metrics still writes the same rows: from a
    warm cache into a new folder, and when every score is reused too (the metrics file removed in between)."""
    monkeypatch.setenv("LAYER_MTEB_CACHE", str(tmp_path / "cache"))
    model, config = tiny_gpt2(), EncodeConfig(batch_size=16)

    def run(output: Path) -> pd.DataFrame:
        sweep(model, ["STS17"], config=config, data_dir=DEMO_DATA, output=output, task_metrics=True, progress=False)
        return pd.read_csv(output / "metrics.csv").sort_values(["layer", "metric"], ignore_index=True)

    first = run(tmp_path / "first")
    assert (tmp_path / "cache" / "vectors").is_dir()
    assert {"prompt_entropy", "curvature", "dataset_entropy"} <= set(first["metric"])
    assert sorted(first["layer"].unique()) == list(range(model.n_layers + 1))
    warm = run(tmp_path / "warm")
    (tmp_path / "first" / "metrics.csv").unlink()
    reused = run(tmp_path / "first")
    for again in (warm, reused):
        assert again[["layer", "metric", "n"]].equals(first[["layer", "metric", "n"]])
        assert np.allclose(again["value"], first["value"], rtol=1e-6, atol=1e-9)


def test_a_tasks_evaluation_texts_and_its_encoded_texts_keep_their_own_rows(tmp_path) -> None:
    """``metrics --texts task:X`` (evaluation splits, sampled) and ``run --task-metrics`` (every text mteb encodes)
    are different sources with different labels: in one folder, neither replaces the other's rows."""
    model, config = tiny_gpt2(), EncodeConfig(batch_size=16)
    settings = MetricSettings(n_prompts=40, views=0)

    def evaluation_texts() -> None:
        compute_metrics(model, "task:STS17", config=config, settings=settings, data_dir=DEMO_DATA, output=tmp_path)

    evaluation_texts()
    sweep(
        model,
        ["STS17"],
        layers="-1",
        config=config,
        data_dir=DEMO_DATA,
        output=tmp_path,
        task_metrics=True,
        vector_cache=False,
        progress=False,
    )
    evaluation_texts()  # and back: the sweep's rows stay too
    stored = RunFolder(tmp_path).read(METRICS_TABLE)
    n = stored.groupby("texts")["n"].max()
    assert set(n.index) == {"task:STS17", "encoded:STS17"} and set(stored["task"]) == {"STS17"}
    assert n["task:STS17"] == 40 and n["encoded:STS17"] > 40  # a 40-prompt sample vs every encoded text
    for texts in ("task:STS17", "encoded:STS17"):
        part = stored[stored["texts"] == texts]
        assert sorted(part["layer"].unique()) == list(range(model.n_layers + 1))
