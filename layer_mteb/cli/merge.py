"""``layer-mteb merge``: the shard tables of a run folder joined into its ``scores.csv``."""

from __future__ import annotations

import argparse
from dataclasses import dataclass
from pathlib import Path

from layer_mteb.cli.console import RESUME

NAME = "merge"
HELP = "join the shard tables of a run folder into its scores.csv"
INTERRUPTED = RESUME


def add_options(merge: argparse.ArgumentParser) -> None:
    merge.add_argument("--output", required=True, help="the run folder the shards wrote to")


@dataclass(frozen=True)
class Settings:
    output: Path


def check(args: argparse.Namespace) -> Settings:
    """Nothing to check up front: the merge says which shard tables are missing."""
    return Settings(Path(args.output))


def execute(settings: Settings) -> None:
    from layer_mteb.evaluation.plan import merge_shards

    frame = merge_shards(settings.output)
    print(f"merged {len(frame)} rows into {settings.output / 'scores.csv'}")
