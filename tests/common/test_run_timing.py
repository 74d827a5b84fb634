"""Where a sweep's time goes, as ``run.json`` records it per task: every phase present and non-negative, the phases
that run one after another within the task's wall time, and the derived rates computed from the recorded seconds.

Nothing here sleeps or bounds how long anything takes: :class:`PhaseTimes` runs on a fake clock, ``time_record`` on
given seconds, and a real sweep's record is checked only against itself.
"""

from __future__ import annotations

import itertools
import json
import math
from types import SimpleNamespace

import pytest

from layer_mteb.common import timing
from layer_mteb.common.config import EncodeConfig
from layer_mteb.common.timing import PhaseTimes, peak_rss_bytes
from layer_mteb.evaluation import workers
from layer_mteb.evaluation.sweep import COMPUTED_FIELDS, sweep
from layer_mteb.evaluation.workers import time_record, usable_cpus
from layer_mteb.vectors.store import LayerCache

TASKS = ["BIOSSES", "STS17"]
#: what every computed task's ``seconds`` holds: its wall time, the phases outside the scoring loop, the loop
SECONDS = {"wall", "load_data", "cache_io", "tokenize", "forward", "pooling", "evaluators", "results_read"}
SECONDS |= {"evaluation_wall"}
#: the phases that run one after another, each once, inside a task's wall time (the vector store's reads and
#: writes happen both before and inside the scoring loop, so they are not among them)
SERIAL = ("load_data", "tokenize", "forward", "pooling", "evaluation_wall")
#: ``run.json`` rounds seconds to milliseconds: each recorded value is within this of the measured one
ROUNDING = 0.0005


@pytest.fixture
def clock(monkeypatch):
    """A fake ``time.perf_counter`` for :mod:`~layer_mteb.common.timing` that advances 0.25 s per reading."""
    ticks = itertools.count()
    monkeypatch.setattr(timing, "time", SimpleNamespace(perf_counter=lambda: 0.25 * next(ticks)))


def test_phase_times_add_up_per_phase(clock):
    times = PhaseTimes()
    for _ in range(3):
        with times.phase("forward"):  # two readings, one interval of 0.25 s each time
            pass
    times.add("other", 1.5)
    times.add("other", 0.5)
    assert times.seconds == {"forward": 0.75, "other": 2.0}


def test_a_phase_that_raises_is_still_counted(clock):
    times = PhaseTimes()
    with pytest.raises(RuntimeError), times.phase("evaluators"):
        raise RuntimeError("evaluator failed")
    assert times.seconds == {"evaluators": 0.25}


def test_peak_memory_is_at_least_what_this_process_holds_now():
    held = bytearray(200 * 2**20)  # 200 MiB touched now
    held[::4096] = b"x" * len(held[::4096])
    assert peak_rss_bytes() >= 200 * 2**20


def test_time_record_derives_its_rates_from_the_seconds(monkeypatch):
    monkeypatch.setattr(workers, "usable_cpus", lambda: 4)
    phases = {"load_data": 0.25, "forward": 2.0, "pooling": 0.123456, "evaluators": 6.0, "evaluation_wall": 3.5}
    record = time_record(phases, wall=6.5, eval_workers=2, texts_encoded=500)
    assert record["seconds"] == {
        "wall": 6.5,
        "load_data": 0.25,
        "forward": 2.0,
        "pooling": 0.123,
        "evaluators": 6.0,
        "evaluation_wall": 3.5,
    }
    assert record["forward_texts_per_second"] == 250.0
    assert record["overhead_ratio"] == 1.3  # 6.5 / (2.0 + 6.0 / 2 workers)
    assert record["peak_rss_bytes"] > 0
    # more workers than usable cores spread the evaluators over the cores only
    assert time_record(phases, wall=6.5, eval_workers=8, texts_encoded=500)["overhead_ratio"] == 1.857  # 6.5 / 3.5
    # nothing encoded: no rate; nothing encoded or evaluated: no ratio either
    idle = time_record({"evaluators": 0.0, "results_read": 0.2}, wall=0.3, eval_workers=1, texts_encoded=0)
    assert idle["forward_texts_per_second"] is None and idle["overhead_ratio"] is None


def _entries(out) -> dict[str, dict]:
    return {entry["task"]: entry for entry in json.loads((out / "run.json").read_text())["tasks"]}


