"""The all-layer pooled cache: each unique text goes through the model once; every layer is read from the cache.

``LayerCache.vectors(texts)`` returns the [L+1, n, D] pooled vectors of ``texts``, running the forward pass only for
texts it has not seen. A cache made with ``depth=k`` holds layers 0..k only and its forward passes stop after block
k (where the architecture allows): a sweep of shallow layers never computes the deeper blocks. One cache per
(model, encode config, task) serves every layer of that task, and can be saved to and reloaded from disk
(safetensors + JSON; never pickle) in the folder :func:`store_folder` names.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable, Sequence
from pathlib import Path

import torch
from safetensors import SafetensorError
from safetensors.torch import load_file, save_file

from layer_mteb._io import atomic_write, text_hash
from layer_mteb.architectures import LoadedModel
from layer_mteb.config import EncodeConfig
from layer_mteb.forward import BatchObserver, encode_all_layers
from layer_mteb.loading import cache_root

logger = logging.getLogger(__name__)


class LayerCache:
    """Pooled vectors of layers 0..``depth`` (default: all L+1) for every text seen so far, on the compute device."""

    def __init__(
        self,
        model: LoadedModel,
        config: EncodeConfig,
        path: Path | None = None,
        *,
        progress: bool = False,
        observe: Callable[[int], BatchObserver] | None = None,
        depth: int | None = None,
    ):
        self.model = model
        self.config = config
        self.path = path
        self.progress = progress
        self.observe = observe  # n new texts -> an observer of that fill's batches (token metrics stream here)
        self.depth = model.n_layers if depth is None else depth
        if not 0 <= self.depth <= model.n_layers:
            raise ValueError(f"depth {depth} is outside 0..{model.n_layers}")
        self.index: dict[str, int] = {}
        self._vectors = torch.empty(self.depth + 1, 0, model.hidden_size, device=config.device)
        self.n_truncated = 0
        if path is not None:
            self._load(path)

    def __len__(self) -> int:
        return len(self.index)

    def vectors(self, texts: Sequence[str], layer: int | None = None) -> torch.Tensor:
        """[depth+1, n, D] (or [n, D] for one ``layer``) float32 vectors of ``texts``, encoding only the unseen ones."""
        if layer is not None and not 0 <= layer <= self.depth:
            raise ValueError(f"layer {layer} is not in this cache (it holds layers 0..{self.depth})")
        missing = list(dict.fromkeys(t for t in texts if t not in self.index))
        if missing:
            observer = self.observe(len(missing)) if self.observe is not None else None
            vectors, n_truncated = encode_all_layers(
                self.model, missing, self.config, progress=self.progress, on_batch=observer, depth=self.depth
            )
            self._append(missing, vectors)
            self.n_truncated += n_truncated
        rows = torch.tensor([self.index[t] for t in texts], device=self._vectors.device, dtype=torch.long)
        stored = self._vectors if layer is None else self._vectors[layer]
        return stored.index_select(-2, rows)

    def save(self, path: Path | None = None) -> None:
        """Write the cache atomically: a killed process leaves the old cache or the new one, never half of one."""
        path = path or self.path
        if path is None:
            raise ValueError("no path to save the cache to")
        path.mkdir(parents=True, exist_ok=True)
        atomic_write(path / "vectors.safetensors", lambda tmp: save_file({"vectors": self._vectors.cpu()}, tmp))
        atomic_write(path / "texts.json", lambda tmp: Path(tmp).write_text(json.dumps(list(self.index))))

    def _append(self, texts: list[str], vectors: torch.Tensor) -> None:
        start = len(self.index)
        self.index.update((t, start + i) for i, t in enumerate(texts))
        try:
            vectors = vectors.to(self._vectors.device)
            # the first fill becomes the store as it is: no second copy of [depth+1, n, D] at the peak
            self._vectors = torch.cat([self._vectors, vectors], dim=1) if start else vectors
        except torch.OutOfMemoryError:  # a GPU too small for all layers of a big task: keep them in host memory
            logger.warning("pooled vectors no longer fit on %s; keeping them in host memory", self._vectors.device)
            self._vectors = torch.cat([self._vectors.cpu(), vectors.cpu()], dim=1)

    def _load(self, path: Path) -> None:
        vectors_file, texts_file = path / "vectors.safetensors", path / "texts.json"
        if not (vectors_file.exists() and texts_file.exists()):
            return
        try:
            texts = json.loads(texts_file.read_text())
            vectors = load_file(vectors_file)["vectors"]
        except (OSError, ValueError, KeyError, SafetensorError) as err:
            logger.warning("ignoring unreadable cache %s (%s); recomputing", path, err)
            return
        n_layers, hidden = self.model.n_layers, self.model.hidden_size
        shape = tuple(vectors.shape)
        if len(shape) != 3 or shape[1:] != (len(texts), hidden) or not 0 < shape[0] <= n_layers + 1:
            logger.warning(
                "ignoring cache %s: shape %s, expected (<=%d, %d, %d); recomputing",
                path,
                shape,
                n_layers + 1,
                len(texts),
                hidden,
            )
            return
        if len(set(texts)) != len(texts):
            logger.warning("ignoring cache %s: repeated texts; recomputing", path)
            return
        if shape[0] <= self.depth:
            logger.info("cache %s holds layers 0..%d, %d are needed; recomputing", path, shape[0] - 1, self.depth)
            return
        self.depth = shape[0] - 1  # a deeper cache serves a shallower sweep; new texts are encoded as deep
        self._vectors = self._vectors.new_empty(self.depth + 1, 0, hidden)
        self._append(texts, vectors)


def store_folder(model: LoadedModel, config: EncodeConfig, task_name: str) -> Path:
    """Where a task's pooled vectors are kept. Rows are looked up by exact text, so changed data can never be
    served stale vectors; the key only has to separate models, revisions and encode settings."""
    settings = text_hash(model.revision, sorted(config.key().items()))
    return cache_root() / "vectors" / model.name.replace("/", "__") / settings / task_name
