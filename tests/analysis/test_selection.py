"""Layer selection by a metric, scored honestly against the last and the best layer."""

from __future__ import annotations

import io
import math
from pathlib import Path

import pandas as pd
import pytest
from _metric_fixtures import run_tables

from layer_mteb.analysis.selection.leaderboard import leaderboard
from layer_mteb.analysis.selection.picks import select_layers
from layer_mteb.common.errors import UserError
from layer_mteb.common.run_folder import RunFolder
from layer_mteb.metrics import METRICS_TABLE

SCORES = {"A": [0.1, 0.3, 0.6, 0.5, 0.4], "B": [0.2, 0.2, 0.4, 0.7, 0.5]}  # mean: .15 .25 .5 .6 .45
METRICS = {
    ("prompt_entropy", "wikitext"): [0.9, 0.8, 0.5, 0.6, 0.7],  # min at 2
    ("dataset_entropy", "wikitext"): [0.1, 0.2, 0.3, 0.4, 0.4],  # max at 3 and 4: the deeper wins (rules)
    ("prompt_entropy", "task:B"): [0.9, 0.9, 0.8, 0.3, 0.5],  # B's own texts: min at 3
}


def _pick(frame: pd.DataFrame, task: str, selector: str, texts: str = "-") -> pd.Series:
    rows = frame[(frame["task"] == task) & (frame["selector"] == selector) & (frame["texts"] == texts)]
    assert len(rows) == 1, (task, selector, texts)
    return rows.iloc[0]


def test_global_selection_against_the_mean_score() -> None:
    scores, metrics = run_tables(SCORES, METRICS)
    frame = select_layers(scores=scores, metrics=metrics)
    assert set(frame["task"]) == {"mean"}
    entropy = _pick(frame, "mean", "prompt_entropy", "wikitext")
    assert entropy["direction"] == "min" and entropy["chosen_layer"] == 2
    assert entropy["chosen_score"] == pytest.approx(0.5)
    assert entropy["last_layer"] == 4 and entropy["last_score"] == pytest.approx(0.45)
    assert entropy["best_layer"] == 3 and entropy["best_score"] == pytest.approx(0.6)
    assert entropy["regret"] == pytest.approx(0.1) and entropy["gain"] == pytest.approx(0.05)
    assert entropy["chosen_relative_depth"] == pytest.approx(0.5)
    dataset = _pick(frame, "mean", "dataset_entropy", "wikitext")
    assert dataset["direction"] == "max" and dataset["chosen_layer"] == 4 and dataset["regret"] == pytest.approx(0.15)
    assert _pick(frame, "mean", "last_layer")["gain"] == 0
    assert _pick(frame, "mean", "middle_layer")["chosen_layer"] == 2
    assert _pick(frame, "mean", "oracle")["regret"] == 0
    assert not (frame["texts"] == "task:B").any()  # one task's own texts say nothing about the mean


def test_per_task_selection_uses_each_tasks_own_texts() -> None:
    scores, metrics = run_tables(SCORES, METRICS)
    frame = select_layers(scores=scores, metrics=metrics, per_task=True)
    assert set(frame["task"]) == {"A", "B"}
    assert _pick(frame, "A", "prompt_entropy", "wikitext")["chosen_layer"] == 2
    wiki_b = _pick(frame, "B", "prompt_entropy", "wikitext")
    assert wiki_b["regret"] == pytest.approx(0.3) and wiki_b["gain"] == pytest.approx(-0.1)  # it can hurt
    own_b = _pick(frame, "B", "prompt_entropy", "task:B")
    assert own_b["chosen_layer"] == 3 and own_b["regret"] == pytest.approx(0) and own_b["gain"] == pytest.approx(0.2)
    assert not ((frame["task"] == "A") & (frame["texts"] == "task:B")).any()

    board = leaderboard(frame).set_index(["selector", "texts"])
    assert board.loc[("prompt_entropy", "wikitext"), "n_tasks"] == 2
    assert board.loc[("prompt_entropy", "wikitext"), "regret"] == pytest.approx(0.15)
    assert board.loc[("prompt_entropy", "wikitext"), "gain"] == pytest.approx(0.05)
    assert board.loc[("prompt_entropy", "wikitext"), "beats_last"] == pytest.approx(0.5)
    assert board.loc[("prompt_entropy", "own texts"), "n_tasks"] == 1
    assert board.loc[("oracle", "-"), "regret"] == 0
    assert list(board["regret"]) == sorted(board["regret"])


