"""Label-budget selection: real mteb scores of real local data, a tiny saved model, and a vector store whose one
layer is made to carry the gold similarity, so the right pick is known."""

from __future__ import annotations

import json
import logging
import os
import shutil
import subprocess
import sys
import warnings
from dataclasses import replace

import numpy as np
import pandas as pd
import pytest
import torch
from safetensors.torch import save_file

from layer_mteb.analysis.labels import budget
from layer_mteb.analysis.labels.budget import TaskLayers, iter_task_layers, pick_layers, select_with_labels
from layer_mteb.analysis.labels.curve import curve_rows, labels_needed, plot_curve, write_curve
from layer_mteb.analysis.labels.labelled import LabelledExamples, layer_scores
from layer_mteb.cli.main import main
from layer_mteb.common.config import EncodeConfig
from layer_mteb.common.errors import UserError
from layer_mteb.evaluation.encoder import resolve_settings
from layer_mteb.evaluation.sweep import sweep
from layer_mteb.model.loading import load_model
from layer_mteb.tasks.catalog import load_task, select_tasks
from layer_mteb.vectors.store import store_folder
from tests.conftest import SHARED_DATA, needs, save_tiny_model

CONFIG = EncodeConfig(batch_size=64)
SIGNAL_LAYER = 1


@pytest.fixture(scope="module")
def module_cache(tmp_path_factory):
    """The session's temporary cache, for module fixtures too (they are set up before the per-test one)."""
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("LAYER_MTEB_CACHE", str(tmp_path_factory.getbasetemp() / "layer_mteb_cache"))
        yield


@pytest.fixture(scope="module")
def tiny_folder(bert_tokenizer, tmp_path_factory, module_cache):
    return save_tiny_model("bert", bert_tokenizer, tmp_path_factory.mktemp("tiny-bert"))


def _scored_run(folder, tasks, data_dir, out):
    """A real sweep of the saved tiny model (mteb's own evaluators) into the run folder ``out``."""
    sweep(load_model(str(folder), CONFIG), tasks, config=CONFIG, data_dir=data_dir, output=out, progress=False)
    return out


def _plant_signal(folder, data_dir) -> None:
    """A vector store for BIOSSES whose layer 1 makes each pair's cosine follow its gold score; layers 0 and 2 are
    noise. Written in the store's own format (safetensors + texts.json) where the sweep will look for it."""
    loaded = load_model(str(folder), CONFIG)
    _, (spec,) = select_tasks("BIOSSES", data_dir)
    task = load_task(spec, "test", data_dir)
    task.load_data()
    rows = task.dataset["default"]["test"] if "default" in task.dataset else task.dataset["test"]
    texts = list(dict.fromkeys([*rows["sentence1"], *rows["sentence2"]]))
    index = {t: i for i, t in enumerate(texts)}
    rng = np.random.default_rng(0)
    vectors = rng.standard_normal((loaded.n_layers + 1, len(texts), loaded.hidden_size)).astype(np.float32)
    for first, second, score in zip(rows["sentence1"], rows["sentence2"], rows["score"], strict=True):
        weight = score / 4.0  # BIOSSES scores run 0..4: the pair's second vector leans towards the first by it
        vectors[SIGNAL_LAYER, index[second]] = weight * vectors[SIGNAL_LAYER, index[first]] + (
            1 - weight
        ) * rng.standard_normal(loaded.hidden_size)
    store = store_folder(loaded, resolve_settings(loaded, CONFIG), "BIOSSES")
    store.mkdir(parents=True, exist_ok=True)
    save_file({"vectors": torch.from_numpy(vectors)}, store / "vectors.safetensors")
    (store / "texts.json").write_text(json.dumps(texts))


@pytest.fixture(scope="module")
def planted_run(tiny_folder, data_dir, tmp_path_factory, module_cache):
    _plant_signal(tiny_folder, data_dir)
    return _scored_run(tiny_folder, ["BIOSSES"], data_dir, tmp_path_factory.mktemp("planted"))


