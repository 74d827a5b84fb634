"""The all-layer pooled cache: each unique text goes through the model once; every layer is read from the cache.

One cache per (model, encode config, task) serves every layer of that task; ``depth=k`` stops the forward after block
k. It is saved as safetensors + JSON (never pickle) in the folder :func:`store_folder` names.
"""

from __future__ import annotations

import json
import logging
import os
import shutil
import tempfile
import weakref
from collections.abc import Callable, Sequence
from pathlib import Path

import numpy as np
import torch
from safetensors import SafetensorError, safe_open
from safetensors.torch import load_file, save_file

from layer_mteb.common.config import EncodeConfig
from layer_mteb.common.errors import UserError
from layer_mteb.common.files import atomic_write, cache_root, text_hash
from layer_mteb.common.gpus import gpus_shown
from layer_mteb.common.settings import RunSettings
from layer_mteb.common.threads import torch_threads
from layer_mteb.common.timing import PhaseTimes
from layer_mteb.model.architectures import LoadedModel
from layer_mteb.model.forward import BatchObserver, encode_all_layers
from layer_mteb.vectors.layer_files import SegmentWriter, gather, read_segment, remove_torn, segment_folders
from layer_mteb.vectors.memory import check_one_layer_fits, format_size, resolve_memory_limit, store_bytes

logger = logging.getLogger(__name__)


