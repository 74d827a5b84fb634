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


def test_figure1_common_tasks_drop_the_task_that_leaves_layers_incomplete():
    from layer_mteb.analysis.rules import common_tasks, complete_layer_means
    from layer_mteb.analysis.table1 import headline_tasks

    rows = [("m1", t, layer) for t in ("T1", "T2", "T3") for layer in range(5)]
    rows += [("m2", t, layer) for t in ("T1", "T2") for layer in range(5)]
    rows += [("m2", "T3", layer) for layer in (0, 4)]  # m2's T3 lacks layers 1–3: 2 of 5 layers complete
    rows += [("m2", "T4", layer) for layer in range(5)]  # only m2 has T4: never shared
    frame = pd.DataFrame(rows, columns=["model", "task", "layer"]).assign(n_layers=4, task_type="STS")
    frame["main_score"] = 0.1 * frame["layer"] + frame["task"].str[1].astype(int) / 100
    assert common_tasks(frame) == ["T1", "T2"]  # dropping T3 completes every layer of m2
    assert common_tasks(frame, coverage=0.4) == ["T1", "T2", "T3"]  # 2 of 5 complete layers are enough here
    curves = complete_layer_means(task_scores(frame), ["T1", "T2", "T3"])
    assert curves[curves["model"] == "m2"]["layer"].tolist() == [0, 4]  # a gap, never a mean over fewer tasks
    assert curves.query("model == 'm1' and layer == 1")["main_score"].iloc[0] == pytest.approx(0.12)
    rows_of, curves_of, caption = headline_tasks(task_scores(frame))
    assert set(rows_of["task"]) == {"T1", "T2"} and caption.startswith("every curve: mean over the same 2 tasks")
    assert len(curves_of) == 10 and set(curves_of["n_tasks"]) == {2}
