"""The cost–quality view: the rule (cheapest layer within one point of the best) on curves with known answers, FLOPs
of cut tiny models against their analytic counts, ``layer-mteb cost``'s cost.csv, the report's figure and select's
line."""

from __future__ import annotations

import logging
import math
from pathlib import Path

import pandas as pd
import pytest
import torch
from conftest import save_tiny_model, tiny_model_of_depth

from layer_mteb.analysis.report.build import write_report
from layer_mteb.analysis.rules import ONE_POINT, cheapest_within
from layer_mteb.analysis.selection.tradeoff import cheapest_layers
from layer_mteb.common.config import EncodeConfig
from layer_mteb.common.run_folder import COST_FILE, RunFolder
from layer_mteb.metrics import layer_cost
from layer_mteb.metrics.layer_cost import COST_COLUMNS, depth_flops, depth_seconds, flop_counter, padded_batches
from layer_mteb.model.architectures import first_blocks

TEXTS = ["A short one.", "A somewhat longer sentence about cats, dogs and the weather.", "Hello there, world!"]


def _series(values) -> pd.Series:
    return pd.Series(values, index=range(len(values)), dtype=float)


def test_rule_takes_the_cheapest_layer_within_one_point():
    depth = _series([0, 0.25, 0.5, 0.75, 1])
    # best .80 at layer 3; layer 2 (.795) is within one point, layer 1 (.70) is not
    assert cheapest_within(_series([0.50, 0.70, 0.795, 0.80, 0.79]), depth) == 2
    # exactly one point below the best counts as within (0.80 - 0.01 is not exactly 0.79 in floating point)
    assert cheapest_within(_series([0.50, 0.79, 0.80]), _series([0, 0.5, 1])) == 1
    assert ONE_POINT == 0.01
    # the cost decides, not the depth: layer 2 is cheaper than layer 1 here
    assert cheapest_within(_series([0.50, 0.795, 0.80]), _series([0, 0.9, 0.5])) == 2
    # equal costs go to the shallower layer; a layer without a cost is never picked
    assert cheapest_within(_series([0.50, 0.80, 0.80]), _series([0, 0.5, 0.5])) == 1
    assert cheapest_within(_series([0.80, 0.80, 0.80]), _series([math.nan, 0.5, 0.7])) == 1
    # a wider tolerance reaches shallower layers
    assert cheapest_within(_series([0.50, 0.70, 0.795, 0.80]), _series([0, 1, 2, 3]), tol=0.2) == 1


def test_cheapest_layers_per_scope_with_and_without_measured_cost():
    rows = []
    for task, kind, values in [
        ("S1", "STS", [0.50, 0.795, 0.80, 0.70]),  # STS: best 2, layer 1 within a point
        ("C1", "Classification", [0.40, 0.50, 0.60, 0.65]),  # Classification: best 3, nothing else near
    ]:
        rows += [
            {"model": "m", "layer": k, "n_layers": 3, "task": task, "task_type": kind, "main_score": v}
            for k, v in enumerate(values)
        ]
    scores = pd.DataFrame(rows)
    cost = pd.DataFrame(
        {
            "model": "m",
            "layer": range(4),
            "flops_fraction": [0.01, 0.34, 0.67, 1.0],
            "seconds_per_1000_texts": [1.0, 4.0, 7.0, 10.0],
        }
    )
    picks = cheapest_layers(scores, cost).set_index("scope")
    assert picks.loc["STS", "layer"] == 1 and picks.loc["STS", "best_layer"] == 2
    assert picks.loc["Classification", "layer"] == 3
    # mean: .45 .6475 .70 .675 -> best 2; layer 3 (.675) is 2.5 points below, so layer 2
    assert picks.loc["mean", "layer"] == 2 and picks.loc["mean", "n_tasks"] == 2
    assert picks.loc["STS", "flops_fraction"] == 0.34 and picks.loc["STS", "full_seconds_per_1000_texts"] == 10.0
    unmeasured = cheapest_layers(scores).set_index("scope")
    assert list(unmeasured["layer"]) == list(picks.loc[unmeasured.index, "layer"])  # depth ranks as FLOPs do
    assert not unmeasured["measured"].any() and unmeasured["flops_fraction"].isna().all()


