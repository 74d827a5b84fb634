"""A run folder holds the models of one ``run`` command at one setting: a second model or another setting written
into it is refused in one line before any model loads, its own models may be rerun or extended, and the readers of a
folder that holds several models (one ``run`` of several ``--model``) keep them apart."""

from __future__ import annotations

import shutil
import time

import pandas as pd
import pytest
from _metric_fixtures import run_tables
from conftest import save_tiny_model

from layer_mteb.analysis.report.merged import load_runs
from layer_mteb.analysis.selection.picks import select_layers
from layer_mteb.analysis.selection.tradeoff import run_cheapest
from layer_mteb.cli import main
from layer_mteb.common.errors import UserError
from layer_mteb.metrics.layer_cost import run_cost


@pytest.fixture(scope="module")
def two_models(tmp_path_factory, bert_tokenizer):
    folder = tmp_path_factory.mktemp("models")
    return save_tiny_model("gpt2", bert_tokenizer, folder / "tiny-a"), save_tiny_model(
        "gpt2", bert_tokenizer, folder / "tiny-b", seed=1
    )


@pytest.fixture(scope="module")
def first_run(two_models, demo_data_dir, tmp_path_factory):
    """A folder holding one run of the first model (copied by each test that writes into it)."""
    out = tmp_path_factory.mktemp("runs") / "run"
    assert _run(two_models[0], demo_data_dir, out) == 0
    return out


def _run(model, demo_data_dir, out, *extra: str) -> int:
    args = ["run", "--model", str(model), "--tasks", "STS17", "--data-dir", str(demo_data_dir), "--layers", "-1"]
    return main([*args, "--output", str(out), *extra])


@pytest.mark.parametrize(
    ("second", "message"),
    [
        ("model", "holds the scores of local/tiny-a; this run would add local/tiny-b: give it another --output"),
        ("--readout raw", "with readout=final_norm; this run asks readout=raw: give it another --output"),
        ("--max-length 64", "with max_length=512; this run asks max_length=64"),
        ("--normalize", "with normalize=False; this run asks normalize=True"),
        ("--attention bidirectional", "with attention=causal; this run asks attention=bidirectional"),
    ],
)
def test_a_second_model_or_setting_is_refused_in_one_line_before_any_model_loads(
    two_models, first_run, demo_data_dir, tmp_path, capsys, second, message
):
    first, other = two_models
    out = shutil.copytree(first_run, tmp_path / "run")
    before = (out / "scores.csv").read_bytes()
    capsys.readouterr()
    model, extra = (other, []) if second == "model" else (first, second.split())
    started = time.perf_counter()
    assert _run(model, demo_data_dir, out, *extra) == 2
    assert time.perf_counter() - started < 2  # the up-front checks: no torch model is built
    err = capsys.readouterr().err.strip()
    assert message in err and len(err.splitlines()) == 1
    assert (out / "scores.csv").read_bytes() == before


def test_a_folder_takes_reruns_and_the_command_that_names_all_its_models(
    two_models, first_run, demo_data_dir, tmp_path
):
    first, other = two_models
    out = shutil.copytree(first_run, tmp_path / "run")
    assert _run(first, demo_data_dir, out, "--layers", "0") == 0  # more layers of its own model
    # the command naming the folder's model and another (a run of several --model, resumed or extended)
    assert main(["run", "--model", str(first), "--model", str(other), "--tasks", "STS17", "--data-dir",
                 str(demo_data_dir), "--layers", "-1", "--output", str(out)]) == 0  # fmt: skip
    frame = pd.read_csv(out / "scores.csv")
    assert sorted(frame["model"].unique()) == ["local/tiny-a", "local/tiny-b"]
    assert _run(other, demo_data_dir, out) == 0  # now one of the folder's own models


def _two_model_run(tmp_path):
    """One folder holding two models (a run of several ``--model``) with opposite curves, and their metrics."""
    a, metrics_a = run_tables({"T": [0.1, 0.2, 0.9]}, {("prompt_entropy", "wikitext"): [3.0, 2.0, 1.0]}, model="o/a")
    b, metrics_b = run_tables({"T": [0.9, 0.2, 0.1]}, {("prompt_entropy", "wikitext"): [1.0, 2.0, 3.0]}, model="o/b")
    folder = tmp_path / "both"
    folder.mkdir()
    pd.concat([a, b]).to_csv(folder / "scores.csv", index=False)
    pd.concat([metrics_a, metrics_b]).to_csv(folder / "metrics.csv", index=False)
    return folder


def test_readers_of_a_folder_of_several_models_keep_them_apart(tmp_path, capsys):
    folder = _two_model_run(tmp_path)
    oracle = select_layers(folder).query("selector == 'oracle'").set_index("model")
    assert oracle.loc["o/a", "chosen_layer"] == 2 and oracle.loc["o/b", "chosen_layer"] == 0  # an average: layer 1
    assert oracle["best_score"].tolist() == [pytest.approx(0.9)] * 2
    cheapest = run_cheapest(folder).query("scope == 'mean'").set_index("model")
    assert cheapest.loc["o/a", "layer"] == 2 and cheapest.loc["o/b", "layer"] == 0
    assert set(load_runs([folder]).scores["model"]) == {"o/a", "o/b"}
    assert main(["select", "--run", str(folder)]) == 0
    table = capsys.readouterr().out
    assert table.splitlines()[0].split()[0] == "model"  # the leaderboard is ranked per model, not averaged
    # the commands that load the run's one model refuse, naming the models and the fix
    with pytest.raises(UserError, match=r"several models or revisions \(o/a @ r, o/b @ r\).*one folder per model"):
        run_cost(folder)
    assert main(["export", "--run", str(folder), "--layer", "1", "--output", str(tmp_path / "x")]) == 2


def test_readers_keep_two_settings_of_one_model_apart_or_refuse(tmp_path):
    raw, _ = run_tables({"T": [0.1, 0.2, 0.9]}, {})
    final, _ = run_tables({"T": [0.9, 0.2, 0.1]}, {})
    folder = tmp_path / "mixed"  # written before a folder held one setting
    folder.mkdir()
    pd.concat([raw.assign(readout="raw"), final]).to_csv(folder / "scores.csv", index=False)
    labels = sorted(load_runs([folder]).scores["model"].unique())
    assert labels == ["test/m (readout=final_norm)", "test/m (readout=raw)"]
    with pytest.raises(UserError, match="several settings of test/m \\(readout differ\\)"):
        select_layers(folder, metrics=pd.DataFrame(columns=["model", "layer", "texts", "metric", "value"]))
