"""``layer-mteb merge``: the shard tables of a run folder joined into its ``scores.csv``."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from layer_mteb.cli.console import RESUME
from layer_mteb.common.config import option

NAME = "merge"
HELP = "join the shard tables of a run folder into its scores.csv"
INTERRUPTED = RESUME


@dataclass(frozen=True, kw_only=True)
class Settings:
    """Nothing to check up front (no ``check``): the merge says which shard tables are missing."""

    output: Path = option("the run folder the shards wrote to", required=True)


def execute(settings: Settings) -> None:
    from layer_mteb.evaluation.plan import merge_shards

    frame = merge_shards(settings.output)
    print(f"merged {len(frame)} rows into {settings.output / 'scores.csv'}")