def test_a_layer_that_carries_the_labels_is_picked_from_few_of_them(planted_run, tiny_folder, data_dir):
    scores = pd.read_csv(planted_run / "scores.csv").set_index("layer")["main_score"]
    assert scores.idxmax() == SIGNAL_LAYER and scores[SIGNAL_LAYER] > scores.drop(SIGNAL_LAYER).max() + 0.3
    picks = select_with_labels(planted_run, 8, draws=5, model=str(tiny_folder), data_dir=data_dir)
    row = picks.iloc[0]
    assert row["texts_encoded"] == 0  # the planted store served every text: no forward pass
    assert row["chosen_layer"] == SIGNAL_LAYER and row["picks"] == f"{SIGNAL_LAYER}:5"
    assert row["regret"] == 0 and row["mean_regret"] == 0
    assert row["gain"] == pytest.approx(scores[SIGNAL_LAYER] - scores[scores.index.max()])


def test_the_same_seed_gives_the_same_picks(planted_run, tiny_folder, data_dir):
    (unit,) = iter_task_layers(planted_run, model=str(tiny_folder), data_dir=data_dir)
    noise = replace(unit, scores=unit.scores.loc[[0, 2]], vectors=unit.vectors[[0, 2]])  # no layer carries labels
    first = pick_layers(noise, 8, draws=6, seed=3)
    assert pick_layers(noise, 8, draws=6, seed=3) == first
    assert set(first) <= {0, 2}


def test_worker_processes_give_the_same_picks_as_one(planted_run, tiny_folder, data_dir):
    (unit,) = iter_task_layers(planted_run, model=str(tiny_folder), data_dir=data_dir)
    noise = replace(unit, scores=unit.scores.loc[[0, 2]], vectors=unit.vectors[[0, 2]])  # picks hinge on every digit
    alone = [pick_layers(noise, k, draws=6, seed=5, workers=1) for k in (8, 16, "full")]
    assert [pick_layers(noise, k, draws=6, seed=5, workers=2) for k in (8, 16, "full")] == alone
    assert len(set(alone[0] + alone[1])) == 2  # the draws disagree, so a score changed by the workers would show


def test_a_budget_larger_than_the_split_is_one_clear_error(planted_run, tiny_folder, data_dir, capsys):
    with pytest.raises(UserError, match="--labels 500 is more than the 100 labelled examples of BIOSSES"):
        select_with_labels(planted_run, 500, model=str(tiny_folder), data_dir=data_dir)
    assert main(["select", "--run", str(planted_run), "--labels", "1"]) == 2
    assert "at least 2" in capsys.readouterr().err
    assert not list(planted_run.glob("selection.labels-*"))  # nothing half-written


def test_scoring_every_label_reproduces_mtebs_own_scores(tiny_folder, data_dir, tmp_path):
    """On the full split, the per-draw scorers give what mteb computed (STS: cosine Spearman; pair
    classification: max AP), to the 6 decimals mteb stores."""
    run = _scored_run(tiny_folder, ["STS17", "TwitterSemEval2015"], data_dir, tmp_path / "run")
    for unit in iter_task_layers(run, model=str(tiny_folder), data_dir=data_dir):
        full = layer_scores(unit.examples, unit.vectors, np.arange(len(unit.examples)))
        np.testing.assert_allclose(full, unit.scores.to_numpy(), atol=2e-6, err_msg=unit.name)


