"""``layer-mteb``: parse the arguments (:mod:`.parser`), check them before anything heavy loads (:mod:`.checks`),
set up logging once, run the command (:mod:`.commands`) and turn every user mistake into one line and exit 2
(:mod:`.console`)."""

from __future__ import annotations

import sys

from layer_mteb.cli.checks import check_arguments
from layer_mteb.cli.console import RESUME, run_reporting_errors, setup_logging
from layer_mteb.cli.parser import build_parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    checked = run_reporting_errors(lambda: check_arguments(args))  # one line, before any import, probe or log
    if checked:
        return checked
    setup_logging(verbose=getattr(args, "verbose", False))
    return run_reporting_errors(lambda: args.handler(args), getattr(args, "interrupted", RESUME))


if __name__ == "__main__":
    sys.exit(main())
