"""Every consumer of the analysis rules agrees on one small run with a tie and a partial layer set: the best layer
(ties deeper), the last layer (``n_layers``, absent where a task lacks it) and the gain over it.

Consumers: ``select`` (per task), ``select --labels`` (its judge of the picks), Table 1 (report and paper), the study
engine (both studies, ``make reproduce``) and the stress figures' last layer."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest
from _metric_fixtures import run_tables

from layer_mteb.analysis.labels.budget import TaskLayers, judge
from layer_mteb.analysis.report.table1 import build_table1, per_task_summary, task_scores
from layer_mteb.analysis.rules import default_layer, last_layer_of, most_frequent_layer
from layer_mteb.analysis.selection.picks import select_layers
from layer_mteb.analysis.selection.registry import by_name
from layer_mteb.analysis.selection.selectors import evaluate
from layer_mteb.paper.tables import table1
from studies.engine import score_models

N_LAYERS = 6
#: A: every layer, best 0.6 at layers 2 and 4 (a tie: 4 wins), last 0.45. B: layers 0–4 only (no last layer).
A = [0.1, 0.3, 0.6, 0.5, 0.6, 0.5, 0.45]
B = [0.2, 0.7, 0.4, 0.7, 0.5]
BEST_A, LAST_A = 4, 0.45


@pytest.fixture
def run() -> tuple[pd.DataFrame, pd.DataFrame]:
    scores, metrics = run_tables({"A": A}, {("prompt_entropy", "task:A"): [0.9, 0.8, 0.3, 0.6, 0.3, 0.7, 0.8]})
    partial = run_tables({"B": [*B, math.nan, math.nan]}, {})[0].dropna(subset=["main_score"])
    return pd.concat([scores, partial], ignore_index=True), metrics


def _unit(curve: list[float]) -> TaskLayers:
    """A labelled-selection unit as ``select --labels`` judges it: only its full-split scores and depth matter."""
    scores = pd.Series(curve, index=range(len(curve)), dtype=float)
    return TaskLayers("test/m", "T", "default", scores, examples=None, vectors=np.empty(0), n_layers=N_LAYERS)


def test_select_labels_table1_and_the_study_agree_on_best_last_and_gain(run) -> None:
    scores, metrics = run
    oracle = select_layers(scores=scores, metrics=metrics, per_task=True).query("selector == 'oracle'")
    oracle = oracle.set_index("task")
    labelled = {task: judge(_unit(curve), [2, 4, 1, 3]) for task, curve in (("A", A), ("B", B))}
    summary = per_task_summary(task_scores(scores)).set_index("task")
    [model], _ = score_models(scores, metrics, min_tasks=1)
    study = evaluate([model], [by_name("oracle")]).set_index("task")

    assert oracle.loc["A", "best_layer"] == labelled["A"]["best_layer"] == summary.loc["A", "best_layer"] == BEST_A
    assert study.loc["A", "best_layer"] == BEST_A
    assert oracle.loc["A", "last_score"] == labelled["A"]["last_score"] == summary.loc["A", "last_score"] == LAST_A
    assert study.loc["A", "last_score"] == pytest.approx(100 * LAST_A)  # the study works ×100
    assert oracle.loc["A", "gain"] == pytest.approx(labelled["A"]["gain"]) == pytest.approx(0.6 - LAST_A)
    assert study.loc["A", "gain"] == pytest.approx(100 * (0.6 - LAST_A))

    # B has no layer N_LAYERS: no last score and no gain anywhere, never a comparison with its deepest layer 4
    assert oracle.loc["B", "best_layer"] == labelled["B"]["best_layer"] == summary.loc["B", "best_layer"] == 3
    assert math.isnan(oracle.loc["B", "last_score"]) and math.isnan(labelled["B"]["last_score"])
    assert math.isnan(summary.loc["B", "last_score"]) and math.isnan(labelled["B"]["gain"])
    assert math.isnan(oracle.loc["B", "gain"]) and math.isnan(labelled["B"]["mean_gain"])
    assert "B" not in study.index  # the study judges only tasks with a last layer


def test_table1_of_the_report_and_of_the_paper_leave_out_the_task_without_a_last_layer(run) -> None:
    scores, _ = run
    report = build_table1(scores).query("task_type == 'all'").iloc[0]
    paper = table1(scores).iloc[0]
    assert report["n_tasks"] == 1 and report["avg_last"] == pytest.approx(LAST_A)
    assert paper["last_layer"] == N_LAYERS and paper["avg_last"] == pytest.approx(100 * LAST_A)


def test_the_labelled_picks_break_ties_like_every_other_rule() -> None:
    assert most_frequent_layer([2, 4, 4, 2, 1]) == 4  # 2 and 4 twice each: the deeper
    assert judge(_unit(A), [2, 2, 4, 4])["chosen_layer"] == 4
    assert default_layer(range(7), N_LAYERS) == N_LAYERS and default_layer(range(5), N_LAYERS) == 4


def test_a_table_without_n_layers_holds_every_layer_and_its_deepest_is_the_last(run) -> None:
    scores, _ = run
    stress_like = pd.DataFrame({"layer": range(N_LAYERS + 1), "value": 0.0})
    assert last_layer_of(stress_like) == N_LAYERS
    assert last_layer_of(scores[scores["task"] == "B"]) == N_LAYERS  # a run records n_layers: not B's deepest, 4


def _printed_select(capsys, folder, *options: str) -> tuple[pd.DataFrame, str]:
    """``layer-mteb select --run folder options``: the selection it wrote and the line naming its bests."""
    from layer_mteb.analysis.selection.picks import selection_file
    from layer_mteb.cli import main

    assert main(["select", "--run", str(folder), *options]) == 0
    [line] = [x for x in capsys.readouterr().out.splitlines() if x.startswith("best of ")]
    by = options[options.index("--by") + 1] if "--by" in options else None
    return pd.read_csv(folder / selection_file(by)), line


def test_every_mode_of_select_reports_the_same_bests_and_says_which_its_regret_is_against(run, tmp_path, capsys):
    scores, metrics = run
    folder = tmp_path / "run"
    folder.mkdir()
    scores.to_csv(folder / "scores.csv", index=False)
    metrics.to_csv(folder / "metrics.csv", index=False)
    plain, plain_line = _printed_select(capsys, folder, "--no-per-task")  # own-text metrics alone: per task unasked
    per_task, per_task_line = _printed_select(capsys, folder, "--per-task")
    auto, auto_line = _printed_select(capsys, folder, "--by", "auto")

    # the one layer for both tasks: mean over the layers both have (0-4): (0.6+0.4)/2 at 2, (0.5+0.7)/2 at 3,
    # (0.6+0.5)/2 at 4 -> layer 3 (0.6); each task at its own best: (0.6 + 0.7) / 2 = 0.65
    bests = "best of test/m over 2 tasks: one layer for every task: layer 3, mean 0.6000; each task at its own best "
    bests += "layer: mean 0.6500; the table's best_score and regret are against "
    assert plain_line.startswith(bests + "that one layer") and "compares layers 0-4 of 0-6" in plain_line
    assert per_task_line.startswith(bests + "each task's own best layer")
    assert auto_line == per_task_line
    mean_oracle = plain.query("task == 'mean' and selector == 'oracle'").iloc[0]
    assert (mean_oracle["chosen_layer"], mean_oracle["best_score"]) == (3, pytest.approx(0.6))

    # per task, both modes judge the same baselines with the same best and regret
    columns = ["task", "selector", "chosen_layer", "best_score", "regret"]
    baselines = "selector in ['oracle', 'last_layer', 'middle_layer'] and task != 'mean'"
    ours = per_task.query(baselines)[columns].sort_values(["task", "selector"]).reset_index(drop=True)
    theirs = auto.query(baselines)[columns].sort_values(["task", "selector"]).reset_index(drop=True)
    pd.testing.assert_frame_equal(ours, theirs)
    assert ours.groupby("task")["best_score"].first().mean() == pytest.approx(0.65)
