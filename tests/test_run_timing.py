"""Where a sweep's time goes, as ``run.json`` records it per task: phases that fit inside the task's wall time, and
the ratio a user reads to see what is not the model's forward or mteb's evaluators."""

from __future__ import annotations

import json
import time

import pytest

from layer_mteb.common.config import EncodeConfig
from layer_mteb.common.timing import PhaseTimes, peak_rss_bytes
from layer_mteb.evaluation.runlog import COMPUTED_FIELDS
from layer_mteb.evaluation.sweep import sweep
from layer_mteb.evaluation.workers import usable_cpus


def test_phase_times_add_up_per_phase():
    times = PhaseTimes()
    for _ in range(3):
        with times.phase("sleep"):
            time.sleep(0.02)
    times.add("other", 1.5)
    assert 0.06 <= times.seconds["sleep"] < 0.5
    assert times.seconds["other"] == 1.5


def test_peak_memory_is_at_least_what_this_process_holds_now():
    held = bytearray(200 * 2**20)  # 200 MiB touched now
    held[::4096] = b"x" * len(held[::4096])
    assert peak_rss_bytes() >= 200 * 2**20


@pytest.mark.parametrize("workers", [1, 2])
def test_run_log_records_the_time_of_each_phase(tiny_gpt_neox, data_dir, tmp_path, workers, monkeypatch):
    monkeypatch.setenv("LAYER_MTEB_CACHE", str(tmp_path / "cache"))  # a cold vector cache: the forward runs
    out = tmp_path / "run"
    config = EncodeConfig(batch_size=16)
    sweep(tiny_gpt_neox, ["STS17"], config=config, data_dir=data_dir, output=out, progress=False, eval_workers=workers)
    (entry,) = json.loads((out / "run.json").read_text())["tasks"]
    seconds = entry["seconds"]
    assert {"wall", "tokenize", "forward", "pooling", "evaluators", "evaluation_wall"} <= set(seconds)
    assert seconds["forward"] > 0 and seconds["evaluators"] > 0
    serial = seconds["tokenize"] + seconds["forward"] + seconds["pooling"] + seconds["evaluation_wall"]
    assert serial <= seconds["wall"] + 0.01  # the phases run one after another inside the task
    bare = seconds["forward"] + seconds["evaluators"] / min(workers, usable_cpus())
    assert entry["overhead_ratio"] == pytest.approx(seconds["wall"] / bare, rel=0.01)
    assert entry["forward_texts_per_second"] == pytest.approx(entry["texts_encoded"] / seconds["forward"], rel=0.01)
    assert entry["peak_rss_bytes"] > 0

    # a rerun reuses every score and vector: no forward, no evaluator, no ratio to speak of
    sweep(tiny_gpt_neox, ["STS17"], config=config, data_dir=data_dir, output=out, progress=False, eval_workers=workers)
    (again,) = json.loads((out / "run.json").read_text())["tasks"]
    assert again["seconds"].get("forward", 0) == 0 and again["seconds"]["evaluators"] == 0
    assert again["forward_texts_per_second"] is None and again["overhead_ratio"] is None
    # ... and keeps the record of the run that computed the scores, through any number of such reruns
    computed = {name: entry[name] for name in COMPUTED_FIELDS if name in entry}
    assert again["computed"] == computed and computed["units_evaluated"] == entry["units_evaluated"] > 0
    sweep(tiny_gpt_neox, ["STS17"], config=config, data_dir=data_dir, output=out, progress=False, eval_workers=workers)
    (third,) = json.loads((out / "run.json").read_text())["tasks"]
    assert third["computed"] == computed and third["units_reused"] == entry["units_evaluated"]
