"""Every figure plots the data it is given: the lines' x/y values, their labels, the heatmap's cells and best-layer
boxes, the bars' lengths, and the task sets named in the captions, read back from the drawn figure; each is saved
as PNG and PDF. Side files of the wrong shape are skipped."""

from __future__ import annotations

from pathlib import Path

import matplotlib.image
import numpy as np
import pandas as pd
import pytest
from _report_fixtures import (
    alpha_correlation,
    alpha_metrics,
    alpha_scores,
    one_layer_scores,
    write_paper_scores,
    write_results,
)
from matplotlib.axes import Axes
from matplotlib.colors import to_rgba
from matplotlib.figure import Figure

from layer_mteb.analysis.report import figures
from layer_mteb.analysis.report.build import paper_layer_means, write_report
from layer_mteb.analysis.report.table1 import headline_tasks, per_task_summary, task_scores


@pytest.fixture
def drawn(monkeypatch) -> dict[str, Figure]:
    """Each figure as it is saved, by file stem: the real figure, read back after the real save."""
    saved: dict[str, Figure] = {}
    original = Figure.savefig

    def keep(fig: Figure, path, *args, **kwargs):
        saved[Path(path).stem] = fig
        return original(fig, path, *args, **kwargs)

    monkeypatch.setattr(Figure, "savefig", keep)
    return saved


def _check_files(paths: list[Path], stem: Path) -> None:
    assert sorted(paths) == [stem.with_suffix(".pdf"), stem.with_suffix(".png")]
    image = matplotlib.image.imread(stem.with_suffix(".png"))
    assert image.ndim == 3 and image.shape[0] > 100 and image.shape[1] > 100


def _lines(ax: Axes, legend=None) -> dict[str, tuple[list[float], list[float]]]:
    """label -> (x, y) of every drawn line; seaborn draws its lines unlabelled (its legend entries are separate
    proxies without data), so those are named through the legend entry of the same colour."""
    legend = legend or ax.get_legend()
    colours = {
        to_rgba(h.get_color()): t.get_text() for h, t in zip(legend.legend_handles, legend.get_texts(), strict=True)
    }
    lines = {}
    for line in ax.get_lines():
        if len(line.get_xdata()) == 0:
            continue
        label = line.get_label() if not line.get_label().startswith("_") else colours[to_rgba(line.get_color())]
        assert label not in lines, f"two lines for {label}"
        lines[label] = ([float(x) for x in line.get_xdata()], [float(y) for y in line.get_ydata()])
    return lines


def _assert_lines(got: dict, want: dict) -> None:
    assert set(got) == set(want)
    for label, (x, y) in want.items():
        assert got[label][0] == pytest.approx(x) and got[label][1] == pytest.approx(y), label


@pytest.fixture(scope="module")
def tasks() -> pd.DataFrame:
    return task_scores(pd.concat([alpha_scores(), one_layer_scores()]))


# toy/alpha and toy/one-layer share T1 and T2 (see _report_fixtures): Figure 1 averages those two for both models
HEADLINE = {
    "toy/alpha": ([0, 1 / 3, 2 / 3, 1], [45.0, 70.0, 65.0, 72.5]),
    "toy/one-layer": ([0, 1], [40.0, 35.0]),
}
# the reference fixture holds layers 0-2 of Pythia-14m, whose depth is 6 (the release's one depth table)
PAPER_ON_T1_T2 = {"Pythia-14m (paper)": ([0, 1 / 6, 2 / 6], [30.0, 50.0, 40.0])}


