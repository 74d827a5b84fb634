"""``layer-mteb run`` end to end on a tiny saved model and real local tasks; user mistakes exit 2 in one line."""

from __future__ import annotations

import pandas as pd
import pytest
from conftest import save_tiny_model

from layer_mteb.cli import main


@pytest.fixture(scope="module")
def tiny_folder(tmp_path_factory, bert_tokenizer):
    folder = tmp_path_factory.mktemp("models") / "tiny-gpt2"
    return save_tiny_model("gpt2", bert_tokenizer, folder)


def test_run_writes_scores_and_prints_a_layer_table(tiny_folder, data_dir, tmp_path, capsys):
    out = tmp_path / "run"
    code = main(
        [
            "run",
            "--model",
            str(tiny_folder),
            "--tasks",
            "STS17,BIOSSES",
            "--data-dir",
            str(data_dir),
            "--layers",
            "0,-1",
            "--readout",
            "raw",
            "--output",
            str(out),
        ]
    )
    assert code == 0
    frame = pd.read_csv(out / "scores.csv")
    assert sorted(frame["layer"].unique()) == [0, 2]
    assert set(frame["readout"]) == {"raw"} and set(frame["data"]) == {"local"}
    printed = capsys.readouterr().out
    assert "STS17" in printed and "mean" in printed
    means = frame.groupby("layer")["main_score"].mean()  # one subset per task here
    best = means.idxmax()
    [summary] = [line for line in printed.splitlines() if "best layer" in line]
    model = frame["model"].iloc[0]
    # on the table's scale (0-1, four decimals): the table's mean column holds the same two numbers
    assert summary == f"{model}: best layer {best} (mean {means[best]:.4f} over 2 tasks), last layer 2: {means[2]:.4f}"
    table_means = {line.split()[0]: line.split()[-1] for line in printed.splitlines() if line[:1].isdigit()}
    assert table_means[str(best)] == f"{means[best]:.4f}" and table_means["2"] == f"{means[2]:.4f}"


def test_default_output_is_runs_not_the_committed_results(tiny_folder, demo_data_dir, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    args = ["run", "--model", str(tiny_folder), "--tasks", "STS17", "--data-dir", str(demo_data_dir), "--layers", "-1"]
    assert main(args) == 0
    assert (tmp_path / "runs" / "tiny-gpt2" / "scores.csv").is_file()
    assert not (tmp_path / "results").exists()


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--layers", "9"], "out of range"),
        (["--tasks", "NoSuchTask"], "unknown mteb task"),
        (["--max-length", "0"], "--max-length"),
        (["--device", "cuda"], "no CUDA GPU"),
        (["--tasks", "offline", "--data-dir", "/no/such/dir"], "does not exist"),
    ],
)
def test_user_mistakes_exit_2_with_one_line(tiny_folder, demo_data_dir, tmp_path, capsys, args, message):
    out = tmp_path / "run"
    base = [
        "run",
        "--model",
        str(tiny_folder),
        "--tasks",
        "STS17",
        "--data-dir",
        str(demo_data_dir),
        "--output",
        str(out),
    ]
    assert main(base + args) == 2
    err = capsys.readouterr().err.strip()
    assert message in err and len(err.splitlines()) == 1
    assert not out.exists()


@pytest.mark.parametrize("below", ["", "sub"])
def test_metrics_output_that_is_a_file_fails_in_one_line_before_work(tmp_path, capsys, below):
    taken = tmp_path / "taken.csv"
    taken.write_text("mine\n")
    output = taken / below if below else taken
    args = ["metrics", "--model", str(tmp_path / "no-model-here"), "--texts", str(tmp_path / "no-texts.txt")]
    assert main([*args, "--output", str(output)]) == 2
    err = capsys.readouterr().err.strip()
    said = "is a file" if output == taken else f"is inside {str(taken)!r}, which is a file"
    assert said in err and str(output) in err and len(err.splitlines()) == 1
    assert taken.read_text() == "mine\n"


def test_the_command_line_defaults_are_the_library_s():
    """The parser declares its defaults without importing the library; they must be the library's own."""
    from layer_mteb.analysis.labels.budget import DEFAULT_DRAWS
    from layer_mteb.cli.main import build_parser
    from layer_mteb.paper.regenerate import PERMUTATIONS

    parser = build_parser()
    assert parser.parse_args(["label-budget", "--run", "r"]).draws == DEFAULT_DRAWS
    assert parser.parse_args(["select", "--run", "r"]).draws == DEFAULT_DRAWS
    assert parser.parse_args(["reproduce"]).permutations == PERMUTATIONS