@pytest.mark.slow
def test_a_cold_store_is_refilled_once_and_gives_the_same_picks(tiny_folder, data_dir, tmp_path):
    run = _scored_run(tiny_folder, ["STS17"], data_dir, tmp_path / "run")
    warm = select_with_labels(run, 16, draws=4, model=str(tiny_folder), data_dir=data_dir)
    loaded = load_model(str(tiny_folder), CONFIG)
    shutil.rmtree(store_folder(loaded, resolve_settings(loaded, CONFIG), "STS17"))
    cold = select_with_labels(run, 16, draws=4, model=str(tiny_folder), data_dir=data_dir)
    again = select_with_labels(run, 16, draws=4, model=str(tiny_folder), data_dir=data_dir)
    assert warm.iloc[0]["texts_encoded"] == 0 and cold.iloc[0]["texts_encoded"] > 0
    assert again.iloc[0]["texts_encoded"] == 0
    columns = ["chosen_layer", "picks", "mean_regret"]
    pd.testing.assert_frame_equal(warm[columns], cold[columns])


def test_select_labels_from_the_command_line(planted_run, tiny_folder, data_dir, capsys, monkeypatch):
    monkeypatch.setenv("LAYER_MTEB_DATA", str(data_dir))
    argv = ["select", "--run", str(planted_run), "--labels", "8", "--draws", "3", "--model", str(tiny_folder)]
    assert main(argv) == 0
    written = pd.read_csv(planted_run / "selection.labels-8.csv")
    assert written[["task", "chosen_layer", "draws"]].values.tolist() == [["BIOSSES", SIGNAL_LAYER, 3]]
    assert "selection.labels-8.csv" in capsys.readouterr().out


def test_labels_needed_reads_the_curve_against_each_baseline(tmp_path):
    curve = pd.DataFrame(
        {
            "model": "m",
            "task": ["a", "b"] * 3,
            "k": [8, 8, 64, 64, "full", "full"],
            "mean_regret": [0.10, 0.06, 0.014, 0.004, 0.0, 0.0],
        }
    )
    baselines = pd.DataFrame(
        {
            "model": "m",
            "baseline": ["last layer", "paper rule"],
            "selector": ["last_layer", "prompt_entropy"],
            "texts": ["-", "wikitext"],
            "mean_regret": [0.005, 0.09],
        }
    )
    needed = labels_needed(curve, baselines).set_index("target")["labels"]
    assert needed.to_dict() == {
        "within 1 point of the best": 64,
        "beats the last layer": "full",
        "beats the paper rule": 8,
    }
    plot_curve(curve, baselines, tmp_path / "curve.png")
    assert (tmp_path / "curve.png").stat().st_size > 0


def test_baselines_only_keeps_the_measured_curve_and_rereads_the_baselines(planted_run, data_dir, tmp_path, capsys):
    out = tmp_path / "paper"
    out.mkdir()
    model = pd.read_csv(planted_run / "scores.csv")["model"].iloc[0]
    measured = pd.DataFrame({"model": model, "task": "BIOSSES", "k": ["8", "full"], "mean_regret": [0.02, 0.0]})
    measured.to_csv(out / "label_budget.csv", index=False)
    argv = ["label-budget", "--run", str(planted_run), "--output", str(out), "--data-dir", str(data_dir)]
    assert main([*argv, "--baselines-only"]) == 0
    printed = capsys.readouterr().out
    assert "within 1 point of the best" in printed  # the labels each target needs
    [wrote] = [line for line in printed.splitlines() if line.startswith(f"wrote {out}: ")]  # and where it wrote
    assert "label_budget.png" in wrote and "label_budget_baselines.csv" in wrote
    kept = pd.read_csv(out / "label_budget.csv", dtype={"k": str})
    pd.testing.assert_frame_equal(kept, measured, check_dtype=False)  # the measured curve is not measured again
    baselines = pd.read_csv(out / "label_budget_baselines.csv")
    scores = pd.read_csv(planted_run / "scores.csv").set_index("layer")["main_score"]
    (last,) = baselines[baselines["baseline"] == "last layer"]["mean_regret"]
    assert last == pytest.approx(scores.max() - scores[scores.index.max()], abs=1e-6)  # no metrics: last layer only
    assert (out / "label_budget.png").stat().st_size > 0


