"""An option is declared once: a command's settings dataclass holds each of its options as a field whose default and
help the parser takes (``option`` / ``add_fields``), so ``check`` hands ``execute`` the values argparse read and
``--help`` says what the field says."""

from __future__ import annotations

import argparse
from dataclasses import dataclass, fields
from pathlib import Path
from typing import Literal

import pytest

from layer_mteb.cli.main import COMMANDS, build_parser
from layer_mteb.cli.options import add_fields
from layer_mteb.common.config import option
from layer_mteb.metrics.cost_table import CostSettings


@dataclass(frozen=True, kw_only=True)
class _Group:
    shared: int = option("an option of every command taking the group", 7)


@dataclass(frozen=True, kw_only=True)
class _Settings(_Group):
    source: str = option("a positional argument", flags=("source",))
    size: int | None = option("a number, unset by default")
    scale: float = option("a float with a default", 0.5)
    kind: Literal["a", "b"] = option("one of a Literal's values", "a")
    flag: bool = option("off unless given", False)
    tristate: bool | None = option("on, off or unset")
    runs: list[str] | None = option("repeatable")
    folder: Path = option("a path", Path("out"))
    k: int = option("named otherwise", 3, flags=("--neighbours",))
    derived: str = "not an option"


def _parse(*argv: str) -> argparse.Namespace:
    parser = argparse.ArgumentParser()
    add_fields(parser, _Settings)
    return parser.parse_args(list(argv))


def test_fields_become_options_with_their_defaults():
    args = _parse("src")
    assert vars(args) == {
        "source": "src",
        "size": None,
        "scale": 0.5,
        "kind": "a",
        "flag": False,
        "tristate": None,
        "runs": None,
        "folder": Path("out"),
        "k": 3,
        "shared": 7,
    }


def test_fields_read_their_types():
    args = _parse(
        "src", "--size", "4", "--scale", "2", "--kind", "b", "--flag", "--no-tristate", "--runs", "x", "--runs", "y"
    )
    assert (args.size, args.scale, args.kind, args.flag, args.tristate, args.runs) == (
        4,
        2.0,
        "b",
        True,
        False,
        ["x", "y"],
    )
    assert _parse("src", "--folder", "f", "--neighbours", "5", "--shared", "1").folder == Path("f")
    assert _parse("src", "--neighbours", "5").k == 5
    with pytest.raises(SystemExit):
        _parse("src", "--kind", "c")  # not one of the Literal's values


def test_own_fields_come_before_the_groups():
    parser = argparse.ArgumentParser()
    add_fields(parser, _Settings)
    flags = [action.option_strings[0] if action.option_strings else action.dest for action in parser._actions[1:]]
    assert flags[0] == "source" and flags[-1] == "--shared"


@pytest.mark.parametrize(
    "command", ["merge", "report", "select", "correlate", "import", "label-budget", "reproduce", "export", "cost"]
)
def test_each_option_is_its_settings_field(command):
    """Every field of a command's settings declared as an option is one, with the field's default."""
    module = next(m for m in COMMANDS if command == m.NAME)
    parser = build_parser(command)
    [sub] = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
    actions = {action.dest: action for action in sub.choices[command]._actions}
    settings = [module.Settings, *([CostSettings] if command == "cost" else [])]  # cost's measurement: its own
    declared = [f for cls in settings for f in fields(cls) if "help" in f.metadata]
    assert declared
    for field in declared:
        assert actions[field.name].default == field.default, field.name
        assert actions[field.name].help.startswith(field.metadata["help"][:40]), field.name