def test_figure1_plots_each_models_mean_over_the_shared_tasks_named_in_its_caption(tmp_path, tasks, drawn):
    headline, curves, shared, task_note = headline_tasks(tasks)
    assert (shared, task_note) == (["T1", "T2"], "tasks: T1, T2")
    paper, paper_note = paper_layer_means(headline, write_paper_scores(tmp_path / "ref.csv"), "run")
    stem = tmp_path / "figure1"
    _check_files(figures.figure1(curves, stem, paper, paper_note, task_note, len(shared)), stem)
    [ax] = drawn["figure1"].axes
    _assert_lines(_lines(ax), HEADLINE | PAPER_ON_T1_T2)
    styles = {line.get_label(): line.get_linestyle() for line in ax.get_lines() if len(line.get_xdata())}
    assert styles["Pythia-14m (paper)"] != "-"  # the paper's curve is dashed, the runs' solid
    assert [t.get_text() for t in ax.get_legend().get_texts()] == [*HEADLINE, *PAPER_ON_T1_T2]
    title = ax.get_title().splitlines()
    assert title[0] == "Average MTEB score by layer depth: mean over the same 2 tasks"
    assert task_note in title and "dashed: paper curves averaged over the same 2 tasks" in ax.get_title()


def test_the_reports_figure1_and_heatmaps_show_the_runs(tmp_path, drawn, caplog):
    """Runs of 5 and 2 tasks: Figure 1 averages the 2 they share, says so in its title, and the report warns once."""
    alpha, one = write_results(tmp_path / "results")
    reference = write_paper_scores(tmp_path / "ref.csv")
    with caplog.at_level("WARNING"):
        write_report([alpha, one], tmp_path / "report", paper_curves=True, pythia_scores=reference)
    [ax] = drawn["figure1"].axes
    _assert_lines(_lines(ax), HEADLINE | PAPER_ON_T1_T2)
    title = ax.get_title().splitlines()
    assert title[:2] == ["Average MTEB score by layer depth: mean over the same 2 tasks", "tasks: T1, T2"]
    [warning] = [r.getMessage() for r in caplog.records if r.levelname == "WARNING"]
    assert warning == (
        "Figure 1 averages only the 2 tasks every run shares (T1, T2); tasks per run: toy/alpha 5, toy/one-layer 2 "
        "(Table 1 averages each run's own)"
    )
    caplog.clear()
    with caplog.at_level("WARNING"):  # alone, alpha's T5 (no layer 3) is dropped: said too
        write_report([alpha], tmp_path / "report")
    [warning] = [r.getMessage() for r in caplog.records if r.levelname == "WARNING"]
    assert warning.startswith("Figure 1 averages only 4 tasks (T1, T2, T3, T4: shared by every run, less those")
    assert drawn["figure1"].axes[0].get_title().startswith("Average MTEB score by layer depth: mean over the same 4")
    caplog.clear()
    with caplog.at_level("WARNING"):  # every task of every run: nothing to say
        write_report([one], tmp_path / "report")
    assert not [r for r in caplog.records if r.levelname == "WARNING"]
    assert {"heatmap_toy_alpha", "heatmap_toy_one-layer", "metrics", "correlation"} <= set(drawn)


def test_heatmap_cells_are_the_scores_and_boxes_mark_each_tasks_best_layer(tmp_path, tasks, drawn):
    alpha = tasks[tasks["model"] == "toy/alpha"]
    best = per_task_summary(alpha).set_index("task")["best_layer"]
    stem = tmp_path / f"heatmap_{figures.slug('toy/alpha')}"
    assert stem.name == "heatmap_toy_alpha"
    _check_files(figures.heatmap(alpha, best, "toy/alpha", stem), stem)
    [ax, _colour_bar] = drawn["heatmap_toy_alpha"].axes
    rows = [t.get_text() for t in ax.get_yticklabels()]
    assert rows == ["T3 (Classification)", "T4 (Classification)", "T5 (Clustering)", "T1 (STS)", "T2 (STS)"]
    assert [t.get_text() for t in ax.get_xticklabels()] == ["0", "1", "2", "3"]
    cells = np.ma.filled(ax.collections[0].get_array().reshape(5, 4).astype(float), np.nan)
    want = [[40, 60, 60, 30], [55, np.nan, 50, 45], [20, 30, 25, np.nan], [50, 60, 70, 65], [40, 80, 60, 80]]
    np.testing.assert_allclose(cells, want)
    boxes = sorted((int(p.get_y()), int(p.get_x())) for p in ax.patches if p.get_edgecolor() == to_rgba("red"))
    # best layers, ties to the deeper one: T3 2, T4 0, T5 1, T1 2, T2 3
    assert boxes == [(0, 2), (1, 0), (2, 1), (3, 2), (4, 3)]
    assert ax.get_title().startswith("toy/alpha:")


