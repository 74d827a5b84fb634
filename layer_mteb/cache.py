"""The all-layer pooled cache: each unique text goes through the model once; every layer is read from the cache.

``LayerCache.vectors(texts)`` returns the [L+1, n, D] pooled vectors of ``texts``, running the forward pass only for
texts it has not seen. A cache made with ``depth=k`` holds layers 0..k only and its forward passes stop after block
k (where the architecture allows): a sweep of shallow layers never computes the deeper blocks. One cache per
(model, encode config, task) serves every layer of that task, and can be saved to and reloaded from disk
(safetensors + JSON; never pickle).
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable, Sequence
from contextlib import nullcontext
from pathlib import Path

import torch
from safetensors import SafetensorError
from safetensors.torch import load_file, save_file
from tqdm.auto import tqdm

from layer_mteb._io import atomic_write
from layer_mteb.attention import with_model_attention
from layer_mteb.config import EncodeConfig
from layer_mteb.errors import UserError
from layer_mteb.models import LoadedModel, first_blocks
from layer_mteb.pooling import iter_readout, pool, readout_layers

logger = logging.getLogger(__name__)


#: Called once per batch with the readout's L+1 token-level states ([B, T, D] each, right-padded), the attention
#: mask [B, T] and the positions of the batch's texts in the ``texts`` given to :func:`encode_all_layers`.
#: Token-level metrics stream through this instead of storing token states of all layers.
BatchObserver = Callable[[Sequence[torch.Tensor], torch.Tensor, Sequence[int]], None]


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
        self.config = with_model_attention(config, model)
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


def encode_all_layers(
    model: LoadedModel,
    texts: Sequence[str],
    config: EncodeConfig,
    *,
    progress: bool = False,
    on_batch: BatchObserver | None = None,
    depth: int | None = None,
) -> tuple[torch.Tensor, int]:
    """One forward pass per text -> ([depth+1, n, D] pooled float32 vectors in the order of ``texts``, n truncated).

    ``depth`` (default: the last block) is the deepest layer wanted; the forward stops after that block. Each layer
    is read out and pooled on the device, one at a time, and only the pooled vectors are kept: token states live for
    one batch.
    """
    depth = model.n_layers if depth is None else depth
    token_ids, n_truncated = tokenize(model.tokenizer, texts, config.max_length)
    if n_truncated:
        logger.info("%d of %d texts were truncated to %d tokens", n_truncated, len(texts), config.max_length)
    out = torch.empty(depth + 1, len(texts), model.hidden_size, device=config.device)
    stop_early = depth < model.n_layers
    final_norm = model.final_norm  # before first_blocks() swaps it out
    # one block at least: with none, transformers' hooks record no hidden state at all
    running = first_blocks(model, max(depth, 1)) if stop_early else nullcontext()
    batches = length_sorted_batches([len(ids) for ids in token_ids], config.batch_size, config.max_batch_tokens)
    with torch.inference_mode(), running:
        for batch in tqdm(batches, desc="encoding", disable=None if progress else True, leave=False):
            padded = model.tokenizer.pad({"input_ids": [token_ids[i] for i in batch]}, return_tensors="pt")
            padded = {k: v.to(model.device) for k, v in padded.items()}
            hidden_states = model.hidden_states(**padded, **model.forward_options)
            expected = (max(depth, 1) if stop_early else model.n_layers) + 1
            if len(hidden_states) != expected:
                raise RuntimeError(f"{model.name} returned {len(hidden_states)} hidden states, expected {expected}")
            hidden_states = hidden_states[: depth + 1]
            # after an early stop the norm was off, so the last state kept is raw like the others
            last_normed = not stop_early and depth == model.n_layers
            mask = padded["attention_mask"]
            if on_batch is None:
                states = iter_readout(hidden_states, final_norm, config.readout, last_normed=last_normed)
            else:
                states = readout_layers(hidden_states, final_norm, config.readout, last_normed=last_normed)
                on_batch(states, mask, batch)
            rows = torch.tensor(batch, device=out.device)
            for layer, state in enumerate(states):
                out[layer, rows] = pool(state, mask, config.pooling, normalize=config.normalize).to(out.device)
    return out, n_truncated


def tokenize(tokenizer, texts: Sequence[str], max_length: int) -> tuple[list[list[int]], int]:
    """Token ids per text (special tokens included, as in the paper), truncated to ``max_length``.

    A text that tokenizes to nothing (an empty string for GPT-2-style tokenizers) gets one padding-free stand-in
    token, so every text has at least one real token to pool over. Returns the ids and how many texts were cut.
    """
    ids = tokenizer(list(texts), truncation=True, max_length=max_length + 1)["input_ids"]
    too_long = [i for i, row in enumerate(ids) if len(row) > max_length]
    if too_long:
        cut = tokenizer([texts[i] for i in too_long], truncation=True, max_length=max_length)["input_ids"]
        for i, row in zip(too_long, cut, strict=True):
            if len(row) > max_length:  # the tokenizer would not cut into its own special tokens
                raise UserError(f"--max-length {max_length} leaves no room for this tokenizer's special tokens")
            ids[i] = row
    filler = next(t for t in (tokenizer.bos_token_id, tokenizer.eos_token_id, tokenizer.pad_token_id) if t is not None)
    return [row or [filler] for row in ids], len(too_long)


def length_sorted_batches(lengths: Sequence[int], batch_size: int, max_tokens: int | None = None) -> list[list[int]]:
    """Positions grouped into batches, longest first (memory errors show early, padding stays small).

    A batch holds at most ``batch_size`` texts and, with ``max_tokens``, at most that many padded tokens (texts x
    its longest, which is its first); a text longer than the budget gets a batch of its own.
    """
    order = sorted(range(len(lengths)), key=lambda i: -lengths[i])
    batches: list[list[int]] = []
    for i in order:
        current = batches[-1] if batches else None
        if (
            current is not None
            and len(current) < batch_size
            and (max_tokens is None or (len(current) + 1) * lengths[current[0]] <= max_tokens)
        ):
            current.append(i)
        else:
            batches.append([i])
    return batches