@pytest.fixture(scope="module", params=[1, 2], ids=["one-worker", "two-workers"])
def runs(request, tiny_gpt_neox, data_dir, tmp_path_factory):
    """A cold sweep of two tasks (a fresh vector cache: the forward runs), then two reruns that reuse everything;
    ``run.json`` after each, and the vector stores each wrote (the ``cache_io`` phase's writes)."""
    root = tmp_path_factory.mktemp(f"timing-{request.param}")
    out, found, saves = root / "run", [], []
    save = LayerCache.save

    def counted(cache, path=None):
        saves[-1].append((path or cache.path).name)
        return save(cache, path)

    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("LAYER_MTEB_CACHE", str(root / "cache"))
        patch.setattr(LayerCache, "save", counted)
        for _ in range(3):
            saves.append([])
            sweep(
                tiny_gpt_neox,
                TASKS,
                config=EncodeConfig(batch_size=16),
                data_dir=data_dir,
                output=out,
                progress=False,
                eval_workers=request.param,
            )
            found.append(_entries(out))
    return request.param, tiny_gpt_neox.n_layers + 1, found, saves


def test_every_task_records_every_phase_as_non_negative_milliseconds(runs):
    _, layers, (cold, again, third), _ = runs
    for entries in (cold, again, third):
        assert sorted(entries) == TASKS
        for entry in entries.values():
            seconds = entry["seconds"]
            assert set(seconds) <= SECONDS | {"token_metrics", "task_metrics"}
            assert all(math.isfinite(v) and v >= 0 and v == round(v, 3) for v in seconds.values()), seconds
    for entry in cold.values():
        assert set(entry["seconds"]) == SECONDS
        assert entry["texts_encoded"] > 0 and entry["units_evaluated"] == layers and entry["units_reused"] == 0
        assert entry["peak_rss_bytes"] > 0


def test_phases_that_run_in_turn_fit_in_the_wall_time_and_the_rates_follow_from_them(runs):
    workers, _, (cold, _, _), _ = runs
    for entry in cold.values():
        seconds = entry["seconds"]
        assert sum(seconds[p] for p in SERIAL) <= seconds["wall"] + (len(SERIAL) + 1) * ROUNDING
        if workers == 1:  # one process: the evaluators and the result reads run inside the scoring loop
            assert seconds["evaluators"] + seconds["results_read"] <= seconds["evaluation_wall"] + 3 * ROUNDING
        assert entry["eval_workers_used"] == workers
        # the rates, recomputed from the rounded seconds, agree up to that rounding
        spread = max(1, min(workers, usable_cpus()))
        bare, slack = seconds["forward"] + seconds["evaluators"] / spread, ROUNDING * (1 + 1 / spread)
        assert bare > slack
        low, high = (seconds["wall"] - ROUNDING) / (bare + slack), (seconds["wall"] + ROUNDING) / (bare - slack)
        assert low - ROUNDING <= entry["overhead_ratio"] <= high + ROUNDING
        if seconds["forward"] > ROUNDING:  # rounded to 0.1 text per second
            rate = entry["texts_encoded"] / seconds["forward"]
            slack = rate * ROUNDING / (seconds["forward"] - ROUNDING) + 0.05
            assert abs(entry["forward_texts_per_second"] - rate) <= slack


def test_a_rerun_records_no_forward_or_evaluator_and_keeps_the_computing_runs_record(runs):
    _, layers, (cold, again, third), _ = runs
    for task in TASKS:
        computed = {name: cold[task][name] for name in COMPUTED_FIELDS if name in cold[task]}
        for rerun in (again[task], third[task]):
            assert rerun["seconds"].get("forward", 0) == 0 and rerun["seconds"]["evaluators"] == 0
            assert rerun["forward_texts_per_second"] is None and rerun["overhead_ratio"] is None
            assert rerun["texts_encoded"] == 0 and rerun["units_evaluated"] == 0 and rerun["units_reused"] == layers
            assert rerun["computed"] == computed  # through any number of reruns


def test_a_cold_run_writes_each_tasks_vector_store_once_and_a_rerun_writes_none(runs):
    """The store of a task whose texts are known before scoring is filled in one pass and written once, before the
    first layer is scored; writing it again unchanged would double the task's ``cache_io`` (the store holds every
    layer's vectors of every text)."""
    *_, (cold, again, third) = runs
    assert sorted(cold) == TASKS and again == third == []
