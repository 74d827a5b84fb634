"""The signal registry drives what is computed and read: every signal :data:`~layer_mteb.metrics.SIGNALS` declares is
made, under its declared name and key, by the producer of its table (the metrics runner, the curves' rows on a tiny
model), every name the producers make is declared, and stored curves are read back from their table alone."""

from __future__ import annotations

import numpy as np
import pandas as pd
import torch
from _metric_fixtures import TEXTS, tiny_gpt2

from layer_mteb.analysis.selection.agreement import AgreementOptions, read_curves
from layer_mteb.common.config import EncodeConfig
from layer_mteb.common.run_folder import RunFolder
from layer_mteb.metrics import METRICS_FILE, SIGNALS, stored_in
from layer_mteb.metrics.agreement import AGREEMENT_FILE, AGREEMENT_METRICS, AGREEMENT_TABLE, tidy_agreement
from layer_mteb.metrics.agreement.compute import TaskSample, curve_rows, neighbourhoods
from layer_mteb.metrics.metric_settings import MetricSettings
from layer_mteb.metrics.runner import compute_metrics


def test_the_metrics_runner_makes_exactly_the_signals_of_metrics_csv() -> None:
    settings = MetricSettings(views=2, augment_prompts=len(TEXTS), seed=0)
    frame = compute_metrics(tiny_gpt2(), TEXTS, config=EncodeConfig(batch_size=4), settings=settings, progress=False)
    assert set(frame["metric"]) == set(stored_in(METRICS_FILE))


def _sample(model, n: int, all_texts: bool = False) -> TaskSample:
    rng = np.random.default_rng(0)
    layers = torch.from_numpy(rng.normal(size=(model.n_layers + 1, n, 8)).astype(np.float32))
    reference = ("r1", rng.normal(size=(n, 6)).astype(np.float32))
    return TaskSample("STS12", 0, [f"text {i}" for i in range(n)], layers, {"org/ref": reference}, all_texts)


def test_the_curves_rows_hold_every_signal_of_agreement_csv_under_its_declared_key() -> None:
    """Each stored signal has one curve per layer among the rows computing makes at the pick's ``k``, found by its
    stored name and key alone; every measure those rows hold is a declared signal's or a studied one."""
    model = tiny_gpt2()
    rows = tidy_agreement(curve_rows(model, EncodeConfig(), _sample(model, 24), sizes=[24], ks=neighbourhoods(3)))
    for name in stored_in(AGREEMENT_FILE):
        signal = SIGNALS[name]
        found = rows[rows["metric"] == signal.metric]
        for column, value in signal.key.items():
            found = found[found[column] == value]
        if "k" in signal.parameters:
            found = found[found["k"] == 3]
        references = found["reference"].nunique()
        assert len(found) == references * (model.n_layers + 1) and references == 1, name
    assert set(rows["metric"]) <= {SIGNALS[name].metric for name in stored_in(AGREEMENT_FILE)} | set(AGREEMENT_METRICS)


def test_stored_curves_of_a_task_with_fewer_texts_than_asked_are_read_without_the_task(tmp_path) -> None:
    """A sample that held every text of its task is stored at their count and marked ``all_texts``; a pick asking a
    larger sample reads it from agreement.csv alone (no task is loaded), and a curve of a
    smaller sample that is not the whole task answers no larger ``n``."""
    model = tiny_gpt2()
    scores = {"model": model.name, "revision": model.revision, "n_layers": model.n_layers, "main_score": 0.5}
    scores |= {"task": "STS12", "subset": "default", "split": "test", **EncodeConfig().key()}
    for all_texts in (True, False):
        folder = RunFolder(tmp_path / str(all_texts))
        folder.path.mkdir()
        pd.DataFrame([{**scores, "layer": layer} for layer in range(model.n_layers + 1)]).to_csv(
            folder.file("scores.csv"), index=False
        )
        rows = curve_rows(model, EncodeConfig(), _sample(model, 24, all_texts), sizes=[24], ks=[10])
        folder.update(AGREEMENT_TABLE, tidy_agreement(rows))
        assert (folder.read(AGREEMENT_TABLE)["all_texts"] == all_texts).all()
        for n in (24, 40, 256):
            curves = read_curves(folder, AgreementOptions(n=n, k=10)).curves
            held = [("agreement", "task:STS12"), ("two_nn_id", "task:STS12")] if all_texts or n == 24 else []
            assert sorted(curves.get(model.name, {})) == held