def test_metric_panels_plot_each_metric_on_wikitext(tmp_path, drawn):
    metrics = alpha_metrics()
    metrics.loc[metrics["texts"] == "T1", "value"] += 10  # the task's own texts: not what Figure 2 shows
    stem = tmp_path / "metrics"
    _check_files(figures.metric_panels(metrics, stem), stem)
    fig = drawn["metrics"]
    panels = {ax.get_title(): ax for ax in fig.axes if ax.get_visible()}
    assert sorted(panels) == ["curvature", "prompt_entropy"]
    depth = [0, 1 / 3, 2 / 3, 1]
    _assert_lines(_lines(panels["prompt_entropy"], fig.legends[0]), {"toy/alpha": (depth, [0.9, 0.6, 0.5, 0.7])})
    _assert_lines(_lines(panels["curvature"], fig.legends[0]), {"toy/alpha": (depth, [1.2, 1.0, 0.9, 0.8])})
    assert fig.get_suptitle() == "Representation metrics by layer depth on wikitext"
    no_depth = metrics.drop(columns="relative_depth")  # relative depth from n_layers: the same lines
    figures.metric_panels(no_depth, tmp_path / "m2")
    panel = next(ax for ax in drawn["m2"].axes if ax.get_title() == "prompt_entropy")
    _assert_lines(_lines(panel, drawn["m2"].legends[0]), {"toy/alpha": (depth, [0.9, 0.6, 0.5, 0.7])})


def test_a_metric_figure_mixing_readouts_names_each_panels_readout(tmp_path, drawn):
    """SmolLM2-like: entropy measured on both readouts (the raw stream is shown, as the paper's metrics), InfoNCE only
    on the final-norm one; MiniLM-like: final norm only. Each panel names what its lines are."""
    rows = []
    for model, metric, readout, values in [
        ("org/smol", "prompt_entropy", "raw", [0.9, 0.5, 0.7]),
        ("org/smol", "prompt_entropy", "final_norm", [0.1, 0.1, 0.1]),
        ("org/smol", "infonce", "final_norm", [2.0, 1.5, 1.0]),
        ("org/mini", "prompt_entropy", "final_norm", [0.8, 0.6, 0.4]),
        ("org/mini", "infonce", "final_norm", [3.0, 2.0, 1.0]),
    ]:
        rows += [(model, layer, 2, "wikitext", metric, readout, v) for layer, v in enumerate(values)]
    metrics = pd.DataFrame(rows, columns=["model", "layer", "n_layers", "texts", "metric", "readout", "value"])
    figures.metric_panels(metrics, tmp_path / "metrics")
    fig = drawn["metrics"]
    panels = {ax.get_title(): ax for ax in fig.axes if ax.get_visible()}
    mixed = "prompt_entropy\nraw (solid), final_norm (dashed)"
    assert sorted(panels) == ["infonce\nfinal_norm readout", mixed]
    assert fig.get_suptitle() == "Representation metrics by layer depth on wikitext"
    entropy = panels[mixed]
    depth = [0, 0.5, 1]
    want = {"org/smol": (depth, [0.9, 0.5, 0.7]), "org/mini": (depth, [0.8, 0.6, 0.4])}
    _assert_lines(_lines(entropy, fig.legends[0]), want)
    styles = {line.get_color(): line.get_linestyle() for line in entropy.get_lines() if len(line.get_xdata())}
    legend = {t.get_text(): h for h, t in zip(fig.legends[0].legend_handles, fig.legends[0].get_texts(), strict=True)}
    assert styles[legend["org/smol"].get_color()] == "-" and styles[legend["org/mini"].get_color()] == "--"
    assert {"raw readout", "final_norm readout"} <= set(legend)
    figures.metric_panels(metrics[metrics["model"] == "org/mini"], tmp_path / "one")
    assert drawn["one"].get_suptitle() == "Representation metrics by layer depth on wikitext (final_norm readout)"
    assert {ax.get_title() for ax in drawn["one"].axes} == {"infonce", "prompt_entropy"}


