"""Pooled vectors on disk, one ``.npy`` file per layer, for tasks whose all-layer vectors exceed the memory limit.

A fill writes one *segment*: ``layer-000.npy`` .. ``layer-LLL.npy`` ([n, D] float32, rows in batch order) and
``texts.json``. Rows are appended per batch (plain appends, not a memory map, keep pages out of resident memory), and
the segment is renamed into place when complete, so a killed run leaves a temporary folder, never a torn segment.
"""

from __future__ import annotations

import json
import logging
import os
import shutil
import uuid
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import psutil
import torch
from numpy.lib import format as npy

from layer_mteb.vectors.memory import check_disk_fits, store_bytes

logger = logging.getLogger(__name__)

_TMP = ".tmp-"


class SegmentWriter:
    """Appends one fill's pooled vectors, batch by batch, to each layer's file; refuses a segment the disk cannot
    hold up front, and as a context manager removes an unfinished one on any exception."""

    def __init__(self, folder: Path, texts: Sequence[str], n_layers: int, hidden: int):
        need = store_bytes(len(texts), n_layers, hidden)
        check_disk_fits(folder, need, f"pooled vectors of {len(texts):,} texts x {n_layers} layers")
        folder.mkdir(parents=True, exist_ok=True)
        self.target = folder / f"{len(segment_folders(folder)):05d}-{uuid.uuid4().hex[:8]}"
        self.tmp = folder / f"{_TMP}{os.getpid()}-{uuid.uuid4().hex[:8]}"
        self.tmp.mkdir()
        self.texts = list(texts)
        self.order: list[int] = []
        header = {"descr": npy.dtype_to_descr(np.dtype(np.float32)), "fortran_order": False}
        self.files = [(self.tmp / layer_file(layer)).open("wb") for layer in range(n_layers)]
        for handle in self.files:
            npy.write_array_header_2_0(handle, {**header, "shape": (len(texts), hidden)})

    def write(self, layer: int, rows: Sequence[int], vectors: torch.Tensor) -> None:
        """Append ``vectors`` ([B, D]: the texts at positions ``rows`` of this fill) to ``layer``'s file."""
        self.files[layer].write(vectors.detach().to("cpu", torch.float32).numpy().tobytes())
        if layer == 0:
            self.order += rows

    def write_all(self, rows: Sequence[int], vectors: torch.Tensor) -> None:
        """Append ``vectors`` ([layers, B, D]) to the layers' files: one host copy per batch, not per layer (a count of
        layers other than the files' fails, and the unfinished segment goes)."""
        host = vectors.detach().to("cpu", torch.float32).numpy()
        for handle, layer in zip(self.files, host, strict=True):
            handle.write(layer.tobytes())
        self.order += rows

    def finish(self) -> tuple[Path, list[str]]:
        """Close the files and rename the segment into place; -> (its folder, its texts in row order)."""
        for handle in self.files:
            handle.close()
        if len(self.order) != len(self.texts):
            raise RuntimeError(f"segment got {len(self.order)} rows for {len(self.texts)} texts")
        texts = [self.texts[i] for i in self.order]
        (self.tmp / "texts.json").write_text(json.dumps(texts))
        self.tmp.rename(self.target)
        return self.target, texts

    def __enter__(self) -> SegmentWriter:
        return self

    def __exit__(self, exc_type: type[BaseException] | None, *_: object) -> None:
        """On an exception: close the files and remove the unfinished segment."""
        if exc_type is not None:
            for handle in self.files:
                handle.close()
            shutil.rmtree(self.tmp, ignore_errors=True)


def layer_file(layer: int) -> str:
    """The file name of ``layer`` in a segment."""
    return f"layer-{layer:03d}.npy"


def segment_folders(folder: Path) -> list[Path]:
    """Finished segments of a store folder, oldest first."""
    if not folder.is_dir():
        return []
    return sorted(p for p in folder.iterdir() if p.is_dir() and not p.name.startswith(_TMP))


def remove_torn(folder: Path) -> None:
    """Remove temporary segments left by killed runs (one whose process still runs is left alone); a folder not made
    yet has none."""
    for tmp in folder.glob(f"{_TMP}*"):
        pid = int(tmp.name[len(_TMP) :].split("-")[0])
        if pid != os.getpid() and psutil.pid_exists(pid):  # another user's live process counts too
            continue
        logger.info("removing %s, left by a run that was stopped while writing it", tmp)
        shutil.rmtree(tmp, ignore_errors=True)


def read_segment(segment: Path, n_layers: int, hidden: int) -> list[str] | None:
    """The texts of a finished segment, or None (with a warning) when its files do not match what is needed."""
    try:
        texts = json.loads((segment / "texts.json").read_text())
        for layer in range(n_layers):
            shape = np.load(segment / layer_file(layer), mmap_mode="r", allow_pickle=False).shape
            if shape != (len(texts), hidden):
                raise ValueError(f"{layer_file(layer)} has shape {shape}, expected {(len(texts), hidden)}")
    except (OSError, ValueError) as err:
        logger.warning("ignoring vector segment %s (%s); its texts will be recomputed", segment, err)
        return None
    return texts


def gather(segment: Path, layer: int, rows: np.ndarray) -> np.ndarray:
    """Rows of one layer of a segment, read through a memory map of that layer's file only."""
    mapped = np.load(segment / layer_file(layer), mmap_mode="r", allow_pickle=False)
    order = np.argsort(rows, kind="stable")  # read the file front to back
    out = np.empty((len(rows), mapped.shape[1]), dtype=np.float32)
    out[order] = mapped[rows[order]]
    return out
