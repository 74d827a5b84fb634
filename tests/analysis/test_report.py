"""Table 1 maths against numbers worked out by hand (see _report_fixtures), plus the run-folder and CLI edges."""

from __future__ import annotations

import json
import logging
import math

import pandas as pd
import pytest
from _report_fixtures import (
    REFERENCE_SCORES,
    alpha_metrics,
    alpha_scores,
    alpha_selection,
    one_layer_scores,
    reference_frame,
    scores_frame,
    write_paper_scores,
    write_results,
    write_run,
)

from layer_mteb import UserError, build_table1
from layer_mteb.analysis.report.build import paper_layer_means, write_report
from layer_mteb.analysis.report.markdown import table1_markdown
from layer_mteb.analysis.report.merged import load_runs
from layer_mteb.analysis.report.table1 import per_task_summary, table1_notes, task_scores
from layer_mteb.analysis.runs.folders import (
    PYTHIA_SCORES_FILE,
    RELEASE_ENV,
    discover_runs,
    load_paper_scores,
    pythia_scores_path,
    release_folder,
)
from layer_mteb.analysis.selection.leaderboard import selector_leaderboard
from layer_mteb.cli import main


def _row(table: pd.DataFrame, model: str, task_type: str = "all") -> pd.Series:
    rows = table[(table["model"] == model) & (table["task_type"] == task_type)]
    assert len(rows) == 1
    return rows.iloc[0]


def test_subsets_are_averaged_so_a_task_counts_once():
    tasks = task_scores(alpha_scores())
    t3 = tasks[tasks["task"] == "T3"].set_index("layer")["main_score"]
    assert t3.tolist() == pytest.approx([0.40, 0.60, 0.60, 0.30])


def test_per_task_best_layer_ties_go_to_the_deeper_layer():
    summary = per_task_summary(task_scores(alpha_scores())).set_index("task")
    assert summary["best_layer"].to_dict() == {"T1": 2, "T2": 3, "T3": 2, "T4": 0, "T5": 1}
    assert summary.loc["T2", "best_not_last"] == False  # noqa: E712 (a tie with the last layer counts for the last)
    assert summary.loc["T1", "best_not_last"] == True  # noqa: E712
    assert summary["best_not_last"].isna().tolist() == [False, False, False, False, True]  # T5 has no last layer
    assert summary.loc["T4", "missing_layers"] == [1]


def test_table1_matches_hand_computed_values():
    table = build_table1(pd.concat([alpha_scores(), one_layer_scores()]))
    alpha = _row(table, "toy/alpha")
    assert alpha["n_layers"] == 3
    assert alpha["n_tasks"] == 4  # T5 lacks the last layer
    assert alpha["best_not_last_pct"] == pytest.approx(75.0)
    assert alpha["avg_last"] == pytest.approx(0.55)
    assert alpha["avg_best"] == pytest.approx(0.6625)
    assert alpha["best_layer"] == 2  # layer 1 is missing on T4, so it cannot be the best single layer
    assert alpha["best_layer_avg"] == pytest.approx(0.60)
    assert math.isnan(alpha["entropy_layer_avg"]) and alpha["entropy_selector"] is None

    one = _row(table, "toy/one-layer")
    assert (one["n_layers"], one["n_tasks"], one["best_layer"]) == (1, 2, 0)
    assert one["best_not_last_pct"] == pytest.approx(50.0)
    assert one["avg_last"] == pytest.approx(0.35)
    assert one["avg_best"] == pytest.approx(0.40)
    assert one["best_layer_avg"] == pytest.approx(0.40)


def test_table1_breaks_down_by_task_type():
    table = build_table1(alpha_scores())
    assert table["task_type"].tolist() == ["all", "Classification", "STS"]  # Clustering only had T5, left out
    sts, classification = _row(table, "toy/alpha", "STS"), _row(table, "toy/alpha", "Classification")
    assert (sts["n_tasks"], sts["best_not_last_pct"], sts["best_layer"]) == (2, 50.0, 3)
    assert (sts["avg_last"], sts["avg_best"], sts["best_layer_avg"]) == pytest.approx((0.725, 0.75, 0.725))
    assert (classification["best_not_last_pct"], classification["best_layer"]) == (100.0, 2)
    assert (classification["avg_last"], classification["avg_best"]) == pytest.approx((0.375, 0.575))
    assert classification["best_layer_avg"] == pytest.approx(0.55)


def test_entropy_columns_come_from_the_prompt_entropy_selector():
    alpha = _row(build_table1(alpha_scores(), alpha_selection()), "toy/alpha")
    assert alpha["entropy_selector"] == "prompt_entropy"
    assert alpha["entropy_layer"] == 2
    assert alpha["entropy_layer_avg"] == pytest.approx(0.60)
    assert alpha["entropy_per_task_avg"] == pytest.approx(0.5875)  # T5 is not a compared task
    other = _row(build_table1(alpha_scores(), alpha_selection(), entropy_selector="dataset_entropy"), "toy/alpha")
    assert (other["entropy_layer"], other["entropy_layer_avg"]) == (0, pytest.approx(0.4625))
    with pytest.raises(UserError, match=r"not in selection\.csv"):
        build_table1(alpha_scores(), alpha_selection(), entropy_selector="nope")


