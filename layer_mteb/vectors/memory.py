"""How much memory the pooled vectors of a task may take before they go to per-layer files on disk.

A limit is a size (``--max-cache-memory 2GB``; decimal, ``GiB`` binary) or by default half the device's free memory
(on a GPU counting PyTorch's unused cache, this process's to reuse), at most half this process's share of the host's.
"""

from __future__ import annotations

import logging
import math
import re
import shutil
from pathlib import Path

import psutil

from layer_mteb.common.errors import UserError
from layer_mteb.common.ranks import host_share

logger = logging.getLogger(__name__)

_UNITS = {"": 1, "B": 1, "KB": 10**3, "MB": 10**6, "GB": 10**9, "TB": 10**12, "KIB": 2**10, "MIB": 2**20}
_UNITS |= {"GIB": 2**30, "TIB": 2**40, "K": 10**3, "M": 10**6, "G": 10**9, "T": 10**12}

#: bytes of one pooled value (float32: what mteb is handed and what the store keeps)
VALUE_BYTES = 4


def parse_size(text: str) -> int:
    """``2GB`` | ``256MB`` | ``1.5GiB`` | ``1000000`` -> bytes."""
    match = re.fullmatch(r"\s*([0-9]*\.?[0-9]+)\s*([A-Za-z]*)\s*", str(text))
    if match is None or (unit := match.group(2).upper()) not in _UNITS:
        raise UserError(f"--max-cache-memory {text!r} is not a size like 2GB, 256MB or 1.5GiB")
    size = int(float(match.group(1)) * _UNITS[unit])
    if size <= 0:
        raise UserError(f"--max-cache-memory must be positive, got {text!r}")
    return size


def format_size(n_bytes: float) -> str:
    """Bytes as the option would take them, rounded up to the shown precision (so the text is a working limit)."""
    for unit, scale in (("GB", 10**9), ("MB", 10**6), ("KB", 10**3)):
        if n_bytes >= scale:
            return f"{math.ceil(n_bytes / scale * 10) / 10:g}{unit}"
    return f"{int(n_bytes)}B"


def store_bytes(n_texts: int, n_layers: int, hidden: int) -> int:
    """The all-layer store of ``n_texts`` texts: ``n_layers`` (hidden states kept, L+1) x N x D float32 values."""
    return n_layers * n_texts * hidden * VALUE_BYTES


def host_available() -> int:
    """What the host can hand out without swapping: psutil's available memory (on Linux, MemAvailable of
    /proc/meminfo; elsewhere the system's own estimate)."""
    return psutil.virtual_memory().available


def auto_memory_limit(device: str) -> int:
    """Half the free memory of ``device`` (the rest: the forward and mteb), at most half this process's host share."""
    import torch  # here: sizes are parsed and checked before the command line loads torch

    host = host_share(host_available()) // 2
    if device.startswith("cuda") and torch.cuda.is_available():
        gpu = torch.device(device)
        free, _ = torch.cuda.mem_get_info(gpu)  # the driver's figure: blocks PyTorch caches count as used
        cached = torch.cuda.memory_reserved(gpu) - torch.cuda.memory_allocated(gpu)
        return min((free + cached) // 2, host)
    return host


#: The devices whose automatic limit the log has stated: once per process, not once per task.
_STATED: set[str] = set()


def resolve_memory_limit(limit: int | None, device: str) -> int:
    """The limit in bytes; an automatic one is measured per task (free memory changes) and logged once."""
    if limit is not None:
        return limit
    chosen = auto_memory_limit(device)
    if device not in _STATED:
        _STATED.add(device)
        logger.info(
            "pooled-vector memory limit %s (half the free memory of %s, at most half the host's, measured again for "
            "each task); beyond it each layer goes to its own file on disk (set --max-cache-memory to change)",
            format_size(chosen),
            device,
        )
    return chosen


def check_one_layer_fits(limit: int, n_texts: int, hidden: int) -> None:
    """A memory limit must hold one layer of the task's vectors: evaluating a layer reads that layer whole."""
    one_layer = store_bytes(n_texts, 1, hidden)
    if one_layer > limit:
        raise UserError(
            f"--max-cache-memory {format_size(limit)} is smaller than one layer of this task's pooled vectors "
            f"({n_texts:,} texts x {hidden} floats); the smallest limit that works is {format_size(one_layer)}"
        )


def check_one_vector_fits(limit: int, hidden: int, model: str) -> None:
    """The check that needs no task: a limit below one pooled vector of the model cannot hold any task's layer."""
    one_vector = store_bytes(1, 1, hidden)
    if one_vector > limit:
        raise UserError(
            f"--max-cache-memory {format_size(limit)} is smaller than one pooled vector of {model} ({hidden} floats, "
            f"{format_size(one_vector)}); it must hold one layer of a task's vectors, e.g. 256MB"
        )


def check_disk_fits(folder: Path, n_bytes: int, what: str) -> None:
    """Per-layer files must fit the disk they go to: stop before encoding, not hours later with a full disk."""
    existing = next(p for p in (folder, *folder.parents) if p.exists())  # the folder may not be made yet
    free = shutil.disk_usage(existing).free
    if n_bytes > free:
        raise UserError(
            f"{what} need {format_size(n_bytes)} on disk in {folder}, which has {format_size(free)} free; "
            "set LAYER_MTEB_CACHE to a folder on a larger disk, or score fewer layers with --layers"
        )
