"""``layer-mteb report``: Table 1, Figure 1, heatmaps and the selector leaderboard from run folders."""

from __future__ import annotations

import argparse
from dataclasses import dataclass
from pathlib import Path

from layer_mteb.cli.console import RESUME
from layer_mteb.cli.options import RUNS, as_keywords, check_runs, settings_of

NAME = "report"
HELP = "Table 1, Figure 1, heatmaps and selector leaderboard from run folders"
INTERRUPTED = RESUME


def add_options(report: argparse.ArgumentParser) -> None:
    report.add_argument("--run", action="append", required=True, help="a run folder with scores.csv (repeatable)")
    report.add_argument("--output", default=str(Path(RUNS) / "report"), help="report folder (runs/report)")
    report.add_argument(
        "--random-run",
        action="append",
        default=[],
        help="a run of a randomly initialised model (repeatable): in the tables and heatmaps, not in Figure 1",
    )
    report.add_argument("--paper-curves", action="store_true", help="overlay the authors' Pythia curves on Figure 1")
    report.add_argument(
        "--pythia-scores",
        help="the authors' per-layer Pythia scores, or the folder of their release holding them (default: "
        "official_pythia_layer_scores.csv in $LAYER_MTEB_RELEASE, else in ../shared/reference)",
    )
    report.add_argument(
        "--paper-tasks",
        choices=("run", "all"),
        default="run",
        help="average the paper curves over the tasks the runs scored (run) or all 32 paper tasks (all)",
    )
    report.add_argument(
        "--entropy-selector", help="selection.csv selector for Table 1's entropy columns (default: prompt entropy)"
    )


@dataclass(frozen=True)
class Settings:
    run: list[str]
    output: str
    random_run: list[str]
    paper_curves: bool
    pythia_scores: str | None
    paper_tasks: str
    entropy_selector: str | None


def check(args: argparse.Namespace) -> Settings:
    check_runs([*args.run, *args.random_run], args.output)
    return settings_of(Settings, args)


def execute(settings: Settings) -> None:
    from layer_mteb.analysis.report.build import write_report
    from layer_mteb.cli.console import print_report

    paths = write_report(**as_keywords(settings, run="runs", random_run="random_runs"))
    print_report(Path(settings.output), paths)