def test_a_run_of_only_the_last_layer_compares_nothing():
    scores = scores_frame("toy/last-only", {("T1", "STS", "default"): [None, None, 0.7]})
    row = _row(build_table1(scores), "toy/last-only")
    assert (row["n_tasks"], row["best_not_last_pct"], row["best_layer"]) == (1, 0.0, 2)
    notes = table1_notes(per_task_summary(task_scores(scores)))
    assert notes == ["toy/last-only: one layer scored per task, so there is no other layer to compare with"]


def test_notes_name_left_out_incomplete_and_partial_tasks():
    notes = "\n".join(table1_notes(per_task_summary(task_scores(alpha_scores()))))
    assert "left out (no score at the last layer, 3): T5" in notes
    assert "T4 (no layer 1)" in notes and "T5 (no layer" not in notes
    assert "partial local data" in notes and "T4" in notes
    markdown = table1_markdown(build_table1(alpha_scores()), notes.splitlines())
    assert "| toy/alpha | 3 | 4 | 75.0 % | 55.0 | 66.3 | 2 | 60.0 | — | — | — |" in markdown
    assert "## By task type" in markdown and "## Notes" in markdown


def test_selector_leaderboard_ranks_global_and_per_task_picks():
    board = selector_leaderboard(alpha_selection())
    assert board["selector"].tolist() == ["prompt_entropy", "random", "dataset_entropy", "prompt_entropy"]
    assert board["scope"].tolist() == ["mean", "mean", "mean", "per task"]
    per_task = board.iloc[-1]
    assert per_task["n_tasks"] == 5 and pd.isna(per_task["layer"])
    assert per_task["score"] == pytest.approx((0.70 + 0.80 + 0.30 + 0.55 + 0.30) / 5)
    assert selector_leaderboard(alpha_selection().drop(columns="chosen_score")) is None


def test_load_runs_labels_runs_that_differ_only_in_settings(tmp_path):
    raw = write_run(tmp_path / "raw", scores_frame("toy/alpha", {("T1", "STS", "default"): [0.1, 0.2]}, readout="raw"))
    norm = write_run(tmp_path / "norm", scores_frame("toy/alpha", {("T1", "STS", "default"): [0.3, 0.4]}))
    more = write_run(tmp_path / "more", scores_frame("toy/alpha", {("T2", "STS", "default"): [0.5, 0.6]}))
    runs = load_runs([raw, norm, more])
    assert sorted(runs.scores["model"].unique()) == ["toy/alpha (readout=final_norm)", "toy/alpha (readout=raw)"]
    merged = runs.scores[runs.scores["model"] == "toy/alpha (readout=final_norm)"]
    assert sorted(merged["task"].unique()) == ["T1", "T2"]  # same settings: tasks from both runs merge
    assert discover_runs(tmp_path) == sorted([raw, norm, more])


def test_reference_drops_the_duplicated_last_layer_and_averages_the_run_tasks(tmp_path):
    path = write_paper_scores(tmp_path / "ref.csv")
    reference = load_paper_scores(path)
    assert sorted(reference["layer"].unique()) == [0, 1, 2] and len(reference) == 9
    assert reference["model"].unique().tolist() == ["Pythia-14m (paper)"]
    curves, note = paper_layer_means(alpha_scores(), path, "run")
    assert curves["main_score"].tolist() == pytest.approx([0.3, 0.5, 0.4])  # T1 and T2 only, not X
    assert "same 2 tasks" in note
    curves, note = paper_layer_means(alpha_scores(), path, "all")
    assert curves["main_score"].tolist() == pytest.approx([0.5, 0.633333, 0.566667], rel=1e-5)
    assert "all 3 paper tasks" in note
    kept = reference.set_index(["task", "layer"])["main_score"].to_dict()
    assert kept == {(t, k): v for t, vs in REFERENCE_SCORES.items() for k, v in enumerate(vs)}
    assert reference["n_layers"].unique().tolist() == [6]  # Pythia-14m's depth from the release's one depth table


def test_reference_keeps_the_numbered_layer_when_its_last_copy_differs(tmp_path):
    raw = reference_frame()
    raw.loc[raw["layer"] == "layer_2_last", "main_score"] = 0.0  # only the numbered row is the paper's layer 2
    raw.to_csv(tmp_path / "ref.csv", index=False)
    reference = load_paper_scores(tmp_path / "ref.csv")
    assert reference.loc[reference["layer"] == 2, "main_score"].tolist() == [0.3, 0.5, 0.9]


