"""``layer-mteb correlate``: each metric against the score across layers (dCor, Spearman, Kendall)."""

from __future__ import annotations

import argparse
from dataclasses import dataclass
from pathlib import Path

from layer_mteb.cli.console import NOTHING_SAVED
from layer_mteb.cli.options import add_metric_readout, as_keywords, check_runs, settings_of

NAME = "correlate"
HELP = "correlate each metric with the score across layers"
INTERRUPTED = NOTHING_SAVED


def add_options(correlate: argparse.ArgumentParser) -> None:
    correlate.add_argument("--run", required=True, help="run folder holding scores.csv and metrics.csv")
    correlate.add_argument(
        "--method", choices=["dcor", "spearman", "kendall", "all"], default="all", help="association measure"
    )
    correlate.add_argument("--permutations", type=int, default=1000, help="shuffles for the p-values")
    correlate.add_argument("--seed", type=int, default=0, help="seed of the shuffles")
    add_metric_readout(correlate)


@dataclass(frozen=True)
class Settings:
    run: str
    method: str
    permutations: int
    seed: int
    metric_readout: str
    arithmetic: str | None


def check(args: argparse.Namespace) -> Settings:
    check_runs([args.run])
    return settings_of(Settings, args)


def execute(settings: Settings) -> None:
    from layer_mteb.analysis.selection.correlation import correlate, correlation_table
    from layer_mteb.cli.console import arithmetics_of, print_correlation

    frame = correlate(**as_keywords(settings, permutations="n_permutations"))
    print_correlation(correlation_table(frame), Path(settings.run), arithmetics_of(frame))
