"""``layer-mteb label-budget``: the mean regret of a layer picked from K labelled examples against K, beside the
label-free picks (the curve lives outside a run folder)."""

from __future__ import annotations

import argparse
import time
from dataclasses import dataclass
from pathlib import Path

from layer_mteb.cli.console import TASKS_SAVED, print_written
from layer_mteb.cli.options import DATA_DEFAULT, as_keywords, check_runs, settings_of
from layer_mteb.common.config import option
from layer_mteb.evaluation.workers import check_eval_workers

NAME = "label-budget"
HELP = "mean regret of a layer picked from K labelled examples against K, beside the label-free picks"
INTERRUPTED = TASKS_SAVED


@dataclass(frozen=True, kw_only=True)
class Settings:
    run: list[str] = option("a run folder (repeat for several models)", required=True)
    output: Path = option("folder for the curve, baselines and figure", Path("results/paper"))
    draws: int = option("draws of K examples per task and K", 10)
    seed: int = option("seed of the draws", 0)
    data_dir: str | None = option(f"folder of local task data {DATA_DEFAULT}")
    eval_workers: int | None = option("processes scoring layers (default: one per CPU core)")
    baselines_only: bool = option(
        "re-read only the label-free baselines (e.g. after adding metrics); keep the measured curve", False
    )


def check(args: argparse.Namespace) -> Settings:
    check_runs(args.run, args.output)
    check_eval_workers(args.eval_workers)
    return settings_of(Settings, args)


def execute(settings: Settings) -> None:
    from layer_mteb.analysis.labels.curve import write_curve

    started = time.time()
    needed = write_curve(**as_keywords(settings, run="folders", eval_workers="workers"))
    print(needed.to_string(index=False))
    print_written(settings.output, started)