def test_baselines_only_without_a_curve_is_one_clear_error(planted_run, data_dir, tmp_path, capsys):
    with pytest.raises(UserError, match="needs a measured curve"):
        write_curve([planted_run], tmp_path / "empty", data_dir=data_dir, baselines_only=True)
    argv = ["label-budget", "--run", str(planted_run), "--output", str(tmp_path / "empty"), "--baselines-only"]
    assert main(argv) == 2
    curve = tmp_path / "empty" / "label_budget.csv"
    assert capsys.readouterr().err == (
        f"layer-mteb: error: --baselines-only needs a measured curve: {curve} does not exist\n"
    )


def test_an_interrupted_curve_resumes_from_the_tasks_it_saved(tiny_folder, data_dir, tmp_path):
    run = _scored_run(tiny_folder, ["STS17", "BIOSSES"], data_dir, tmp_path / "run")
    parts = tmp_path / "parts"
    options = {"ks": (8, "full"), "draws": 2, "data_dir": data_dir, "model": str(tiny_folder), "parts": parts}
    whole = curve_rows(run, **options)
    (saved,) = parts.iterdir()
    assert sorted(path.name for path in saved.iterdir()) == ["BIOSSES.csv", "STS17.csv"]
    marked = pd.read_csv(saved / "BIOSSES.csv", dtype={"k": str}).assign(seconds=-1.0)
    marked.to_csv(saved / "BIOSSES.csv", index=False)  # a value no measurement gives: read back, not measured
    (saved / "STS17.csv").unlink()  # as if interrupted while measuring STS17
    again = curve_rows(run, **options)
    assert (again.loc[again["task"] == "BIOSSES", "seconds"] == -1.0).all()
    columns = ["model", "task", "k", "draws", "mean_regret", "mean_gain", "labels_used"]
    pd.testing.assert_frame_equal(again[columns], whole[columns])
    other = curve_rows(run, **{**options, "draws": 3})  # other draws never read those rows
    assert (other["seconds"] >= 0).all() and len(list(parts.iterdir())) == 2


def test_a_run_remembers_its_data_folder_for_select_labels(planted_run, tiny_folder, data_dir, tmp_path, monkeypatch):
    """The run read BIOSSES from ``data_dir`` and says so in run.json; ``select --labels`` on it then finds the labels
    there although the environment now points at an empty folder, and ``--data-dir`` still takes precedence."""
    entries = json.loads((planted_run / "run.json").read_text())["tasks"]
    assert {entry["data_dir"] for entry in entries} == {str(data_dir.resolve())}
    monkeypatch.setenv("LAYER_MTEB_DATA", str(tmp_path))  # no task folder here
    picks = select_with_labels(planted_run, 8, draws=2, model=str(tiny_folder))
    assert picks.iloc[0]["chosen_layer"] == SIGNAL_LAYER
    with pytest.raises(UserError, match="does not exist"):
        select_with_labels(planted_run, 8, draws=2, model=str(tiny_folder), data_dir=tmp_path / "missing")


# Ctrl-C pressed as the first task's layers are being scored: the signal is real, only its moment is fixed.
CTRL_C_WHILE_SCORING = """
import signal, sys
from layer_mteb.analysis.labels import budget
from layer_mteb.cli import main

def interrupted(*args, **kwargs):
    signal.raise_signal(signal.SIGINT)

budget.pick_layers = interrupted
sys.exit(main(sys.argv[1:]))
"""


@pytest.mark.slow  # a new interpreter (torch imported again) for the real signal
def test_ctrl_c_in_select_labels_says_nothing_was_saved(planted_run, tiny_folder, data_dir):
    argv = ["select", "--run", str(planted_run), "--labels", "8", "--model", str(tiny_folder)]
    env = {**os.environ, "LAYER_MTEB_DATA": str(data_dir), "HF_HUB_OFFLINE": "1"}
    before = {path: path.stat().st_mtime_ns for path in planted_run.glob("selection.labels-*")}
    stopped = subprocess.run(
        [sys.executable, "-c", CTRL_C_WHILE_SCORING, *argv], env=env, capture_output=True, text=True
    )
    assert stopped.returncode == 130, stopped.stderr
    lines = [line for line in stopped.stderr.splitlines() if line.strip()]
    assert lines[-1] == "layer-mteb: interrupted; nothing was saved, run the same command again"
    assert not any("Traceback" in line for line in lines)
    assert {path: path.stat().st_mtime_ns for path in planted_run.glob("selection.labels-*")} == before


