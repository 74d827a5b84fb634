"""Every figure is written as a readable PNG and a non-empty PDF; side files of the wrong shape are skipped."""

from __future__ import annotations

from pathlib import Path

import matplotlib.image
import pandas as pd
import pytest
from _report_fixtures import alpha_correlation, alpha_metrics, alpha_scores, one_layer_scores, reference_frame

from layer_mteb.analysis import figures
from layer_mteb.analysis.table1 import layer_means, per_task_summary, task_scores


def _check(paths: list[Path], stem: Path) -> None:
    assert sorted(paths) == [stem.with_suffix(".pdf"), stem.with_suffix(".png")]
    assert all(p.stat().st_size > 0 for p in paths)
    image = matplotlib.image.imread(stem.with_suffix(".png"))
    assert image.ndim == 3 and image.shape[0] > 100 and image.shape[1] > 100


@pytest.fixture(scope="module")
def tasks() -> pd.DataFrame:
    return task_scores(pd.concat([alpha_scores(), one_layer_scores()]))


@pytest.mark.parametrize("with_paper", [False, True])
def test_figure1(tmp_path, tasks, with_paper):
    paper = None
    if with_paper:
        raw = reference_frame()
        raw = raw[~raw["layer"].str.endswith("_last")].assign(layer=lambda f: f["layer"].str[6:].astype(int))
        paper = layer_means(task_scores(raw.assign(model="Pythia-14m (paper)", n_layers=2)))
    stem = tmp_path / "figure1"
    _check(figures.figure1(layer_means(tasks), stem, paper, "dashed: paper curves" if with_paper else ""), stem)


def test_heatmap(tmp_path, tasks):
    alpha = tasks[tasks["model"] == "toy/alpha"]
    best = per_task_summary(alpha).set_index("task")["best_layer"]
    stem = tmp_path / f"heatmap_{figures.slug('toy/alpha')}"
    assert stem.name == "heatmap_toy_alpha"
    _check(figures.heatmap(alpha, best, "toy/alpha", stem), stem)


def test_metric_panels_and_correlation_bars(tmp_path):
    _check(figures.metric_panels(alpha_metrics(), tmp_path / "metrics"), tmp_path / "metrics")
    no_depth = alpha_metrics().drop(columns="relative_depth")
    _check(figures.metric_panels(no_depth, tmp_path / "m2"), tmp_path / "m2")
    _check(figures.correlation_bars(alpha_correlation(), tmp_path / "corr"), tmp_path / "corr")
    per_task_only = alpha_correlation().query("scope != 'mean'")
    _check(figures.correlation_bars(per_task_only, tmp_path / "corr2"), tmp_path / "corr2")


def test_unexpected_side_files_are_skipped(tmp_path):
    assert figures.metric_panels(pd.DataFrame({"model": ["m"], "score": [1.0]}), tmp_path / "m") == []
    assert figures.metric_panels(alpha_metrics().drop(columns=["relative_depth", "n_layers"]), tmp_path / "m") == []
    renamed = alpha_correlation().rename(columns={"method": "kind"})
    assert figures.correlation_bars(renamed, tmp_path / "c") == []
    assert figures.correlation_bars(alpha_correlation().assign(value=float("nan")), tmp_path / "c") == []
    assert list(tmp_path.iterdir()) == []