def _analytic_block_flops(family: str, model, batch: dict[str, torch.Tensor]) -> tuple[int, int]:
    """(FLOPs of one block, FLOPs outside the blocks) of a padded batch, from the config: 2 FLOPs per multiply-add
    of every linear layer on every (padded) token, and Q·Kᵀ plus weights·V of the attention."""
    config = model.model.config
    b, t = batch["input_ids"].shape
    d, inner, n_tokens = config.hidden_size, config.intermediate_size, b * t
    attention = 2 * b * t * t * 2 * d  # every query head: T×T scores of head_dim, then T×T weights times V
    if family == "bert":
        linear = 4 * d * d + 2 * d * inner  # Q, K, V, output; FFN up and down
        return 2 * n_tokens * linear + attention, 2 * b * d * d  # the pooler: one dense layer on the first token
    kv = config.num_key_value_heads * (d // config.num_attention_heads)
    linear = 2 * d * d + 2 * d * kv + 3 * d * inner  # Q, O; K, V (grouped); gate, up, down
    return 2 * n_tokens * linear + attention, 0


@pytest.mark.parametrize("family", ["bert", "llama"])
def test_flops_fraction_is_the_block_ratio(family, bert_tokenizer):
    """FLOPs of the model cut at k, counted, equal the analytic count (blocks are alike, attention included); the
    fraction is k/L up to the share of FLOPs outside the blocks (BERT's pooler; nothing for llama, whose
    embeddings, norms and rotary angles have no matrix product), which bounds the tolerance."""
    n_blocks = 4
    model = tiny_model_of_depth(family, bert_tokenizer, n_blocks)
    batches = padded_batches(model, TEXTS, EncodeConfig(batch_size=8))
    flops = depth_flops(model, batches)
    block, outside = _analytic_block_flops(family, model, batches[0])
    assert flops == [outside + k * block for k in range(n_blocks + 1)]
    fractions = [f / flops[-1] for f in flops]
    share_outside = outside / flops[-1]
    for k, fraction in enumerate(fractions):
        assert abs(fraction - k / n_blocks) <= share_outside + 1e-12
    assert (share_outside > 0) == (family == "bert")


@pytest.mark.parametrize("family", ["bert", "llama", "mamba"])
def test_flops_from_one_pass_equal_counting_each_cut_model(family, bert_tokenizer):
    """The per-module breakdown of one full pass gives what counting every truncated model directly gives."""
    model = tiny_model_of_depth(family, bert_tokenizer, 3)
    batches = padded_batches(model, TEXTS, EncodeConfig(batch_size=2))
    direct = []
    for depth in range(model.n_layers + 1):
        counter = flop_counter()
        with first_blocks(model, depth), torch.inference_mode(), counter:
            for batch in batches:
                model.model(**batch, **model.forward_options)
        direct.append(counter.get_total_flops())
    assert depth_flops(model, batches) == direct
    assert direct == sorted(set(direct))  # every block adds FLOPs


def test_each_pass_waits_for_every_gpu_the_model_computes_on(bert_tokenizer, monkeypatch):
    """A model a device map put on GPUs 1 and 2 (its ``hf_device_map``; the GPUs are faked, the model runs on the
    CPU): every timed pass ends by synchronising both, not the current device (which may be neither)."""
    model = tiny_model_of_depth("llama", bert_tokenizer, 2)
    batches = padded_batches(model, TEXTS, EncodeConfig(batch_size=2))
    model.model.hf_device_map = {"embed_tokens": 1, "layers.0": 1, "layers.1": 2, "norm": "cpu", "rotary_emb": 2}
    calls: list[object] = []
    monkeypatch.setattr(torch.cuda, "synchronize", lambda device=None: calls.append(device))
    depth_seconds(model, batches)
    passes = 1 + (model.n_layers + 1)  # the warm-up, then one per depth
    assert calls == [torch.device("cuda", 1), torch.device("cuda", 2)] * passes
    assert model.device == torch.device("cuda", 1)  # where the inputs go


def test_each_depth_is_the_median_of_its_timed_passes(bert_tokenizer, monkeypatch):
    """Three passes per depth on a fake clock: the kept seconds are each depth's median, the warm-up not among them."""
    model = tiny_model_of_depth("bert", bert_tokenizer, 2)
    batches = padded_batches(model, TEXTS, EncodeConfig(batch_size=2))
    durations = iter([100.0, 5.0, 1.0, 2.0, 7.0, 3.0, 30.0, 1.0, 1.0, 1.0])  # warm-up, then 3 per depth
    now = [0.0]
    ends = [False]

    def clock() -> float:  # start of a pass, then its end, alternately
        if ends[0]:
            now[0] += next(durations)
        ends[0] = not ends[0]
        return now[0]

    monkeypatch.setattr(layer_cost.time, "perf_counter", clock)
    assert depth_seconds(model, batches, repeats=3) == [2.0, 7.0, 1.0]


def _run_folder(folder: Path, model: str, values: list[float], kind: str = "STS") -> Path:
    n_layers = len(values) - 1
    rows = [
        {
            "model": model,
            "revision": "r1",
            "layer": k,
            "n_layers": n_layers,
            "relative_depth": k / n_layers,
            "task": "T1",
            "task_type": kind,
            "split": "test",
            "subset": "default",
            "main_score": v,
            "readout": "final_norm",
            "pooling": "mean",
            "max_length": 64,
            "dtype": "float32",
            "data": "local",
        }
        for k, v in enumerate(values)
    ]
    folder.mkdir(parents=True, exist_ok=True)
    RunFolder(folder).write_scores(pd.DataFrame(rows))
    return folder


def test_cost_command_writes_cost_csv(tmp_path, bert_tokenizer, capsys):
    from layer_mteb.cli import main

    model = save_tiny_model("bert", bert_tokenizer, tmp_path / "tiny")
    run = _run_folder(tmp_path / "run", "local/tiny-bert", [0.5, 0.795, 0.8])
    texts = tmp_path / "texts.txt"
    texts.write_text("\n".join(f"text number {i} " + "word " * i for i in range(12)))
    args = ["cost", "--run", str(run), "--model", str(model), "--texts", str(texts), "--n-texts", "8"]
    assert main([*args, "--batch-size", "4", "--device", "cpu", "--device-map", "cpu", "--repeats", "2"]) == 0
    out = capsys.readouterr().out
    cost = pd.read_csv(run / COST_FILE)
    assert list(cost.columns) == COST_COLUMNS
    assert list(cost["layer"]) == [0, 1, 2] and set(cost["n_layers"]) == {2} and set(cost["n_texts"]) == {8}
    assert set(cost["model"]) == {"local/tiny-bert"} and set(cost["batch_size"]) == {4}
    assert set(cost["repeats"]) == {2} and set(cost["device"]) == {"cpu"}  # loaded with device_map="cpu"
    assert set(cost["max_length"]) == {64}  # the run's settings, read from its scores.csv
    assert cost["flops"].is_monotonic_increasing and cost["flops"].diff().dropna().gt(0).all()
    assert cost["flops_fraction"].iloc[-1] == 1.0 and (cost["seconds"] > 0).all()
    assert "cheapest layer within 1 point of the best: layer 1 (" in out and "of the FLOPs" in out
    assert main(["cost", "--run", str(run), "--n-texts", "0"]) == 2


def _cost_frame(model: str, n_layers: int) -> pd.DataFrame:
    return pd.DataFrame(
        {
            "model": model,
            "layer": range(n_layers + 1),
            "n_layers": n_layers,
            "flops": [1 + 100 * k for k in range(n_layers + 1)],
            "flops_fraction": [(1 + 100 * k) / (1 + 100 * n_layers) for k in range(n_layers + 1)],
            "seconds_per_1000_texts": [1.0 + 3 * k for k in range(n_layers + 1)],
        }
    )


def test_report_draws_score_against_cost_when_cost_csv_exists(tmp_path, caplog):
    measured = _run_folder(tmp_path / "measured", "toy/measured", [0.5, 0.795, 0.8, 0.7])
    _cost_frame("toy/measured", 3).to_csv(measured / COST_FILE, index=False)
    unmeasured = _run_folder(tmp_path / "unmeasured", "toy/unmeasured", [0.3, 0.6, 0.65])
    with caplog.at_level(logging.INFO):
        write_report([measured, unmeasured], tmp_path / "report")
    for suffix in ("png", "pdf", "csv", "md"):
        assert (tmp_path / "report" / f"cost_quality.{suffix}").is_file()
    table = pd.read_csv(tmp_path / "report" / "cost_quality.csv").set_index(["model", "scope"])
    assert table.loc[("toy/measured", "mean"), "layer"] == 1
    assert table.loc[("toy/measured", "STS"), "layer"] == 1
    assert table.loc[("toy/unmeasured", "mean"), "layer"] == 2 and not table.loc[("toy/unmeasured", "mean"), "measured"]
    assert any("leaves out" in r.message and "toy/unmeasured" in r.message for r in caplog.records)
    write_report([unmeasured], tmp_path / "report2")
    assert not (tmp_path / "report2" / "cost_quality.png").exists()  # nothing measured, nothing drawn
    assert (tmp_path / "report2" / "cost_quality.md").is_file()


def test_select_prints_the_cheapest_layer(tmp_path, capsys):
    from layer_mteb.cli import main

    run = _run_folder(tmp_path / "run", "toy/measured", [0.5, 0.795, 0.8, 0.7])
    assert main(["select", "--run", str(run), "--by", "depth=0.5"]) == 0
    line = capsys.readouterr().out.strip().splitlines()[-1]
    assert line.startswith("cheapest layer within 1 point of the best: layer 1 (1/3 of the blocks; cost not measured")
    _cost_frame("toy/measured", 3).to_csv(run / COST_FILE, index=False)
    assert main(["select", "--run", str(run), "--by", "depth=0.5"]) == 0
    line = capsys.readouterr().out.strip().splitlines()[-1]
    assert line == (
        "cheapest layer within 1 point of the best: layer 1 (33.6 % of the FLOPs, 4.00 s per 1,000 texts vs 10.00 "
        "for the full model; score 0.7950 vs best 0.8000 at layer 2)"
    )
