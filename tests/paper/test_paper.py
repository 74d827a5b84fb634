"""The paper from the authors' release: importing their mteb 1.x folders, Table 1, missing layers, the metric
protocol (raw-stream metrics choosing among final-norm scores) and the reproduce command."""

from __future__ import annotations

import csv
import shutil
from pathlib import Path

import pandas as pd
import pytest
from _metric_fixtures import run_tables

from layer_mteb.analysis.runs.importing import import_folder, release_scores, write_import
from layer_mteb.analysis.runs.release_layout import RELEASE_SCORES_FILE, release_folder
from layer_mteb.analysis.selection.curves import MEAN, score_curves
from layer_mteb.analysis.selection.picks import select_layers
from layer_mteb.common.errors import UserError
from layer_mteb.paper.tables import table1

ROOT = Path(__file__).resolve().parents[2]
REFERENCE = release_folder()
PYTHIA_14M = REFERENCE / "official_mteb_json" / "Pythia-14m"
pytestmark = pytest.mark.skipif(not PYTHIA_14M.is_dir(), reason="the authors' release is not on this machine")


def release_rows(model: str) -> list[dict]:
    with (REFERENCE / RELEASE_SCORES_FILE).open() as handle:
        return [row for row in csv.DictReader(handle) if row["model"] == model]


def test_importing_the_authors_pythia_14m_folder_gives_the_released_rows():
    imported = import_folder(PYTHIA_14M, model="Pythia/14m")
    got = {(int(r.layer), r.task): round(r.main_score, 6) for r in imported.itertuples()}
    expected = {
        (int(r["layer"].removeprefix("layer_")), r["task"]): float(r["main_score"]) for r in release_rows("Pythia/14m")
    }
    assert len(expected) == 7 * 32
    assert got == expected
    assert set(imported.loc[imported["task"] == "STS17", "subset"]) == {"en-en"}  # the paper's subset only


def test_imported_rows_name_the_attention_the_model_ran():
    assert set(import_folder(PYTHIA_14M, model="Pythia/14m")["attention"]) == {"causal"}  # the release's decoder
    scores = release_scores(REFERENCE / RELEASE_SCORES_FILE, ["Pythia/14m", "bert/base", "mamba/130m"])
    assert dict(scores.groupby("model")["attention"].unique().map(tuple)) == {
        "Pythia/14m": ("causal",),
        "bert/base": ("bidirectional",),
        "mamba/130m": ("causal",),
    }
    with pytest.raises(UserError, match="do not say which attention acme/encoder ran: pass --attention"):
        import_folder(PYTHIA_14M, model="acme/encoder")  # not a release model, and the files do not say
    told = import_folder(PYTHIA_14M, model="acme/encoder", attention="bidirectional")
    assert set(told["attention"]) == {"bidirectional"}


def test_import_asks_for_the_attention_in_one_line_and_writes_nothing(tmp_path, capfd, caplog):
    from _in_process import run_main

    out = tmp_path / "run"
    done = run_main(["import", str(PYTHIA_14M), "--model", "acme/encoder", "--output", str(out)], capfd, caplog)
    assert done.returncode == 2 and len(done.lines) == 1, done.lines
    assert "do not say which attention acme/encoder ran: pass --attention" in done.stderr
    assert not (out / "scores.csv").exists()
    told = ["import", str(PYTHIA_14M), "--model", "acme/encoder", "--attention", "bidirectional", "--output", str(out)]
    assert run_main(told, capfd, caplog).returncode == 0
    assert set(pd.read_csv(out / "scores.csv")["attention"]) == {"bidirectional"}


def test_table1_for_pythia_410m_matches_a_hand_computation():
    by_task: dict[str, dict[int, float]] = {}
    for row in release_rows("Pythia/410m"):
        if not row["layer"].endswith("_last"):
            by_task.setdefault(row["task"], {})[int(row["layer"].removeprefix("layer_"))] = float(row["main_score"])
    assert len(by_task) == 32
    last = [scores[24] for scores in by_task.values()]
    best = [max(scores.values()) for scores in by_task.values()]
    share = sum(max(s.values()) > s[24] for s in by_task.values()) / 32
    row = table1(release_scores(REFERENCE / RELEASE_SCORES_FILE, ["Pythia/410m"])).iloc[0]
    assert (row["n_tasks"], row["last_layer"]) == (32, 24)
    assert row["best_not_last"] == pytest.approx(100 * share) == 100.0
    assert row["avg_last"] == pytest.approx(100 * sum(last) / 32)
    assert row["avg_best"] == pytest.approx(100 * sum(best) / 32)
    assert (round(row["avg_last"], 1), round(row["avg_best"], 1)) == (46.8, 53.4)


