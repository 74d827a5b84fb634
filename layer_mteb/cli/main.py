"""``layer-mteb``: the parser built from the command modules; each command's options are checked before anything
heavy loads, then it is executed, every user mistake one line and exit 2 (:mod:`.console`).

A command is one module: ``NAME``, ``HELP``, ``Settings`` (its options, as fields: :func:`.options.add_fields`),
``check(args)`` (its settings; every mistake the options and files show, before transformers, mteb or the hub probe),
``execute(settings)`` and ``INTERRUPTED`` (what Ctrl-C leaves behind); ``add_options(parser)`` where its options are
more than its ``Settings`` fields (shared groups, the encode options), and no ``check`` where nothing is checked up
front."""

from __future__ import annotations

import argparse
import logging
import sys
from typing import Any

from layer_mteb.cli import (
    correlate,
    cost,
    export,
    import_,
    label_budget,
    merge,
    metrics,
    report,
    reproduce,
    run,
    select,
    stress,
)
from layer_mteb.cli.console import PROG, package_logging, run_reporting_errors, setup_logging
from layer_mteb.cli.options import add_fields, settings_of

#: the commands, in the order ``--help`` lists them
COMMANDS = (run, merge, report, metrics, stress, select, correlate, import_, label_budget, reproduce, export, cost)
_BY_NAME = {command.NAME: command for command in COMMANDS}
#: the commands whose first slow step, once checked, is importing torch, transformers and mteb (half a minute on a
#: busy 2-core machine, the first start longer): they say so first, so a terminal is never silent for it
_IMPORTS_FIRST = (run.NAME, metrics.NAME, stress.NAME)


class _DefaultsShown(argparse.HelpFormatter):
    """Every option's help ends with its default, unless it names one already or has none (required, on/off)."""

    def _get_help_string(self, action: argparse.Action) -> str:
        text = action.help or ""
        if "default" in text or action.default in (None, argparse.SUPPRESS) or not action.option_strings:
            return text
        return f"{text} (default: {'off' if action.default is False else '%(default)s'})"


class _Parser(argparse.ArgumentParser):
    """argparse, but a usage mistake is one line (and exit 2) like every other user error."""

    def error(self, message: str):
        self.exit(2, f"{PROG}: error: {message} (see {self.prog} --help)\n")


def build_parser(only: str | None = None) -> argparse.ArgumentParser:
    """Every command with its options; ``only`` declares only that command's (the others are listed, parse nothing)."""
    parser = _Parser(prog=PROG, description="Score every layer of a model on MTEB tasks.")
    commands = parser.add_subparsers(dest="command", required=True, parser_class=_Parser)
    for command in COMMANDS:
        declared = commands.add_parser(command.NAME, help=command.HELP, formatter_class=_DefaultsShown)
        if only in (None, command.NAME):
            if hasattr(command, "add_options"):
                command.add_options(declared)
            else:  # its options are its Settings' fields
                add_fields(declared, command.Settings)
    return parser


def check(args: argparse.Namespace) -> Any:
    """The settings of ``args.command``, checked: what its ``execute`` takes (a command with nothing to check up
    front: its ``Settings`` as the options give them)."""
    command = _BY_NAME[args.command]
    return command.check(args) if hasattr(command, "check") else settings_of(command.Settings, args)


def main(argv: list[str] | None = None) -> int:
    words = sys.argv[1:] if argv is None else argv
    named = next((word for word in words if not word.startswith("-")), None)  # the command, argparse's first word
    args = build_parser(named if named in _BY_NAME else None).parse_args(words)
    command = _BY_NAME[args.command]
    checked: list[Any] = []
    package_logging()  # a check's own INFO line (the hub probe's) is shown; nothing heavy is imported for it
    failed = run_reporting_errors(lambda: checked.append(check(args)))  # one line, before any heavy import
    if failed:
        return failed
    [settings] = checked
    if command.NAME in _IMPORTS_FIRST:
        logging.getLogger("layer_mteb.cli").info("loading torch, transformers and mteb")
    setup_logging(verbose=getattr(settings, "verbose", False))
    interrupted = getattr(settings, "interrupted", command.INTERRUPTED)
    return run_reporting_errors(lambda: command.execute(settings), interrupted)


if __name__ == "__main__":
    sys.exit(main())
