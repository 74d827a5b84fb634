"""``layer-mteb report``: Table 1, Figure 1, heatmaps and the selector leaderboard from run folders."""

from __future__ import annotations

import argparse
from dataclasses import dataclass
from pathlib import Path

from layer_mteb.cli.console import RESUME
from layer_mteb.cli.options import RUNS, as_keywords, check_runs, settings_of
from layer_mteb.common.config import option

NAME = "report"
HELP = "Table 1, Figure 1, heatmaps and selector leaderboard from run folders"
INTERRUPTED = RESUME


@dataclass(frozen=True, kw_only=True)
class Settings:
    run: list[str] = option("a run folder with scores.csv (repeatable)", required=True)
    output: Path = option("report folder (runs/report)", Path(RUNS) / "report")
    random_run: list[str] | None = option(
        "a run of a randomly initialised model (repeatable): in the tables and heatmaps, not in Figure 1 "
        "(default: none)"
    )
    paper_curves: bool = option("overlay the authors' Pythia curves on Figure 1", False)
    pythia_scores: str | None = option(
        "the authors' per-layer Pythia scores, or the folder of their release holding them (default: "
        "official_pythia_layer_scores.csv in $LAYER_MTEB_RELEASE, else in ../shared/reference)"
    )
    paper_tasks: str = option(
        "average the paper curves over the tasks the runs scored (run) or all 32 paper tasks (all)",
        "run",
        choices=("run", "all"),
    )
    entropy_selector: str | None = option(
        "selection.csv selector for Table 1's entropy columns (default: prompt entropy)"
    )


def check(args: argparse.Namespace) -> Settings:
    random_runs = args.random_run or []  # none given: argparse leaves the repeated option None
    check_runs([*args.run, *random_runs], args.output)
    return settings_of(Settings, args, random_run=random_runs)


def execute(settings: Settings) -> None:
    from layer_mteb.analysis.report.build import write_report

    paths = write_report(**as_keywords(settings, run="runs", random_run="random_runs"))
    print((settings.output / "table1.md").read_text())
    print(f"report: {settings.output}  ·  {len(paths)} files: {', '.join(p.name for p in paths)}")