def test_a_missing_layer_is_named_and_never_averaged(tmp_path):
    folder = tmp_path / "Pythia-14m"
    shutil.copytree(PYTHIA_14M, folder)
    (folder / "mteb" / "layer_3" / "STS12.json").unlink()
    lines = write_import(folder, tmp_path / "run", model="Pythia/14m")
    assert any("STS12: 3" in line for line in lines)
    scores = pd.read_csv(tmp_path / "run" / "scores.csv")
    assert 3 not in score_curves(scores)[MEAN].index  # the mean never averages 31 tasks at one layer and 32 at others
    row = table1(scores).iloc[0]
    assert "STS12 (no layer 3)" in row["note"]


def test_selection_pairs_raw_metrics_with_final_norm_scores_and_records_it(tmp_path):
    run = tmp_path / "run"
    write_import(PYTHIA_14M, run, model="Pythia/14m", metrics=REFERENCE / "official_layer_metrics.csv.gz")
    chosen = select_layers(run, by="prompt_entropy", per_task=True)
    picks = chosen[chosen["selector"] == "prompt_entropy"]
    assert len(picks) > 20 and set(picks["metric_readout"]) == {"raw"}
    stored = pd.read_csv(run / "selection.prompt_entropy.csv")  # --by one metric writes beside selection.csv
    assert set(stored.query("selector == 'prompt_entropy'")["metric_readout"]) == {"raw"}
    with pytest.raises(UserError, match="no rows for the scored model"):
        select_layers(run, by="prompt_entropy", per_task=True, metric_readout="same")  # no final_norm metrics


def test_importing_a_runs_own_mteb_folder_gives_its_scores(tiny_gpt_neox, data_dir, tmp_path):
    from layer_mteb.common.config import EncodeConfig
    from layer_mteb.evaluation.sweep import sweep

    out = tmp_path / "run"
    scores = sweep(tiny_gpt_neox, ["STS17"], config=EncodeConfig(batch_size=32), data_dir=data_dir, output=out)
    imported = import_folder(out / "mteb")
    columns = ["model", "layer", "n_layers", "task", "subset", "main_score", "readout", "pooling", "max_length"]
    pd.testing.assert_frame_equal(imported[columns], scores[columns], check_dtype=False)
    assert set(imported["attention"]) == set(scores["attention"]) == {"causal"}  # what the run's files say


def test_reproduce_says_what_each_step_wrote(tmp_path, capsys):
    from layer_mteb.paper.regenerate import Progress

    written: list[Path] = []
    progress = Progress(written)
    progress.step("read the release")
    written += [tmp_path / "table1.csv", tmp_path / "table1_vs_paper.csv"]
    progress.step()
    written += [tmp_path / f"stress_{i}.png" for i in range(6)]
    progress.step()
    lines = capsys.readouterr().out.splitlines()
    assert [line.rsplit(" (", 1)[0] for line in lines] == [
        "paper: read the release",
        "paper: table1.csv, table1_vs_paper.csv",
        "paper: stress_0.png, stress_1.png, stress_2.png, ... (3 more)",
    ]
    assert all(line.endswith(" s)") for line in lines)


def test_the_reproduce_command_passes_its_options_to_reproduce(tmp_path, monkeypatch, capsys):
    from layer_mteb.cli import main
    from layer_mteb.paper import regenerate

    called = []
    monkeypatch.setattr(regenerate, "reproduce", lambda *args, **kwargs: called.append((args, kwargs)))
    run = tmp_path / "run"
    run.mkdir()
    (run / "scores.csv").write_text("model,layer,n_layers,task,main_score\n")
    release = REFERENCE / "release"
    argv = ["reproduce", "--release", str(release), "--run", str(run), "--output", str(tmp_path / "paper")]
    assert main([*argv, "--permutations", "7"]) == 0
    results = release / "experiments" / "results"
    assert called == [((results, [run], tmp_path / "paper", 7), {})]


def test_a_run_without_metrics_keeps_its_scores_but_mismatched_metrics_are_an_error(tmp_path):
    from layer_mteb.paper.regenerate import scores_and_metrics

    scores, metrics = run_tables({"STS12": [0.1, 0.3, 0.2]}, {("prompt_entropy", "wikitext"): [0.5, 0.4, 0.6]})
    scores.to_csv(tmp_path / "scores.csv", index=False)
    alone, none = scores_and_metrics(tmp_path)
    assert none is None and alone["main_score"].tolist() == [0.1, 0.3, 0.2]
    metrics.assign(max_length=128).to_csv(tmp_path / "metrics.csv", index=False)  # measured with other settings
    with pytest.raises(UserError, match=r"metrics\.csv has no rows for the scored model and settings"):
        scores_and_metrics(tmp_path)
    metrics.to_csv(tmp_path / "metrics.csv", index=False)
    _, paired = scores_and_metrics(tmp_path)
    assert paired["value"].tolist() == [0.5, 0.4, 0.6]
