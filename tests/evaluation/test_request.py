"""A run's one settings object: `run`'s options are RunRequest's fields under the same names (or the encode
settings'), the command line and the Python API make the same object, and its output folder is checked once."""

from __future__ import annotations

from dataclasses import fields
from pathlib import Path

import pytest
from conftest import save_tiny_model

import layer_mteb.evaluation.request as request_module
from layer_mteb.cli import main
from layer_mteb.cli.main import build_parser
from layer_mteb.cli.run import check
from layer_mteb.common.config import AUTO, EncodeConfig
from layer_mteb.common.errors import UserError
from layer_mteb.evaluation.request import RunRequest

#: what only Python gives: the progress bars (the command line always shows them) and the encode settings as one object
PYTHON_ONLY = {"progress", "config"}


def test_every_run_option_is_a_field_of_the_request_or_of_its_encode_settings():
    run = build_parser("run")._subparsers._group_actions[0].choices["run"]
    options = {action.dest for action in run._actions if action.dest != "help"}
    request = {f.name for f in fields(RunRequest) if f.init}
    encode = {f.name for f in fields(EncodeConfig)}
    assert options - request - encode == set()
    assert request - PYTHON_ONLY - options == set()
    assert options & request & encode == set()  # no option lands in both


def test_the_command_line_and_the_python_api_make_the_same_request(demo_data_dir, tmp_path):
    a, b = (str(tmp_path / name) for name in ("a", "b"))  # model folders: nothing loads while the request is made
    for folder in (a, b):
        Path(folder).mkdir()
    argv = ["run", "--model", a, "--model", b, "--tasks", "STS17", "--data-dir"]
    argv += [str(demo_data_dir), "--output", str(tmp_path / "out"), "--revision", "a,b", "--shard", "1/2"]
    argv += ["--no-vector-cache", "--pooling", "last", "--max-cache-memory", "1GB", "-v"]
    from_cli = check(build_parser("run").parse_args(argv))
    config = EncodeConfig(pooling="last", max_cache_memory=10**9, device=AUTO)
    from_python = RunRequest(
        [a, b],
        "STS17",
        data_dir=demo_data_dir,
        output=tmp_path / "out",
        revision=["a", "b"],
        shard=(1, 2),
        vector_cache=False,
        config=config,
        verbose=True,
    )
    assert from_cli == from_python
    assert from_cli.models == (a, b) and from_cli.revision == ("a", "b")
    assert from_cli.shard == (1, 2) and from_cli.split == "test" and [s.name for s in from_cli.tasks] == ["STS17"]


def test_the_output_folder_is_checked_once_per_run(bert_tokenizer, demo_data_dir, tmp_path, monkeypatch):
    model = save_tiny_model("gpt2", bert_tokenizer, tmp_path / "tiny-gpt2")
    checked = []
    original = request_module.check_output

    def counted(*args, **kwargs):
        checked.append(args[0])
        return original(*args, **kwargs)

    for module in ("layer_mteb.evaluation.request", "layer_mteb.cli.run", "layer_mteb.evaluation.sweep"):
        monkeypatch.setattr(f"{module}.check_output", counted, raising=False)
    out = tmp_path / "run"
    argv = ["run", "--model", str(model), "--tasks", "STS17", "--data-dir", str(demo_data_dir), "--layers", "-1"]
    assert main([*argv, "--output", str(out), "--no-vector-cache"]) == 0
    assert checked == [out]
    with pytest.raises(UserError, match="must be I/N"):
        RunRequest(str(model), "STS17", data_dir=demo_data_dir, shard="2/2")
