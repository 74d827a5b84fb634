"""``layer-mteb reproduce``: the paper's tables and figures from the authors' release beside this project's runs
(written outside any run folder)."""

from __future__ import annotations

import argparse
from dataclasses import dataclass
from pathlib import Path

from layer_mteb.cli.console import REWRITE
from layer_mteb.cli.options import check_runs, settings_of
from layer_mteb.common.config import option
from layer_mteb.common.errors import UserError

NAME = "reproduce"
HELP = "the paper's tables and figures from the authors' release beside our runs"
INTERRUPTED = REWRITE


@dataclass(frozen=True, kw_only=True)
class Settings:
    """``source``: the results folder of the release ``--release`` names."""

    release: str | None = option(
        "a clone of the authors' repository (OFSkean/information_flow), or its experiments/results folder "
        "(default: $LAYER_MTEB_RELEASE/release, else ../shared/reference/release)"
    )
    run: list[str] | None = option(
        "one of this project's run folders, set beside the release in every table and figure (repeatable; at least one)"
    )
    output: Path = option("folder the paper's files are written to", Path("results/paper"))
    permutations: int = option("shuffles per correlation p-value (200: minutes on 2 cores)", 200)
    source: Path  # found by check from --release


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
    return settings_of(Settings, args, source=source)


def execute(settings: Settings) -> None:
    from layer_mteb.paper.regenerate import reproduce

    reproduce(settings.source, [Path(run) for run in settings.run or []], settings.output, settings.permutations)