def test_by_one_metric() -> None:
    scores, metrics = run_tables(SCORES, METRICS)
    frame = select_layers(scores=scores, metrics=metrics, by="dataset_entropy")
    assert set(frame["selector"]) == {"dataset_entropy", "last_layer", "middle_layer", "oracle"}


def test_run_folder_round_trip(tmp_path: Path) -> None:
    scores, metrics = run_tables(SCORES, METRICS)
    RunFolder(tmp_path).write_scores(scores)
    RunFolder(tmp_path).update(METRICS_TABLE, metrics)
    frame = select_layers(tmp_path, per_task=True)
    stored = pd.read_csv(tmp_path / "selection.csv")
    assert list(stored.columns) == list(frame.columns)
    assert set(stored["task"]) == {"mean", "A", "B"}  # the file keeps the global and the per-task picks
    assert len(stored) == len(frame) + len(select_layers(scores=scores, metrics=metrics))


def test_clear_errors(tmp_path: Path) -> None:
    scores, metrics = run_tables(SCORES, METRICS)
    with pytest.raises(UserError, match="unknown metric"):
        select_layers(scores=scores, metrics=metrics, by="nonsense")
    with pytest.raises(UserError, match="no lidar rows"):
        select_layers(scores=scores, metrics=metrics, by="lidar")
    with pytest.raises(UserError, match="which takes the run's model and settings"):  # same readout
        select_layers(scores=scores, metrics=metrics.assign(readout="raw"), metric_readout="same")
    with pytest.raises(UserError, match="which takes the run's model and settings"):
        select_layers(scores=scores, metrics=metrics.assign(pooling="last"))
    paired = select_layers(scores=scores, metrics=metrics.assign(readout="raw"))  # the paper's pairing, recorded
    assert set(paired.loc[paired["texts"] != "-", "metric_readout"]) == {"raw"}
    with pytest.raises(UserError, match=r"no scores\.csv"):
        select_layers(tmp_path)
    RunFolder(tmp_path).write_scores(scores)
    with pytest.raises(UserError, match=r"no metrics\.csv"):
        select_layers(tmp_path)


