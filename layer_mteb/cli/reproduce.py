"""``layer-mteb reproduce``: the paper's tables and figures from the authors' release beside this project's runs
(written outside any run folder)."""

from __future__ import annotations

import argparse
from dataclasses import dataclass
from pathlib import Path

from layer_mteb.cli.console import REWRITE
from layer_mteb.cli.options import check_runs
from layer_mteb.common.errors import UserError

NAME = "reproduce"
HELP = "the paper's tables and figures from the authors' release beside our runs"
INTERRUPTED = REWRITE


def add_options(paper: argparse.ArgumentParser) -> None:
    paper.add_argument(
        "--release",
        help="a clone of the authors' repository (OFSkean/information_flow), or its experiments/results folder "
        "(default: $LAYER_MTEB_RELEASE/release, else ../shared/reference/release)",
    )
    paper.add_argument(
        "--run",
        action="append",
        default=[],
        help="one of this project's run folders, set beside the release in every table and figure (repeatable; at "
        "least one)",
    )
    paper.add_argument("--output", default="results/paper", help="folder the paper's files are written to")
    paper.add_argument(
        "--permutations", type=int, default=200, help="shuffles per correlation p-value (200: minutes on 2 cores)"
    )


@dataclass(frozen=True)
class Settings:
    """``source``: the release's results folder."""

    source: Path
    runs: tuple[Path, ...]
    output: Path
    permutations: int


def check(args: argparse.Namespace) -> Settings:
    """At least one ``--run``; ``--release`` (a clone of the authors' repository) must hold their results."""
    from layer_mteb.analysis.runs.release_layout import release_folder, results_folder

    if not args.run:
        raise UserError(
            "give at least one of this project's run folders with --run RUN (repeatable): the paper's tables and "
            "figures set the release beside them (`make reproduce` passes the committed results/<run> folders)"
        )
    source = Path(results_folder(args.release or release_folder() / "release"))
    check_runs(args.run, args.output)
    return Settings(source, tuple(Path(r) for r in args.run), Path(args.output), args.permutations)


def execute(settings: Settings) -> None:
    from layer_mteb.paper.regenerate import reproduce

    reproduce(settings.source, list(settings.runs), settings.output, settings.permutations)
