"""Joining the shard tables of a run (a SLURM array, or the processes of ``accelerate launch``) into one table."""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path

import pandas as pd

from layer_mteb.common.errors import UserError
from layer_mteb.common.run_folder import SCORES_FILE, RunFolder, sharded


def merge_shards(output: str | Path) -> pd.DataFrame:
    """Join the shard tables of a run folder into its ``scores.csv`` (after a SLURM array, say)."""
    output = Path(output)
    folder = RunFolder(output)
    files = folder.shard_score_files()
    if not files:
        raise UserError(f"no shard tables (scores.shard-I-of-N.csv) in {output}")
    counts = {int(f.name.split("-of-")[1].split(".")[0]) for f in files}
    if len(counts) != 1:
        raise UserError(f"{output} mixes shard tables of different runs ({sorted(counts)} shards)")
    n = counts.pop()
    missing = [i for i in range(n) if not (output / sharded(SCORES_FILE, (i, n))).exists()]
    if missing:
        raise UserError(f"shard(s) {missing} of {n} have not finished in {output}; rerun them, then merge")
    tables = [RunFolder(output, (i, n)).scores(missing_ok=True) for i in range(n)]
    shards = pd.concat(tables, ignore_index=True).to_dict("records")
    return folder.update_scores(folder.scores(missing_ok=True), shards)  # rows of earlier runs in the folder stay


def merge_when_all_done(output: Path, shard: tuple[int, int]) -> pd.DataFrame:
    """Wait for every process (gloo works for CPU and GPU runs), merge on rank 0, hand everyone the merged table."""
    import torch.distributed as dist

    if not dist.is_initialized():
        dist.init_process_group("gloo", timeout=timedelta(days=7))  # shards of a long sweep finish hours apart
    dist.barrier()
    if shard[0] == 0:
        merge_shards(output)
    dist.barrier()
    return RunFolder(output).scores(missing_ok=True)