def test_cli_select_prints_the_leaderboard(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from layer_mteb.cli import main

    scores, metrics = run_tables(SCORES, METRICS)
    RunFolder(tmp_path).write_scores(scores)
    RunFolder(tmp_path).update(METRICS_TABLE, metrics)
    assert main(["select", "--run", str(tmp_path), "--per-task"]) == 0
    out = capsys.readouterr().out
    assert "prompt_entropy" in out and "regret" in out and (tmp_path / "selection.csv").is_file()
    assert main(["select", "--run", str(tmp_path / "missing")]) == 2
    assert "does not exist" in capsys.readouterr().err
    (tmp_path / "empty").mkdir()
    assert main(["select", "--run", str(tmp_path / "empty")]) == 2
    assert "no scores.csv" in capsys.readouterr().err


def test_cli_select_counts_the_tasks_the_mean_averages(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from layer_mteb.cli import main

    scores, metrics = run_tables(SCORES, METRICS)
    RunFolder(tmp_path).write_scores(scores)
    RunFolder(tmp_path).update(METRICS_TABLE, metrics)
    assert main(["select", "--run", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    first, table = out.split("\n\n")[:2]
    table = pd.read_fwf(io.StringIO(table))
    assert set(table["n_tasks"]) == {2}  # A and B, not the one "mean" row
    # WikiText metrics pick for the mean as well; the first line says where task A's own-text pick is
    assert first.endswith("--per-task also shows the picks of the metrics on each task's own texts")
    assert "--per-task" not in out.removeprefix(first)


def test_cli_select_says_per_task_shows_own_text_selectors(tmp_path: Path, capsys) -> None:
    """A run whose metrics are all on each task's own texts (like an imported release) has only baselines for the
    mean over tasks: select shows a layer per task unless asked not to, and then says where the metric selectors
    are, and that is true."""
    from layer_mteb.cli import main

    scores, metrics = run_tables(SCORES, {("prompt_entropy", "task:A"): [0.5] * 5, **METRICS})
    metrics = metrics[metrics["texts"].str.startswith("task:")]
    RunFolder(tmp_path).write_scores(scores)
    RunFolder(tmp_path).update(METRICS_TABLE, metrics)
    assert main(["select", "--run", str(tmp_path)]) == 0
    first, default = capsys.readouterr().out.split("\n\n")[:2]
    assert first.startswith("a layer per task: ") and "prompt_entropy own texts" in default
    assert main(["select", "--run", str(tmp_path), "--no-per-task"]) == 0
    out = capsys.readouterr().out
    shown = set(pd.read_fwf(io.StringIO(out.split("\n\n")[0]))["selector"])
    assert shown == {"last_layer", "middle_layer", "oracle"}
    [note] = [line for line in out.splitlines() if "--per-task" in line]
    assert "own texts" in note and note.endswith("metric selectors: prompt_entropy")
    assert main(["select", "--run", str(tmp_path), "--per-task"]) == 0
    out = capsys.readouterr().out
    assert "prompt_entropy own texts" in out and "--per-task shows" not in out


def test_select_by_one_metric_writes_beside_the_full_selection_the_report_reads(tmp_path: Path, capsys) -> None:
    from layer_mteb.analysis.report.merged import load_runs
    from layer_mteb.analysis.report.table1 import entropy_picks
    from layer_mteb.cli import main

    scores, metrics = run_tables(SCORES, METRICS)
    RunFolder(tmp_path).write_scores(scores)
    RunFolder(tmp_path).update(METRICS_TABLE, metrics)
    assert main(["select", "--run", str(tmp_path)]) == 0
    full = (tmp_path / "selection.csv").read_bytes()
    assert main(["select", "--run", str(tmp_path), "--by", "dataset_entropy", "--per-task"]) == 0
    assert str(tmp_path / "selection.dataset_entropy.csv") in capsys.readouterr().out
    assert (tmp_path / "selection.csv").read_bytes() == full  # the plain select's picks are kept
    narrow = pd.read_csv(tmp_path / "selection.dataset_entropy.csv")
    assert set(narrow["selector"]) == {"dataset_entropy", "last_layer", "middle_layer", "oracle"}
    assert set(narrow["task"]) == {"mean", "A", "B"}
    model = str(scores["model"].iloc[0])
    # the report's entropy columns: prompt entropy, global pick layer 2, B on its own texts layer 3
    selector, layers = entropy_picks(load_runs([tmp_path]).picks)[model]
    assert selector == "prompt_entropy" and layers == {"mean": 2, "A": 2, "B": 3}


# --- the rules of analysis.rules, as every consumer applies them ---------------------------------------------------

TIED = {"A": [0.2, 0.5, 0.5, 0.3, 0.4]}  # best at 1 and 2 (a tie): layer 2
TIED_METRIC = {("prompt_entropy", "wikitext"): [0.9, 0.1, 0.5, 0.1, 0.7]}  # min at 1 and 3 (a tie): layer 3


def test_ties_go_to_the_deeper_layer_in_table1_selection_and_the_study() -> None:
    from layer_mteb.analysis.report.table1 import per_task_summary, task_scores
    from layer_mteb.analysis.rules import extremum_layer, nearest_layer
    from layer_mteb.analysis.selection import registry, selectors
    from studies import engine as study

    assert extremum_layer(pd.Series([0.2, 0.5, 0.5 - 1e-12, 0.3])) == 2  # within the tolerance: a tie
    assert extremum_layer(pd.Series([0.2, 0.5, 0.5 - 1e-6, 0.3])) == 1
    assert extremum_layer(pd.Series([0.9, 0.1, 0.5, 0.1]), "min") == 3
    assert nearest_layer([0, 1, 2, 3], 1.5) == 2 and nearest_layer([0, 1, 2, 3], 1.4) == 1
    scores, metrics = run_tables(TIED, TIED_METRIC)
    assert per_task_summary(task_scores(scores)).iloc[0]["best_layer"] == 2
    frame = select_layers(scores=scores, metrics=metrics, per_task=True)
    assert _pick(frame, "A", "oracle")["chosen_layer"] == 2
    assert set(frame["best_layer"]) == {2}
    assert _pick(frame, "A", "prompt_entropy", "wikitext")["chosen_layer"] == 3
    [model] = study.study_models(scores, metrics.assign(texts="task:A"), min_tasks=1)
    picks = selectors.evaluate([model], [registry.by_name("prompt_entropy@own")]).iloc[0]
    assert (picks["chosen_layer"], picks["best_layer"]) == (3, 2)
    assert picks["chosen_score"] == pytest.approx(30.0) and picks["regret"] == pytest.approx(20.0)  # the study: ×100


def test_the_last_layer_is_n_layers_in_table1_selection_the_study_and_the_paper() -> None:
    from layer_mteb.analysis.report.table1 import build_table1
    from layer_mteb.paper.tables import table1
    from studies import engine as study

    scores, metrics = run_tables(SCORES, {("prompt_entropy", "task:B"): METRICS[("prompt_entropy", "task:B")]})
    scores = scores[~((scores["task"] == "B") & (scores["layer"] == 4))]  # B lacks the last layer, 4
    row = build_table1(scores).iloc[0]
    assert (row["n_tasks"], row["avg_last"], row["avg_best"]) == (1, 0.4, 0.6)  # A only: B is never compared with 3
    paper = table1(scores).iloc[0]
    assert (paper["n_tasks"], paper["last_layer"]) == (1, 4) and paper["avg_last"] == pytest.approx(40.0)
    assert "left out (no score at the last layer, 4): B" in paper["note"]
    frame = select_layers(scores=scores, metrics=metrics, per_task=True)
    own_b = _pick(frame, "B", "prompt_entropy", "task:B")
    assert own_b["last_layer"] == 4 and math.isnan(own_b["last_score"]) and math.isnan(own_b["gain"])
    assert own_b["regret"] == pytest.approx(0.0)  # still scored against B's best layer
    assert not ((frame["task"] == "B") & (frame["selector"] == "last_layer")).any()  # no last layer to pick
    assert _pick(frame, "A", "last_layer")["chosen_layer"] == 4
    assert study.study_models(scores, metrics, min_tasks=1) == []  # B, the one task with own texts, has no last


def test_select_by_a_study_selector_uses_the_same_engine_units_and_file(tmp_path: Path, capsys) -> None:
    from layer_mteb.cli import main

    scores, metrics = run_tables(SCORES, METRICS)
    RunFolder(tmp_path).write_scores(scores)
    RunFolder(tmp_path).update(METRICS_TABLE, metrics)
    assert main(["select", "--run", str(tmp_path), "--by", "depth=0.8"]) == 0
    out = capsys.readouterr().out
    assert "regret" in out and str(tmp_path / "selection.depth=0.8.csv") in out
    stored = pd.read_csv(tmp_path / "selection.depth=0.8.csv")
    assert list(stored.columns) == list(select_layers(scores=scores, metrics=metrics).columns)
    depth = stored[(stored["selector"] == "depth=0.8") & (stored["task"] == "mean")].iloc[0]
    assert depth["chosen_layer"] == 3 and depth["chosen_score"] == pytest.approx(0.6)  # 0–1, as every selector
    # a studied selector (not offered by --by) through the Python API: own texts, per task
    select_layers(tmp_path, by="prompt_entropy@own")
    own = pd.read_csv(tmp_path / "selection.prompt_entropy@own.csv").query("selector == 'prompt_entropy@own'")
    assert own[["task", "texts", "chosen_layer"]].values.tolist() == [["B", "task:B", 3]]
    assert main(["select", "--run", str(tmp_path), "--by", "prompt_entropy@own"]) == 2
    assert "select_layers(run, by='prompt_entropy@own') applies it" in capsys.readouterr().err
    assert main(["select", "--run", str(tmp_path), "--by", "nonsense@own"]) == 2
    assert "unknown metric or selector" in capsys.readouterr().err


def test_a_rule_that_reads_no_metric_needs_no_metrics_csv(tmp_path: Path, capsys) -> None:
    """``--by auto`` on an embedding model (its rule: the last layer) and ``--by depth=0.5`` read no metric, so a run
    without ``metrics.csv`` can use them; a metric's selector still says the file is missing."""
    from layer_mteb.cli import main

    scores, _ = run_tables(SCORES, METRICS, model="sentence-transformers/all-MiniLM-L6-v2")
    scores.to_csv(tmp_path / "scores.csv", index=False)
    assert main(["select", "--run", str(tmp_path), "--by", "auto"]) == 0
    picks = pd.read_csv(tmp_path / "selection.auto.csv")
    assert set(picks.query("selector == 'auto'")["chosen_layer"]) == {4}
    assert main(["select", "--run", str(tmp_path), "--by", "depth=0.5"]) == 0
    capsys.readouterr()
    assert main(["select", "--run", str(tmp_path), "--by", "prompt_entropy"]) == 2
    assert "no metrics.csv" in capsys.readouterr().err
    with pytest.raises(UserError, match=r"no metrics\.csv"):
        select_layers(tmp_path, by="prompt_entropy@own")


@pytest.mark.parametrize("by", [[], ["--by", "auto"], ["--by", "depth=0.8"]])
def test_select_hands_one_run_folder_to_every_reader(by: list[str], tmp_path: Path, monkeypatch, capsys) -> None:
    """``select`` builds one :class:`RunFolder` for its run and every reader (the picks, the leaderboard, the best
    lines, the cheapest layer, the stored curves) is handed it, so the folder's tables are read once per command."""
    from layer_mteb.cli import main
    from layer_mteb.common import run_folder

    scores, metrics = run_tables(SCORES, METRICS)
    RunFolder(tmp_path).write_scores(scores)
    RunFolder(tmp_path).update(METRICS_TABLE, metrics)
    made: list[Path] = []
    init = run_folder.RunFolder.__init__

    def counted(self, path, shard=None) -> None:
        made.append(Path(path))
        init(self, path, shard)

    monkeypatch.setattr(run_folder.RunFolder, "__init__", counted)
    assert main(["select", "--run", str(tmp_path), *by]) == 0
    assert "regret" in capsys.readouterr().out
    assert made == [tmp_path]


def test_a_selector_says_it_computes_curves_exactly_when_it_reads_a_stored_curve_or_is_auto() -> None:
    """``select`` decides what Ctrl-C leaves from ``computes_curves`` before anything loads: it must match the
    signals the selector reads (a selector of ``agreement.csv`` curves, and no other), and ``auto``, which has them
    computed first for a base model (``AutoSelector.compute_first``)."""
    from layer_mteb.analysis.selection.registry import registry
    from layer_mteb.metrics import SIGNALS
    from layer_mteb.metrics.agreement import AGREEMENT_FILE

    stored = {name: any(SIGNALS[s].table == AGREEMENT_FILE for s in sel.signals()) for name, sel in registry().items()}
    assert {name: sel.reads_curves_alone() for name, sel in registry().items()} == stored
    assert {name: sel.computes_curves for name, sel in registry().items()} == stored | {"auto": True}
    assert stored["agreement"] and stored["id_min"] and not stored["prompt_entropy"] and not stored["auto"]


def test_by_offers_no_layer_twice_and_the_study_grid_keeps_every_candidate():
    """``depth=0.5`` is the middle layer and ``depth=1.0`` the last: ``--by`` offers each once (the depths), takes
    the baselines' own names as second spellings of those depths, and the study grid still scores all of them."""
    from layer_mteb.analysis.selection import registry
    from layer_mteb.analysis.selection.selectors import BASELINE_DEPTHS, DEPTHS, selectors

    offered = registry.offered_names()
    assert len(offered) == len(set(offered)) == 18
    assert not set(BASELINE_DEPTHS) & set(offered)
    assert registry.by_name("depth=0.5").depth == registry.by_name("middle_layer").depth == 0.5
    for baseline, depth in BASELINE_DEPTHS.items():
        assert depth in offered
        assert registry.check_selector(baseline) is registry.check_selector(depth)
    grid = [selector.name for selector in selectors()]
    assert grid[:12] == ["last_layer", "middle_layer", *(f"depth={d:.1f}" for d in DEPTHS)]
    assert len(grid) == 2 + 10 + 6 * 2 * 4  # the baselines, the depths, each metric on each source and window