class LayerCache:
    """Pooled vectors of layers 0..``depth`` (default: all L+1) for every text seen so far.

    Within ``memory_limit`` bytes (default: ``config.max_cache_memory``, else automatic) they are one [depth+1, N, D]
    tensor on the compute device; a fill past it goes to per-layer files (:mod:`.layer_files`) under ``path/layers``,
    or a temporary folder without a path.
    """

    def __init__(
        self,
        model: LoadedModel,
        config: EncodeConfig,
        path: Path | None = None,
        *,
        progress: bool = False,
        observe: Callable[[int], BatchObserver] | None = None,
        depth: int | None = None,
        memory_limit: int | None = None,
    ):
        self.model = model
        self.config = config
        self.path = path
        self.progress = progress
        self.observe = observe  # n new texts -> an observer of that fill's batches (token metrics stream here)
        self.depth = model.n_layers if depth is None else depth
        if not 0 <= self.depth <= model.n_layers:
            raise ValueError(f"depth {depth} is outside 0..{model.n_layers}")
        limit = config.max_cache_memory if memory_limit is None else memory_limit
        self.memory_limit = resolve_memory_limit(limit, config.device)  # None: measured now
        self.index: dict[str, int] = {}
        self._vectors = torch.empty(self.depth + 1, 0, model.hidden_size, device=config.device)
        self._segments: list[Path] = []  # on disk, rows after the in-memory ones, in order
        self._segment_starts: list[int] = []
        self._spill: Path | None = None
        self.n_truncated = 0
        self._forward_threads = torch.get_num_threads()
        self.times = PhaseTimes(config.device)  # seconds of this cache's forward passes and file I/O, by phase
        self._owner = os.getpid()  # the process that may run the model; a forked worker only reads
        if path is not None:
            with self.times.phase("cache_io"):
                self._load(path)

    def __len__(self) -> int:
        return len(self.index)

    def encoding_seconds(self) -> float:
        """Seconds this cache has spent encoding texts so far (file I/O not included)."""
        return sum(seconds for phase, seconds in self.times.seconds.items() if phase != "cache_io")

    @property
    def on_disk(self) -> bool:
        return bool(self._segments)

    def fill(self, texts: Sequence[str]) -> None:
        """Encode the texts not seen yet (all in one length-sorted pass)."""
        missing = list(dict.fromkeys(t for t in texts if t not in self.index))
        if not missing:
            return
        if os.getpid() != self._owner:
            raise UserError(
                f"an evaluation worker met {len(missing)} texts that are not in the vector cache; a forked worker "
                "cannot run the model (a GPU does not survive a fork) and its vectors would be lost: rerun with "
                "--eval-workers 1"
            )
        # evaluators run on one thread and see no GPU; the forward on all threads, on the model's device
        with torch_threads(self._forward_threads), gpus_shown():
            self._fill(missing)

    def _fill(self, missing: list[str]) -> None:
        hidden, n_layers = self.model.hidden_size, self.depth + 1
        n_total = len(self.index) + len(missing)
        check_one_layer_fits(self.memory_limit, n_total, hidden)
        in_memory = self._vectors.shape[1]
        # appending to the in-memory store holds the old store, the new rows and their concatenation at once
        peak = store_bytes(n_total + in_memory, n_layers, hidden)
        observer = self.observe(len(missing)) if self.observe is not None else None
        options = {"progress": self.progress, "on_batch": observer, "depth": self.depth, "times": self.times}
        if not self._segments and peak <= self.memory_limit:
            vectors, n_truncated = encode_all_layers(self.model, missing, self.config, **options)
            self._append(missing, vectors)
        else:
            if not self._segments:
                logger.info(
                    "pooled vectors of %d texts x %d layers need %s, more than the memory limit of %s: "
                    "writing one file per layer to disk",
                    n_total,
                    n_layers,
                    format_size(store_bytes(n_total, n_layers, hidden)),
                    format_size(self.memory_limit),
                )
            with SegmentWriter(self._spill_folder(), missing, n_layers, hidden) as writer:
                _, n_truncated = encode_all_layers(self.model, missing, self.config, into=writer.write_all, **options)
                segment, written = writer.finish()
            self._add_segment(segment, written)
        self.n_truncated += n_truncated

    def vectors(self, texts: Sequence[str], layer: int | None = None) -> torch.Tensor:
        """[depth+1, n, D] (or [n, D] for one ``layer``) float32 vectors of ``texts``, encoding only the unseen ones;
        on the store's device, or the host when read from disk."""
        if layer is not None:
            self._check_layer(layer)
        self.fill(texts)
        if not self._segments:
            rows = torch.tensor([self.index[t] for t in texts], device=self._vectors.device, dtype=torch.long)
            stored = self._vectors if layer is None else self._vectors[layer]
            return stored.index_select(-2, rows)
        if layer is not None:
            return torch.from_numpy(self.layer_rows(texts, layer))
        return torch.stack([torch.from_numpy(self.layer_rows(texts, k)) for k in range(self.depth + 1)])

    def by_layer(self, texts: Sequence[str]) -> LayerStack:
        """The [depth+1, n, D] vectors of ``texts`` as :meth:`vectors` gives them, read one layer at a time."""
        self.fill(texts)
        return LayerStack(self, list(texts))

    def layer_rows(self, texts: Sequence[str], layer: int) -> np.ndarray:
        """[n, D] float32 host array of ``layer`` for ``texts`` (what mteb is handed), encoding the unseen ones;
        gathered in chunks, as MindSmallReranking's 2.36 M rows per layer would not fit on the device."""
        self._check_layer(layer)
        self.fill(texts)
        rows = np.fromiter((self.index[t] for t in texts), dtype=np.int64, count=len(texts))
        out = np.empty((len(rows), self.model.hidden_size), dtype=np.float32)
        in_memory = self._vectors.shape[1]
        here = np.flatnonzero(rows < in_memory)
        for chunk in np.array_split(here, max(1, -(-len(here) // _CHUNK_ROWS))):
            if len(chunk):
                picked = torch.from_numpy(rows[chunk]).to(self._vectors.device)
                out[chunk] = self._vectors[layer].index_select(0, picked).cpu().numpy()
        if self._segments:
            part = np.searchsorted(self._segment_starts, rows, side="right") - 1
            for i, segment in enumerate(self._segments):
                mine = np.flatnonzero((part == i) & (rows >= in_memory))
                if len(mine):
                    out[mine] = gather(segment, layer, rows[mine] - self._segment_starts[i])
        return out

    def to_host(self) -> None:
        """Keep the in-memory vectors in host memory (forked evaluation workers cannot read GPU memory)."""
        self._vectors = self._vectors.cpu()

    def save(self, path: Path | None = None) -> None:
        """Write the in-memory vectors atomically (never half a cache); vectors on disk were written when encoded."""
        path = path or self.path
        if path is None:
            raise ValueError("no path to save the cache to")
        with self.times.phase("cache_io"):
            if self._spill is not None and self._spill != path / "layers":  # a temporary store: move it into place
                if self._spill.is_dir():
                    shutil.rmtree(path / "layers", ignore_errors=True)
                    path.mkdir(parents=True, exist_ok=True)
                    shutil.move(self._spill, path / "layers")
                self._segments = [path / "layers" / s.name for s in self._segments]
                self._spill = path / "layers"
            in_memory = self._vectors.shape[1]
            if not in_memory and self._segments:
                return
            path.mkdir(parents=True, exist_ok=True)
            texts = list(self.index)[:in_memory]
            atomic_write(path / "vectors.safetensors", lambda tmp: save_file({"vectors": self._vectors.cpu()}, tmp))
            atomic_write(path / "texts.json", lambda tmp: Path(tmp).write_text(json.dumps(texts)))

    def _check_layer(self, layer: int) -> None:
        if not 0 <= layer <= self.depth:
            raise ValueError(f"layer {layer} is not in this cache (it holds layers 0..{self.depth})")

    def _spill_folder(self) -> Path:
        if self._spill is None:
            if self.path is not None:
                self._spill = self.path / "layers"
            else:
                scratch = cache_root() / "scratch"
                scratch.mkdir(parents=True, exist_ok=True)
                self._spill = Path(tempfile.mkdtemp(dir=scratch, prefix="vectors-"))
                weakref.finalize(self, shutil.rmtree, self._spill, True)
        return self._spill

    def _add_segment(self, segment: Path, texts: list[str]) -> None:
        """Serve ``texts`` from ``segment``: their rows follow every row already indexed."""
        start = len(self.index)
        self._segments.append(segment)
        self._segment_starts.append(start)
        self.index.update((t, start + i) for i, t in enumerate(texts))

    def _append(self, texts: list[str], vectors: torch.Tensor) -> None:
        start = len(self.index)
        self.index.update((t, start + i) for i, t in enumerate(texts))
        try:
            vectors = vectors.to(self._vectors.device)
            # the first fill becomes the store as it is: no second copy of [depth+1, n, D] at the peak
            self._vectors = torch.cat([self._vectors, vectors], dim=1) if start else vectors
        except torch.OutOfMemoryError:  # a GPU too small for all layers of a big task: keep them in host memory
            logger.warning(
                "the task's pooled vectors do not fit on %s; keeping them in host memory", self._vectors.device
            )
            self._vectors = torch.cat([self._vectors.cpu(), vectors.cpu()], dim=1)

    def _load(self, path: Path) -> None:
        self._load_in_memory(path)
        folder = path / "layers"
        remove_torn(folder)
        for segment in segment_folders(folder):
            texts = read_segment(segment, self.depth + 1, self.model.hidden_size)
            if texts is None:
                continue
            if any(t in self.index for t in texts):
                logger.warning("ignoring vector segment %s: it repeats texts already cached", segment)
                continue
            self._spill = folder
            self._add_segment(segment, texts)

    def _load_in_memory(self, path: Path) -> None:
        vectors_file, texts_file = path / "vectors.safetensors", path / "texts.json"
        if not (vectors_file.exists() and texts_file.exists()):
            return
        try:
            texts = json.loads(texts_file.read_text())
            with safe_open(vectors_file, "pt") as stored:
                shape = tuple(stored.get_slice("vectors").get_shape())
        except (OSError, ValueError, KeyError, SafetensorError) as err:
            logger.warning("ignoring unreadable cache %s (%s); recomputing", path, err)
            return
        n_layers, hidden = self.model.n_layers, self.model.hidden_size
        problem = None
        if len(shape) != 3 or shape[1:] != (len(texts), hidden) or not 0 < shape[0] <= n_layers + 1:
            problem = f"shape {shape}, expected (<={n_layers + 1}, {len(texts)}, {hidden})"
        elif len(set(texts)) != len(texts):
            problem = "repeated texts"
        if problem is not None:
            logger.warning("ignoring cache %s: %s; recomputing", path, problem)
            return
        if shape[0] <= self.depth:
            logger.info("cache %s holds layers 0..%d, %d are needed; recomputing", path, shape[0] - 1, self.depth)
            return
        if store_bytes(len(texts), shape[0], hidden) > self.memory_limit:
            check_one_layer_fits(self.memory_limit, len(texts), hidden)  # before saying anything: an error is one line
            logger.info("cache %s is larger than the memory limit; reading it layer by layer into files on disk", path)
            self._load_to_disk(vectors_file, texts)
            return
        try:
            vectors = load_file(vectors_file)["vectors"]
        except (OSError, SafetensorError) as err:
            logger.warning("ignoring unreadable cache %s (%s); recomputing", path, err)
            return
        self.depth = shape[0] - 1  # a deeper cache serves a shallower sweep; new texts are encoded as deep
        self._vectors = self._vectors.new_empty(self.depth + 1, 0, hidden)
        self._append(texts, vectors)

    def _load_to_disk(self, vectors_file: Path, texts: list[str]) -> None:
        """A saved in-memory cache past today's memory limit (one layer of it fits, checked before) becomes one
        segment, one layer in memory at a time."""
        with SegmentWriter(self._spill_folder(), texts, self.depth + 1, self.model.hidden_size) as writer:
            with safe_open(vectors_file, "pt") as stored:
                for layer in range(self.depth + 1):
                    writer.write(layer, range(len(texts)), stored.get_slice("vectors")[layer])
            segment, written = writer.finish()
        self._add_segment(segment, written)
        vectors_file.unlink()  # its rows now live in the segment; keeping both would serve them twice


_CHUNK_ROWS = 1 << 16  # rows gathered per step when handing a layer to mteb


class LayerStack:
    """Indexed like :meth:`LayerCache.vectors`'s [depth+1, n, D] tensor but read one layer at a time: the whole stack
    would be a second copy of the store (hundreds of GB for a large task on an 8B model)."""

    def __init__(self, cache: LayerCache, texts: list[str]):
        self._cache, self._texts = cache, texts
        self.shape = torch.Size((cache.depth + 1, len(texts), cache.model.hidden_size))

    def __len__(self) -> int:
        return self.shape[0]

    def __getitem__(self, layer: int) -> torch.Tensor:
        return self._cache.vectors(self._texts, layer)


def store_folder(model: LoadedModel, settings: RunSettings, task_name: str) -> Path:
    """Where a task's pooled vectors are kept; rows are looked up by exact text, so the key only separates models,
    revisions and settings."""
    key = text_hash(model.revision, sorted(settings.key().items()))
    if settings.prompts is not None:  # prompted and unprompted runs never share a store
        key = text_hash(key, settings.prompts.digest())
    if settings.instructions is not None:  # so are runs with and without an instruction template
        key = text_hash(key, "instructions", settings.instructions.digest())
    return cache_root() / "vectors" / model.name.replace("/", "__") / key / task_name