def test_missing_correlations_are_written_n_a(tmp_path, drawn):
    correlation = alpha_correlation()
    correlation.loc[(correlation["metric"] == "curvature") & (correlation["method"] == "kendall"), "value"] = None
    correlation = correlation[~((correlation["metric"] == "prompt_entropy") & (correlation["method"] == "dcor"))]
    figures.correlation_bars(correlation, tmp_path / "corr")
    dcor, signed = drawn["corr"].axes
    assert [t.get_text() for t in dcor.get_yticklabels()] == ["curvature", "prompt_entropy"]
    assert [(t.get_text(), t.get_position()[1]) for t in dcor.texts] == [("n/a", 1)]
    assert [(t.get_text(), t.get_position()[1]) for t in signed.texts] == [("n/a: kendall", 0)]
    assert _bars(dcor) == [[0.8]]


def _bars(ax: Axes) -> list[list[float]]:
    return [[round(float(bar.get_width()), 9) for bar in container] for container in ax.containers]


def test_correlation_bars_are_the_mean_scope_values_with_stars_for_small_p(tmp_path, drawn):
    correlation = alpha_correlation()
    correlation.loc[correlation["scope"] == "T1", "value"] = 0.1  # one task's correlation: not the mean scope's
    stem = tmp_path / "corr"
    _check_files(figures.correlation_bars(correlation, stem), stem)
    dcor, signed = drawn["corr"].axes
    assert dcor.get_title(loc="left") == "toy/alpha\ndistance correlation (dCor)"
    assert signed.get_title(loc="left") == "signed: spearman, kendall"
    assert [t.get_text() for t in dcor.get_yticklabels()] == ["curvature", "prompt_entropy"]
    assert _bars(dcor) == [[0.8, 0.8]] and _bars(signed) == [[-0.6, -0.6], [-0.4, -0.4]]
    assert len(dcor.texts) == len(signed.texts) == 0  # p = 0.05 earns no star
    small_p = correlation.copy()
    small_p.loc[(small_p["metric"] == "curvature") & (small_p["method"] == "dcor"), "p_value"] = 0.001
    figures.correlation_bars(small_p, tmp_path / "corr2")
    assert [t.get_text().strip() for t in drawn["corr2"].axes[0].texts] == ["**"]
    per_task_only = correlation.query("scope != 'mean'")
    figures.correlation_bars(per_task_only, tmp_path / "corr3")
    assert _bars(drawn["corr3"].axes[0]) == [[0.1, 0.1]]
    assert "(mean over per-task correlations)" in drawn["corr3"].get_suptitle()


def test_unexpected_side_files_are_skipped(tmp_path):
    assert figures.metric_panels(pd.DataFrame({"model": ["m"], "score": [1.0]}), tmp_path / "m") == []
    assert figures.metric_panels(alpha_metrics().drop(columns=["relative_depth", "n_layers"]), tmp_path / "m") == []
    renamed = alpha_correlation().rename(columns={"method": "kind"})
    assert figures.correlation_bars(renamed, tmp_path / "c") == []
    assert figures.correlation_bars(alpha_correlation().assign(value=float("nan")), tmp_path / "c") == []
    assert list(tmp_path.iterdir()) == []


def test_figure1_common_tasks_drop_the_task_that_leaves_layers_incomplete():
    from layer_mteb.analysis.report.table1 import headline_tasks
    from layer_mteb.analysis.rules import common_tasks, complete_layer_means

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
    rows_of, curves_of, shared, caption = headline_tasks(task_scores(frame))
    assert set(rows_of["task"]) == {"T1", "T2"} and shared == ["T1", "T2"] and caption == "tasks: T1, T2"
    assert len(curves_of) == 10 and set(curves_of["n_tasks"]) == {2}