def test_cli_report_writes_every_file(tmp_path, capsys):
    alpha, one = write_results(tmp_path / "results")
    reference = write_paper_scores(tmp_path / "ref.csv")
    output = tmp_path / "report"
    argv = ["report", "--run", str(alpha), "--run", str(one), "--output", str(output), "--paper-curves"]
    assert main([*argv, "--pythia-scores", str(reference)]) == 0
    expected = {"table1.csv", "table1.md", "per_task.csv", "layer_means.csv", "selectors.csv", "selectors.md"}
    expected |= {"cost_quality.csv", "cost_quality.md"}  # named by depth; no figure without cost.csv
    for stem in ("figure1", "heatmap_toy_alpha", "heatmap_toy_one-layer", "metrics", "correlation"):
        expected |= {f"{stem}.png", f"{stem}.pdf"}
    assert {p.name for p in output.iterdir()} == expected
    assert all((output / name).stat().st_size > 0 for name in expected)
    assert "Table 1" in capsys.readouterr().out
    assert main([*argv, "--pythia-scores", str(reference)]) == 0  # an earlier report is replaced


@pytest.mark.parametrize("problem", ["missing", "no-scores", "bad-columns", "output-is-a-run"])
def test_cli_user_errors_are_one_line_and_exit_2(tmp_path, capsys, problem):
    run = tmp_path / "run"
    run.mkdir()
    output = tmp_path / "report"
    if problem == "missing":
        run = tmp_path / "absent"
    elif problem == "bad-columns":
        pd.DataFrame({"model": ["m"], "score": [1.0]}).to_csv(run / "scores.csv", index=False)
    elif problem == "output-is-a-run":
        write_run(run, alpha_scores())
        output = tmp_path
    assert main(["report", "--run", str(run), "--output", str(output)]) == 2
    err = capsys.readouterr().err
    assert err.startswith("layer-mteb: error:") and err.count("\n") == 1
    assert not (tmp_path / "report").exists()


def test_the_reference_is_the_release_folder_or_its_pythia_file(tmp_path, monkeypatch):
    folder = tmp_path / "release"
    folder.mkdir()
    file = write_paper_scores(folder / PYTHIA_SCORES_FILE)
    assert pythia_scores_path(folder) == pythia_scores_path(file) == file
    monkeypatch.setenv(RELEASE_ENV, str(folder))  # one variable: the folder, read by the report and the paper
    assert release_folder() == folder and pythia_scores_path() == file


def test_missing_reference_is_a_user_error(tmp_path, monkeypatch):
    monkeypatch.setenv("LAYER_MTEB_RELEASE", str(tmp_path / "nowhere"))
    with pytest.raises(UserError, match="--pythia-scores"):
        write_report([write_run(tmp_path / "run", alpha_scores())], tmp_path / "report", paper_curves=True)
    assert not (tmp_path / "report").exists()


def test_a_run_without_the_last_layer_leaves_table1_empty():
    scores = scores_frame("toy/early", {("T1", "STS", "default"): [0.1, 0.2, None]})
    table = build_table1(scores)
    assert len(table) == 1
    row = table.iloc[0]
    assert row["n_tasks"] == 0 and math.isnan(row["avg_best"]) and pd.isna(row["best_layer"])


@pytest.mark.parametrize(
    ("content", "why"),
    [
        (b"", "unreadable (EmptyDataError"),
        (b"model,selector\n\xff\xfe,x\n", "unreadable (UnicodeDecodeError"),
        (b"selector,layer\nlast_layer,2\n", "has no model column"),
    ],
)
def test_an_unreadable_side_file_is_named_in_one_warning(tmp_path, caplog, content, why):
    folder = write_run(tmp_path / "a", alpha_scores(), metrics=alpha_metrics())
    (folder / "selection.csv").write_bytes(content)
    with caplog.at_level(logging.WARNING, logger="layer_mteb"):
        runs = load_runs([folder])
    assert runs.picks is None and runs.metrics is not None  # left out; the readable side file stays
    [line] = [r.getMessage() for r in caplog.records]
    assert line.startswith(f"{folder / 'selection.csv'} ") and why in line


def test_side_files_belong_to_their_run_folder(tmp_path):
    folder = write_run(tmp_path / "a", alpha_scores(), selection=alpha_selection().assign(model="alpha-as-typed"))
    assert load_runs([folder]).picks["model"].unique().tolist() == ["toy/alpha"]


def test_a_benchmark_run_says_its_means_are_not_the_benchmarks_aggregate(tmp_path):
    run = write_run(tmp_path / "run", alpha_scores())
    (run / "run.json").write_text(
        json.dumps(
            {"tasks": [{"model": "m", "task": "T1", "benchmark": "MTEB(eng, v2)"}, {"model": "m", "task": "T2"}]}
        )
    )
    write_report([run], tmp_path / "report")
    text = (tmp_path / "report" / "table1.md").read_text()
    assert "- Tasks of mteb's MTEB(eng, v2): each task is averaged over the splits and language subsets" in text
    assert "neither mteb's leaderboard aggregate of the benchmark nor comparable with the paper's" in text