def _unconverging_unit() -> TaskLayers:
    """A classification task whose logistic regression stops after one iteration: every fit warns that it did not
    converge (scikit-learn's ConvergenceWarning), as mteb's does on a decoder's unnormalised vectors."""
    from types import SimpleNamespace

    from sklearn.linear_model import LogisticRegression

    metadata = SimpleNamespace(name="Unconverging", type="Classification", main_score="accuracy")
    task = SimpleNamespace(
        metadata=metadata, seed=42, n_splits=2, samples_per_label=8, evaluator_model=LogisticRegression(max_iter=1)
    )
    rng = np.random.default_rng(0)
    labels = np.repeat([0, 1, 2], 8)
    vectors = rng.standard_normal((3, len(labels), 16)) * 100  # [layers, texts, D]
    examples = LabelledExamples(task, [f"text {i}" for i in labels], np.arange(len(labels)), labels)
    scores = pd.Series([0.4, 0.5, 0.45], index=[0, 1, 2])
    return TaskLayers("test/model", "Unconverging", "default", scores, examples, vectors, n_layers=2)


@pytest.mark.parametrize("workers", [1, 2])
def test_the_scorers_convergence_warnings_are_one_line_per_task_and_in_its_row(tmp_path, monkeypatch, caplog, workers):
    monkeypatch.setattr(budget, "iter_task_layers", lambda *args, **kwargs: iter([_unconverging_unit()]))
    with caplog.at_level(logging.WARNING, logger="layer_mteb"), warnings.catch_warnings(record=True) as passed_on:
        warnings.simplefilter("always")
        picks = select_with_labels(tmp_path, 8, draws=2, workers=workers)
    assert not [w for w in passed_on if w.category.__name__ == "ConvergenceWarning"]  # counted, not shown
    [line] = [r.getMessage() for r in caplog.records if "ConvergenceWarning" in r.getMessage()]
    count = int(line.split(": ", 1)[1].split()[0])
    assert count >= 3 * 2  # every layer fits in every draw
    assert line.startswith(f"Unconverging: {count} ConvergenceWarnings from mteb's logistic regression at layers 0-2;")
    assert picks["warnings"].tolist() == [f"{count} ConvergenceWarnings at layers 0-2"]


@needs(SHARED_DATA / "BIOSSES", "the task data folder (agreement checks BIOSSES's sample size on its texts)")
def test_agreement_is_drawn_beside_the_labelled_pick_where_the_run_has_its_curves():
    """The committed SmolLM2 run holds agreement curves: its baselines carry agreement's mean regret, the same
    number ``select --by agreement`` gives, and it is the best label-free line (1.87 points; curvature 2.63)."""
    from conftest import REPO

    from layer_mteb.analysis.labels.curve import baseline_rows
    from layer_mteb.analysis.selection.leaderboard import leaderboard
    from layer_mteb.analysis.selection.picks import select_layers

    run = REPO / "results" / "smollm2-135m"
    rows = baseline_rows(run).set_index("baseline")
    picked = select_layers(run, by="agreement", write=False)
    board = leaderboard(picked[picked["selector"] == "agreement"])
    assert rows.loc["agreement", "mean_regret"] == pytest.approx(board["regret"].iloc[0])
    assert rows.loc["agreement", "mean_regret"] == pytest.approx(0.01867, abs=5e-6)
    assert rows.loc["best label-free", "selector"] == "agreement"
