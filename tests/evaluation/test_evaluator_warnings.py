"""The evaluators' warnings counted per layer (in worker processes too) and told in one line per task; the scores
stay mteb's, bit for bit, whether the warnings are counted or shown."""

from __future__ import annotations

import json
import logging
import warnings
from itertools import islice

import pandas as pd
import pytest
from conftest import tiny_model

from layer_mteb.evaluation.evaluator_warnings import counted_warnings, layer_ranges, summary_line
from layer_mteb.evaluation.sweep import sweep

TASK = "Banking77Classification"


def test_layer_ranges_and_the_summary_line():
    assert layer_ranges([5, 3, 4, 7, 9, 10]) == "3-5, 7, 9-10"
    record = {"ConvergenceWarning": {"count": 281, "layers": list(range(3, 31))}}
    assert summary_line(TASK, record) == (
        "Banking77Classification: 281 ConvergenceWarnings from the evaluators at layers 3-30 "
        "(scores are mteb's, unchanged; --verbose shows them)"
    )
    one = {"UserWarning": {"count": 1, "layers": [2]}}
    assert summary_line("T", one, shown=True) == (
        "T: 1 UserWarning from the evaluators at layer 2 (scores are mteb's, unchanged; shown above)"
    )
    assert summary_line("T", {}) is None


@pytest.mark.parametrize("show", [False, True])
def test_warnings_are_counted_and_shown_only_when_asked(show):
    with warnings.catch_warnings(record=True) as passed_on:
        warnings.simplefilter("always")
        with counted_warnings(show) as seen:
            for i in range(3):
                warnings.warn(f"fit {i} did not converge", RuntimeWarning, stacklevel=1)
            warnings.warn("other", UserWarning, stacklevel=1)
    assert {name: s.count for name, s in seen.items()} == {"RuntimeWarning": 3, "UserWarning": 1}
    assert seen["RuntimeWarning"].first == "fit 0 did not converge"
    assert len(passed_on) == (4 if show else 0)


@pytest.fixture(scope="module")
def small_banking(data_dir, tmp_path_factory):
    """The first rows of the real Banking77 data: few examples per label, so mteb's evaluators warn."""
    folder = tmp_path_factory.mktemp("data")
    (folder / TASK).mkdir()
    for split, n in (("train", 300), ("test", 200)):
        with (data_dir / TASK / f"{split}.jsonl").open() as source:
            (folder / TASK / f"{split}.jsonl").write_text("".join(islice(source, n)))
    return folder


def _run(model, data, out, workers, show):
    return sweep(model, [TASK], data_dir=data, output=out, progress=False, eval_workers=workers, verbose=show)


@pytest.mark.slow
def test_a_sweep_counts_the_evaluators_warnings_and_keeps_mteb_scores(bert_tokenizer, small_banking, tmp_path, caplog):
    model = tiny_model("gpt2", bert_tokenizer)
    with warnings.catch_warnings(record=True) as shown:
        warnings.simplefilter("default")
        verbose = _run(model, small_banking, tmp_path / "verbose", 1, True)
    categories = pd.Series([w.category.__name__ for w in shown]).value_counts().to_dict()
    assert categories, "the evaluators raised no warning: the test proves nothing"
    caplog.clear()
    with caplog.at_level(logging.WARNING), warnings.catch_warnings(record=True) as passed_on:
        warnings.simplefilter("default")
        quiet = _run(model, small_banking, tmp_path / "quiet", 1, False)
        workers = _run(model, small_banking, tmp_path / "workers", 2, False)
    assert not [w for w in passed_on if w.category.__name__ in categories]  # counted, not shown
    pd.testing.assert_frame_equal(quiet, verbose, check_exact=True)
    pd.testing.assert_frame_equal(workers, verbose, check_exact=True)
    for run in ("verbose", "quiet", "workers"):
        [entry] = json.loads((tmp_path / run / "run.json").read_text())["tasks"]
        counted = {name: seen["count"] for name, seen in entry["evaluator_warnings"].items()}
        assert counted == categories, run  # every process counts what --verbose shows
    lines = [r.getMessage() for r in caplog.records if "from the evaluators" in r.getMessage()]
    assert len(lines) == 2 and lines[0] == lines[1]  # one line per task and run, the same with forked workers
    assert lines[0].startswith(f"{TASK}: ") and lines[0].endswith("--verbose shows them)")
