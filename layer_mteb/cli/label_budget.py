"""``layer-mteb label-budget``: the mean regret of a layer picked from K labelled examples against K, beside the
label-free picks (the curve lives outside a run folder)."""

from __future__ import annotations

import argparse
import time
from dataclasses import dataclass
from pathlib import Path

from layer_mteb.cli.console import TASKS_SAVED, print_written
from layer_mteb.cli.options import DATA_DEFAULT, as_keywords, check_runs, settings_of
from layer_mteb.evaluation.workers import check_eval_workers

NAME = "label-budget"
HELP = "mean regret of a layer picked from K labelled examples against K, beside the label-free picks"
INTERRUPTED = TASKS_SAVED


def add_options(budget: argparse.ArgumentParser) -> None:
    budget.add_argument("--run", action="append", required=True, help="a run folder (repeat for several models)")
    budget.add_argument("--output", default="results/paper", help="folder for the curve, baselines and figure")
    budget.add_argument("--draws", type=int, default=10, help="draws of K examples per task and K")
    budget.add_argument("--seed", type=int, default=0, help="seed of the draws")
    budget.add_argument("--data-dir", help=f"folder of local task data {DATA_DEFAULT}")
    budget.add_argument("--eval-workers", type=int, help="processes scoring layers (default: one per CPU core)")
    budget.add_argument(
        "--baselines-only",
        action="store_true",
        help="re-read only the label-free baselines (e.g. after adding metrics); keep the measured curve",
    )


@dataclass(frozen=True)
class Settings:
    run: list[str]
    output: Path
    draws: int
    seed: int
    data_dir: str | None
    eval_workers: int | None
    baselines_only: bool


def check(args: argparse.Namespace) -> Settings:
    check_runs(args.run, args.output)
    check_eval_workers(args.eval_workers)
    return settings_of(Settings, args, output=Path(args.output))


def execute(settings: Settings) -> None:
    from layer_mteb.analysis.labels.curve import write_curve

    started = time.time()
    needed = write_curve(**as_keywords(settings, run="folders", eval_workers="workers"))
    print(needed.to_string(index=False))
    print_written(settings.output, started)
