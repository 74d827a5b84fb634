"""``layer-mteb correlate``: each metric against the score across layers (dCor, Spearman, Kendall)."""

from __future__ import annotations

import argparse
from dataclasses import dataclass
from pathlib import Path

from layer_mteb.cli.console import NOTHING_SAVED
from layer_mteb.cli.options import ReadoutChoice, as_keywords, check_runs, settings_of
from layer_mteb.common.config import option

NAME = "correlate"
HELP = "correlate each metric with the score across layers"
INTERRUPTED = NOTHING_SAVED


@dataclass(frozen=True, kw_only=True)
class Settings(ReadoutChoice):
    run: str = option("run folder holding scores.csv and metrics.csv", required=True)
    method: str = option("association measure", "all", choices=["dcor", "spearman", "kendall", "all"])
    permutations: int = option("shuffles for the p-values", 1000)
    seed: int = option("seed of the shuffles", 0)


def check(args: argparse.Namespace) -> Settings:
    check_runs([args.run])
    return settings_of(Settings, args)


def execute(settings: Settings) -> None:
    from layer_mteb.analysis.selection.correlation import correlate, correlation_table
    from layer_mteb.cli.console import arithmetics_of

    frame = correlate(**as_keywords(settings, permutations="n_permutations"))
    arithmetics = arithmetics_of(frame)
    by = f" ({' and '.join(arithmetics)} arithmetic)" if arithmetics else ""
    print(f"across layers, metric vs score averaged over tasks{by}:")
    print(correlation_table(frame).round(4).to_string())
    print(f"\ncorrelation (also per task): {Path(settings.run) / 'correlation.csv'}")
