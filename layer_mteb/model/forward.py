"""One forward pass per text: tokenise, batch by length, read every layer out and pool it on the device.

Only the [depth+1, n, D] pooled vectors are kept; token states live for one batch (a :data:`BatchObserver` may look).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import nullcontext

import numpy as np
import torch
from torch import nn

from layer_mteb.common.config import EncodeConfig, Readout
from layer_mteb.common.errors import UserError
from layer_mteb.common.pooling import pool
from layer_mteb.common.progress import progress as progress_bar
from layer_mteb.common.timing import PhaseTimes
from layer_mteb.model.architectures import LoadedModel, first_blocks
from layer_mteb.model.placement import OffloadedModule

logger = logging.getLogger(__name__)

#: Texts tokenised per call (see :func:`tokenize`).
TOKENIZE_CHUNK = 8192


#: Called per batch with the L+1 read-out token states ([B, T, D], right-padded), the mask [B, T] and the texts'
#: positions: token metrics stream through it instead of storing every layer's token states.
BatchObserver = Callable[[Sequence[torch.Tensor], torch.Tensor, Sequence[int]], None]

#: Receives a batch's positions and pooled vectors of every layer ([depth+1, B, D] float32, on the states' device).
PooledSink = Callable[[Sequence[int], torch.Tensor], None]


def encode_all_layers(
    model: LoadedModel,
    texts: Sequence[str],
    config: EncodeConfig,
    *,
    progress: bool = False,
    on_batch: BatchObserver | None = None,
    depth: int | None = None,
    into: PooledSink | None = None,
    times: PhaseTimes | None = None,
) -> tuple[torch.Tensor | None, int]:
    """One forward pass per text -> ([depth+1, n, D] pooled float32 vectors in the order of ``texts``, n truncated).

    With ``into``, each batch's vectors go there and None is returned for them. The forward stops after block
    ``depth`` (default: the last). ``times`` adds the seconds per phase (the device is waited for once, at the end).
    """
    times = times if times is not None else PhaseTimes()
    with times.phase("tokenize"):
        token_ids, n_truncated = tokenize(model.tokenizer, texts, config)
    if n_truncated:
        logger.info("%d of %d texts were truncated to %d tokens", n_truncated, len(texts), config.max_length)
    return encode_token_ids(
        model, token_ids, config, progress=progress, on_batch=on_batch, depth=depth, into=into, times=times
    ), n_truncated


def encode_token_ids(
    model: LoadedModel,
    token_ids: Sequence[np.ndarray],
    config: EncodeConfig,
    *,
    progress: bool = False,
    on_batch: BatchObserver | None = None,
    depth: int | None = None,
    into: PooledSink | None = None,
    times: PhaseTimes | None = None,
) -> torch.Tensor | None:
    """:func:`encode_all_layers` for token ids fed as they are, for callers that build or perturb the ids."""
    times = times if times is not None else PhaseTimes()
    depth = model.n_layers if depth is None else depth
    out = None
    if into is None:
        out = torch.empty(depth + 1, len(token_ids), model.hidden_size, device=config.device)

        def into(rows: Sequence[int], vectors: torch.Tensor) -> None:
            # one index and one copy per batch, not per layer: each is a host round trip on a GPU
            out[:, torch.tensor(rows, device=out.device)] = vectors.to(out.device)

    stop_early = depth < model.n_layers
    # the model's final norm for the readout (None without one, as in BERT), before first_blocks() swaps it out
    norm = None if model.final_norm is None else OffloadedModule(model.final_norm)
    # one block at least: with none, transformers' hooks record no hidden state at all
    running = first_blocks(model, max(depth, 1)) if stop_early else nullcontext()
    expected = (max(depth, 1) if stop_early else model.n_layers) + 1  # hidden states per forward
    batch_size, max_tokens = config.batch_limits(expected, model.hidden_size)
    batches = length_sorted_batches([len(ids) for ids in token_ids], batch_size, max_tokens)
    bar = progress_bar(len(token_ids), "encoding", "texts", enabled=progress)
    with torch.inference_mode(), running:
        for number, batch in enumerate(batches, start=1):
            with times.phase("forward"):
                padded = pad_batch(model, [token_ids[i] for i in batch])
                hidden_states = model.hidden_states(**padded, **model.forward_options)
            if len(hidden_states) != expected:
                raise RuntimeError(f"{model.name} returned {len(hidden_states)} hidden states, expected {expected}")
            last_normed = not stop_early and depth == model.n_layers  # an early stop ran with the norm off
            mask = padded["attention_mask"]
            states = readout_layers(hidden_states[: depth + 1], norm, config.readout, last_normed=last_normed)
            if on_batch is not None:
                with times.phase("pooling"):
                    states = list(states)
                with times.phase("token_metrics"):
                    on_batch(states, mask, batch)
            with times.phase("pooling", sync=number == len(batches)):
                into(batch, stack_pooled(states, depth + 1, mask, config))
            bar.update(len(batch))
    bar.close()
    return out


def pad_batch(model: LoadedModel, token_ids: Sequence[np.ndarray]) -> dict[str, torch.Tensor]:
    """``token_ids`` right-padded into one batch (ids and attention mask) on the device the model takes inputs on."""
    padded = model.tokenizer.pad({"input_ids": [ids.tolist() for ids in token_ids]}, return_tensors="pt")
    return {key: value.to(model.device) for key, value in padded.items()}


def stack_pooled(
    states: Iterable[torch.Tensor], n_states: int, mask: torch.Tensor, config: EncodeConfig
) -> torch.Tensor:
    """[n_states, B, D] pooled float32 on the first state's device, each copied in as pooled so no view keeps a
    normed [B, T, D] state alive."""
    out = None
    for layer, state in enumerate(states):
        pooled = pool(state, mask, config.pooling, normalize=config.normalize)
        if out is None:
            out = pooled.new_empty(n_states, *pooled.shape)
        out[layer] = pooled
    if out is None or layer != n_states - 1:
        raise RuntimeError(f"pooled {0 if out is None else layer + 1} states, expected {n_states}")
    return out


def tokenize(
    tokenizer, texts: Sequence[str], config: EncodeConfig, chunk: int = TOKENIZE_CHUNK
) -> tuple[list[np.ndarray], int]:
    """(token ids per text, special tokens included, cut to the settings' ``max_length``; how many texts were cut):
    every path that encodes (a run, ``cost``, ``stress``) reads its texts here, as the settings say.

    A text with no tokens (an empty string for GPT-2-style tokenizers) gets one stand-in so there is something to
    pool. Texts go ``chunk`` at a time into int64 arrays: one call on 200,000 texts held about 0.9 GB of encodings.
    """
    filler = next(t for t in (tokenizer.bos_token_id, tokenizer.eos_token_id, tokenizer.pad_token_id) if t is not None)
    max_length = config.max_length
    out: list[np.ndarray] = []
    n_truncated = 0
    for start in range(0, len(texts), chunk):
        part = [texts[i] for i in range(start, min(start + chunk, len(texts)))]
        ids = _input_ids(tokenizer, part, max_length + 1)
        too_long = [i for i, row in enumerate(ids) if len(row) > max_length]
        if too_long:
            cut = _input_ids(tokenizer, [part[i] for i in too_long], max_length)
            for i, row in zip(too_long, cut, strict=True):
                if len(row) > max_length:  # the tokenizer would not cut into its own special tokens
                    raise UserError(f"--max-length {max_length} leaves no room for this tokenizer's special tokens")
                ids[i] = row
        n_truncated += len(too_long)
        out.extend(np.asarray(row or [filler], dtype=np.int64) for row in ids)
    return out, n_truncated


def _input_ids(tokenizer, texts: list[str], max_length: int) -> list[list[int]]:
    """The tokenizer's input ids only (no masks or token type ids built to be dropped)."""
    return tokenizer(
        texts, truncation=True, max_length=max_length, return_attention_mask=False, return_token_type_ids=False
    )["input_ids"]


def length_sorted_batches(lengths: Sequence[int], batch_size: int, max_tokens: int | None = None) -> list[list[int]]:
    """Positions in batches, longest first (memory errors show early, padding stays small), each at most
    ``batch_size`` texts and ``max_tokens`` padded tokens (a longer text gets a batch of its own)."""
    budget = float("inf") if max_tokens is None else max_tokens
    batches: list[list[int]] = []
    for i in sorted(range(len(lengths)), key=lambda i: -lengths[i]):
        current = batches[-1] if batches else []
        if 0 < len(current) < batch_size and (len(current) + 1) * lengths[current[0]] <= budget:
            current.append(i)
        else:
            batches.append([i])
    return batches


def readout_layers(
    hidden_states: Sequence[torch.Tensor],
    final_norm: nn.Module | OffloadedModule | None,
    readout: Readout,
    *,
    last_normed: bool = True,
) -> Iterator[torch.Tensor]:
    """The L+1 hidden states as the readout sees them: ``final_norm`` applies the model's final norm to every raw
    state (the paper's truncated-model protocol), ``raw`` none. The last state is normed already unless
    ``last_normed=False`` (a forward stopped early).

    One layer at a time, so each normed copy is pooled and freed before the next."""
    if readout == "raw" or final_norm is None:
        yield from hidden_states
        return
    norm = final_norm if isinstance(final_norm, OffloadedModule) else OffloadedModule(final_norm)
    last = len(hidden_states) - 1
    for k, h in enumerate(hidden_states):
        yield h if k == last and last_normed else norm(h)
