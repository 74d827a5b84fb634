"""Every command with its defaults, as a newcomer runs it first: on a clone with nothing beside or above it (no data
folder, no authors' release, no variable naming either) and no hub, given only the options ``--help`` says it
requires. Each either works or says why in one line, and none ends in a traceback."""

from __future__ import annotations

import argparse
import shutil
from pathlib import Path

import pytest
from _fresh_process import fresh_mains

import layer_mteb
from layer_mteb.cli.main import build_parser

#: the value given to each required option: a packaged model, else a name of nothing in the empty working folder
VALUES = {"--model": "minilm-l6"}


def required_argvs() -> dict[str, list[str]]:
    """Each command ``layer-mteb --help`` lists, with only its required options and arguments."""
    parser = build_parser()
    [commands] = [action for action in parser._actions if isinstance(action, argparse._SubParsersAction)]
    argvs = {}
    for name, command in commands.choices.items():
        argv = [name]
        for action in command._actions:
            if action.required:
                named = action.option_strings[0] if action.option_strings else None
                value = VALUES.get(named, f"no-{action.dest}")
                argv += [named, value] if named else [value]
        argvs[name] = argv
    return argvs


ARGVS = required_argvs()


@pytest.fixture(scope="module")
def bare_runs(tmp_path_factory, monkeypatch_module) -> dict[str, tuple[object, list[str]]]:
    """Exit code and stderr lines of every command, all in one new interpreter importing a copy of the package that
    has nothing beside or above it, run in an empty folder."""
    root = tmp_path_factory.mktemp("bare")
    checkout, work = root / "checkout", root / "work"
    ignore = shutil.ignore_patterns("__pycache__")
    shutil.copytree(Path(layer_mteb.__file__).parent, checkout / "layer_mteb", ignore=ignore)
    work.mkdir()
    assert not [folder for folder in [root, *root.parents] if (folder / "shared").exists()]
    for variable in ("LAYER_MTEB_DATA", "LAYER_MTEB_RELEASE", "LAYER_MTEB_REFERENCE", "CI"):
        monkeypatch_module.delenv(variable, raising=False)
    monkeypatch_module.setenv("PYTHONPATH", str(checkout))
    results = fresh_mains([(argv, work) for argv in ARGVS.values()])
    assert list(work.iterdir()) == []  # nothing half-written
    return {name: (code, err) for name, (code, err, _) in zip(ARGVS, results, strict=True)}


@pytest.fixture(scope="module")
def monkeypatch_module():
    with pytest.MonkeyPatch.context() as patch:
        yield patch


def test_every_command_of_the_help_is_run():
    assert set(ARGVS) >= {"run", "reproduce", "report", "metrics"}
    assert ARGVS["reproduce"] == ["reproduce"] and ARGVS["run"] == ["run", "--model", "minilm-l6"]


@pytest.mark.parametrize("command", list(ARGVS))
def test_a_command_with_its_defaults_on_a_bare_clone_says_why_it_cannot_run_in_one_line(command, bare_runs):
    code, err = bare_runs[command]
    assert code == 2, (ARGVS[command], code, err)
    assert err and err[-1].startswith("layer-mteb: error:"), (ARGVS[command], err)
    # before it at most the package's own notes (`run` says the hub cannot be reached), never a traceback
    assert all(line.startswith(("INFO layer_mteb", "WARNING layer_mteb")) for line in err[:-1]), err
    assert not [line for line in err if "Traceback" in line]
