"""``select --by auto`` (and ``export --by auto``) on a base model's run without agreement curves computes them where
a reference encoder loads, saying first what it encodes, and applies the depth rule, saying why in one line, where
none loads; ``--no-reference`` keeps to the depth rule without a word. The run's task, STS17, ships with the
package: no data folder is needed."""

from __future__ import annotations

import pandas as pd
import pytest
from conftest import save_tiny_model

from layer_mteb.cli import main
from layer_mteb.common.files import content_hash
from layer_mteb.common.run_folder import RunFolder
from layer_mteb.metrics.agreement import AGREEMENT_FILE, AGREEMENT_TABLE, curves

MODEL = "local/tiny-gpt2"


@pytest.fixture(scope="module")
def tiny_folder(tmp_path_factory, bert_tokenizer):
    return save_tiny_model("gpt2", bert_tokenizer, tmp_path_factory.mktemp("models") / "tiny-gpt2")


def _run(folder, model) -> str:
    """The tiny GPT-2 (``model``, its folder) scored on STS17 (en-en) at its 3 layers, as a run writes it."""
    settings = {"readout": "final_norm", "pooling": "mean", "max_length": 64, "dtype": "float32", "normalize": False}
    rows = [
        {
            "model": MODEL,
            "revision": content_hash(model),
            **settings,
            "attention": "causal",
            "layer": layer,
            "n_layers": 2,
        }
        | {"task": "STS17", "task_type": "STS", "subset": "en-en", "split": "test", "main_score": score}
        for layer, score in enumerate([0.1, 0.3, 0.2])
    ]
    folder.mkdir()
    pd.DataFrame(rows).to_csv(folder / "scores.csv", index=False)
    return str(folder)


def _auto_pick(run: str) -> int:
    picks = pd.read_csv(f"{run}/selection.auto.csv").query("selector == 'auto'")
    [layer] = picks["chosen_layer"].unique().tolist()
    return int(layer)


def test_auto_computes_the_missing_curves_where_a_reference_loads(tiny_folder, tmp_path, capsys, monkeypatch):
    monkeypatch.delenv("LAYER_MTEB_DATA", raising=False)
    run = _run(tmp_path / "run", tiny_folder)
    argv = ["select", "--run", run, "--by", "auto", "--sample", "40", "--model", str(tiny_folder)]
    assert main([*argv, "--agreement-with", "minilm-l6"]) == 0
    out = capsys.readouterr().out.splitlines()
    said = [line for line in out if line.startswith("auto:")]
    assert said[0].startswith(f"auto: {MODEL} is a base language model and its run has no agreement curves for 1 task")
    assert "encoding up to 40 texts of each with the model's every layer and with minilm-l6 (roughly" in said[0]
    assert "the layer of most agreement with sentence-transformers/all-MiniLM-L6-v2" in said[1]
    curve = curves(RunFolder(run).read(AGREEMENT_TABLE), metric="mknn", outlier="none", n=40, k=10, seed=0)["STS17"]
    assert _auto_pick(run) == int(curve[curve >= curve.max() - 1e-9].index.max())  # ties deeper, as agreement
    stored = (tmp_path / "run" / AGREEMENT_FILE).read_text()
    assert main([*argv, "--agreement-with", "minilm-l6"]) == 0  # the curves are read back, not computed again
    assert "encoding" not in capsys.readouterr().out
    assert (tmp_path / "run" / AGREEMENT_FILE).read_text() == stored


def test_auto_falls_back_to_the_depth_rule_in_one_line_where_no_reference_loads(tiny_folder, tmp_path, capsys):
    quiet = _run(tmp_path / "quiet", tiny_folder)
    argv = ["--by", "auto", "--sample", "40", "--model", str(tiny_folder)]
    assert main(["select", "--run", quiet, *argv, "--no-reference"]) == 0
    depth_rule = _auto_pick(quiet)
    assert not any(line.startswith("auto: ") for line in capsys.readouterr().out.splitlines())
    run = _run(tmp_path / "run", tiny_folder)
    missing = str(tmp_path / "no-such-encoder")
    assert main(["select", "--run", run, *argv, "--agreement-with", missing]) == 0
    out = capsys.readouterr().out
    [line] = [line for line in out.splitlines() if line.startswith("auto: ")]
    assert line.startswith(f"auto: {MODEL} gets the depth rule for base models instead of agreement: --agreement-with")
    assert "is neither a packaged model" in line
    assert not (tmp_path / "run" / AGREEMENT_FILE).exists()
    assert _auto_pick(run) == depth_rule
    lexical = _run(tmp_path / "lexical", tiny_folder)  # auto never reaches for a lexical reference
    assert main(["select", "--run", lexical, *argv, "--agreement-with", "bm25"]) == 0
    assert "bm25 is a lexical reference, which auto does not use" in capsys.readouterr().out
    assert _auto_pick(lexical) == depth_rule


def test_export_by_auto_computes_the_curves_too(tiny_folder, tmp_path, capsys):
    run = _run(tmp_path / "run", tiny_folder)
    argv = ["export", "--run", run, "--by", "auto", "--model", str(tiny_folder), "--agreement-with", "minilm-l6"]
    assert main([*argv, "--output", str(tmp_path / "out")]) == 0
    assert "its run has no agreement curves for 1 task" in capsys.readouterr().out
    assert (tmp_path / "run" / AGREEMENT_FILE).is_file()
