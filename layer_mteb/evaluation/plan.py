"""Planning a sweep before any model loads (layers, (task, data) units, shards), and joining the shards' tables.

Everything here is cheap and fails early: pandas and torch load only when shard tables are joined.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Sequence
from datetime import timedelta
from pathlib import Path
from typing import TYPE_CHECKING, Any

from layer_mteb.common.errors import UserError
from layer_mteb.common.files import content_hash, text_hash, topmost_missing
from layer_mteb.common.hub import hub_offline
from layer_mteb.common.run_folder import SCORES_FILE, RunFolder, sharded
from layer_mteb.model.depth import known_depth
from layer_mteb.tasks.catalog import TaskSpec, load_task, task_data, unavailable_message

if TYPE_CHECKING:
    import pandas as pd

logger = logging.getLogger(__name__)


def parse_layers(layers: str | Sequence[int], n_layers: int, model: str = "this model") -> list[int]:
    """``all`` | ``0,3,-1`` | ``0:12`` | ``0:25:2`` (Python slice, end exclusive) -> sorted hidden-state indices
    (``model``: how a layer out of range names the model)."""
    if isinstance(layers, str):
        text = layers.strip()
        if text == "all":
            return list(range(n_layers + 1))
        try:
            if ":" in text:
                picked = list(range(n_layers + 1))[slice(*(int(p) if p else None for p in text.split(":")))]
            else:
                picked = [int(p) for p in text.split(",") if p.strip()]
        except ValueError:
            raise UserError(f"--layers {layers!r} is not 'all', a list like 0,3,-1 or a slice like 0:12") from None
        if ":" in text and not picked:
            raise UserError(f"--layers {layers!r} selects no layer of 0..{n_layers}")
        layers = picked
    if not layers:
        raise UserError("--layers is empty")
    return sorted({resolve_layer(int(layer), n_layers, model) for layer in layers})


#: deeper than any model: ``--layers`` parsed against it is checked for form alone, before the model is known
_ANY_DEPTH = 10**6


def check_layers(layers: str) -> None:
    """``--layers`` is well formed (whether its layers exist is known once the model is)."""
    parse_layers(layers, _ANY_DEPTH)


def check_model_layers(layers: str | Sequence[int], model: str) -> None:
    """``--layers`` against ``model``'s depth where it is known without loading the weights (a packaged model, a
    folder's config.json, a GGUF header: :func:`~layer_mteb.model.depth.known_depth`), so a layer it lacks is one line
    in a fraction of a second instead of after the model loads; otherwise the sweep checks it once loaded."""
    depth = known_depth(model)
    if depth is not None:
        parse_layers(layers, depth, model)


def resolve_layer(layer: int, n_layers: int, model: str = "this model") -> int:
    """Map a possibly negative hidden-state index to 0..n_layers, or explain the valid range."""
    if not -(n_layers + 1) <= layer <= n_layers:
        valid = f"0..{n_layers} (or -{n_layers + 1}..-1)"
        raise UserError(f"layer {layer} is out of range: {model} has hidden states {valid}")
    return layer % (n_layers + 1)


def task_units(
    tasks: Sequence[Any], split: str, data_dir: Path | None, *, skip_unavailable: bool = False
) -> list[tuple[object, str, str]]:
    """Resolved task specs (or mteb task objects, as they are) -> [(mteb task, data origin, data fingerprint)] of the
    text tasks. With the hub offline, tasks without local data are one error naming them all, or with
    ``skip_unavailable`` one warning."""
    if tasks and not isinstance(tasks[0], TaskSpec):
        return _text_units([(task, "given", str(task.metadata.dataset.get("revision"))) for task in tasks])
    units = []
    for spec in tasks:
        origin, folder = task_data(spec, data_dir)
        task = load_task(spec, split, data_dir)
        if folder is not None:  # the folder's content and which file is which split
            fingerprint = text_hash(content_hash(folder), sorted(spec.local_files.items()))
        else:  # a custom task's revision is already the fingerprint of its files and declaration
            fingerprint = task.metadata.revision
        units.append((task, origin, fingerprint))
    units = _text_units(units)  # before the hub check: a task left out needs no data
    from_hub = [task.metadata.name for task, origin, _ in units if origin == "hub"]
    unavailable = from_hub if from_hub and hub_offline() else []  # the hub asked only where a task needs it
    if unavailable and not skip_unavailable:
        raise UserError(unavailable_message(unavailable, data_dir, len(units) - len(unavailable)))
    if unavailable:
        logger.warning(
            "skipping %d task(s) with no local copy (hub offline): %s", len(unavailable), ", ".join(unavailable)
        )
        units = [unit for unit in units if unit[1] != "hub"]
        if not units:
            raise UserError("none of the tasks asked has a local copy and the hub is offline")
    return units


def is_text_task(task) -> bool:
    """Whether every input of ``task`` is text, so a language model's layers can encode it."""
    return set(task.metadata.modalities) == {"text"}


def _text_units(units: list[tuple[Any, str, str]]) -> list[tuple[Any, str, str]]:
    """The units of text tasks; the others are named in one warning (none left: one error)."""
    left_out = [task for task, _, _ in units if not is_text_task(task)]
    if not left_out:
        return units
    named = ", ".join(f"{t.metadata.name} ({'+'.join(sorted(t.metadata.modalities))})" for t in left_out)
    if len(left_out) == len(units):
        raise UserError(f"no text task to score: every one of the tasks asked needs non-text inputs: {named}")
    logger.warning("left out %d non-text task(s) (their inputs are not only text): %s", len(left_out), named)
    return [unit for unit in units if is_text_task(unit[0])]


def check_writable(folder: Path) -> None:
    """Fail before any work if results could not be written (checked on the nearest existing parent)."""
    existing = Path(folder) if Path(folder).exists() else topmost_missing(folder).parent
    if existing.exists() and not existing.is_dir():
        where = "is a file" if existing == Path(folder) else f"is inside {str(existing)!r}, which is a file"
        raise UserError(f"output folder {str(folder)!r} {where}; choose another --output")
    if not os.access(existing, os.W_OK | os.X_OK):
        raise UserError(f"output folder {str(folder)!r} is not writable; choose another --output")


def distributed_shard() -> tuple[int, int] | None:
    """(rank, world size) when started by ``accelerate launch`` / ``torchrun`` with several processes, else None."""
    world = int(os.environ.get("WORLD_SIZE", "1"))
    return (int(os.environ.get("RANK", "0")), world) if world > 1 else None


def merge_shards(output: str | Path) -> pd.DataFrame:
    """Join the shard tables of a run folder into its ``scores.csv`` (after a SLURM array, say)."""
    import pandas as pd

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
    tables = [RunFolder(output, (i, n)).scores(missing_ok=True, subtasks=True) for i in range(n)]
    shards = pd.concat(tables, ignore_index=True).to_dict("records")
    return folder.update_scores(shards)  # rows of earlier runs in the folder stay


def merge_when_all_done(output: Path, shard: tuple[int, int]) -> pd.DataFrame:
    """Wait for every process (gloo works for CPU and GPU runs), merge on rank 0, hand everyone the merged table."""
    import torch.distributed as dist

    if not dist.is_initialized():
        dist.init_process_group("gloo", timeout=timedelta(days=7))  # shards of a long sweep finish hours apart
    dist.barrier()
    if shard[0] == 0:
        merge_shards(output)
    dist.barrier()
    return RunFolder(output).scores(missing_ok=True, subtasks=True)  # every row, as an unlaunched sweep returns
