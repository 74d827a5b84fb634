"""Readout and pooling of every hidden state of one batch, in one pass, exact under right padding."""

from __future__ import annotations

from collections.abc import Iterator, Sequence

import torch
from torch import nn

from layer_mteb.common.config import Pooling, Readout


def readout_layers(
    hidden_states: Sequence[torch.Tensor], final_norm: nn.Module | None, readout: Readout, *, last_normed: bool = True
) -> list[torch.Tensor]:
    """The L+1 hidden states as the chosen readout sees them.

    ``hidden_states[-1]`` already passed the model's final norm; every earlier entry is the raw residual stream.
    ``final_norm`` applies that norm to each earlier entry too (the paper's truncated-model protocol);
    ``raw`` leaves them as they are. Models without a final norm (BERT) read the same either way.
    ``last_normed=False`` says the last entry is raw too (a forward stopped early with the norm switched off).
    """
    return list(iter_readout(hidden_states, final_norm, readout, last_normed=last_normed))


def iter_readout(
    hidden_states: Sequence[torch.Tensor], final_norm: nn.Module | None, readout: Readout, *, last_normed: bool = True
) -> Iterator[torch.Tensor]:
    """:func:`readout_layers` one layer at a time: each normed copy can be pooled and freed before the next."""
    if readout == "raw" or final_norm is None:
        yield from hidden_states
        return
    weight = next(final_norm.parameters(), None)
    last = len(hidden_states) - 1
    for k, h in enumerate(hidden_states):
        if k == last and last_normed:
            yield h
        elif weight is None or h.device == weight.device:
            yield final_norm(h)
        else:  # a device map put the norm on another device than this block: normalise there, keep the layer home
            yield final_norm(h.to(weight.device)).to(h.device)


def pool(
    hidden: torch.Tensor, attention_mask: torch.Tensor, pooling: Pooling, *, normalize: bool = False
) -> torch.Tensor:
    """[B, T, D] token states -> [B, D] float32, over real tokens only (padding must be on the right).

    ``normalize`` divides each pooled vector by its L2 norm (sentence-transformers' ``Normalize`` module).
    """
    pooled = _pool(hidden.float(), attention_mask, pooling)
    return torch.nn.functional.normalize(pooled, p=2, dim=1) if normalize else pooled


def _pool(hidden: torch.Tensor, attention_mask: torch.Tensor, pooling: Pooling) -> torch.Tensor:
    attention_mask = attention_mask.to(hidden.device)  # with a device map, layers live on different devices
    if pooling == "first":
        return hidden[:, 0]
    if pooling == "last":
        last = attention_mask.sum(dim=1) - 1
        return hidden[torch.arange(hidden.shape[0], device=hidden.device), last]
    mask = attention_mask.to(hidden.dtype)
    # a batched matrix product sums over tokens without materialising hidden * mask, another [B, T, D] tensor
    return torch.bmm(mask.unsqueeze(1), hidden).squeeze(1) / mask.sum(dim=1, keepdim=True)
