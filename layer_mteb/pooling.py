"""Readout and pooling of every hidden state of one batch, in one pass, exact under right padding."""

from __future__ import annotations

from collections.abc import Sequence

import torch
from torch import nn

from layer_mteb.config import Pooling, Readout


def readout_layers(
    hidden_states: Sequence[torch.Tensor], final_norm: nn.Module | None, readout: Readout
) -> list[torch.Tensor]:
    """The L+1 hidden states as the chosen readout sees them.

    ``hidden_states[-1]`` already passed the model's final norm; every earlier entry is the raw residual stream.
    ``final_norm`` applies that norm to each earlier entry too (the paper's truncated-model protocol);
    ``raw`` leaves them as they are. Models without a final norm (BERT) read the same either way.
    """
    if readout == "raw" or final_norm is None:
        return list(hidden_states)
    weight = next(final_norm.parameters(), None)
    if weight is None or all(h.device == weight.device for h in hidden_states):
        return [final_norm(h) for h in hidden_states[:-1]] + [hidden_states[-1]]
    # a device map put the norm on another device than the earlier blocks: normalise there, keep each layer home
    return [final_norm(h.to(weight.device)).to(h.device) for h in hidden_states[:-1]] + [hidden_states[-1]]


def pool(hidden: torch.Tensor, attention_mask: torch.Tensor, pooling: Pooling) -> torch.Tensor:
    """[B, T, D] token states -> [B, D] float32, over real tokens only (padding must be on the right)."""
    hidden = hidden.float()
    attention_mask = attention_mask.to(hidden.device)  # with a device map, layers live on different devices
    if pooling == "first":
        return hidden[:, 0]
    if pooling == "last":
        last = attention_mask.sum(dim=1) - 1
        return hidden[torch.arange(hidden.shape[0], device=hidden.device), last]
    mask = attention_mask.unsqueeze(-1).to(hidden.dtype)
    return (hidden * mask).sum(dim=1) / mask.sum(dim=1)


def pool_all_layers(
    hidden_states: Sequence[torch.Tensor],
    attention_mask: torch.Tensor,
    *,
    final_norm: nn.Module | None,
    readout: Readout,
    pooling: Pooling,
) -> torch.Tensor:
    """All L+1 hidden states of a batch -> [L+1, B, D] float32 pooled vectors, on the states' device."""
    layers = readout_layers(hidden_states, final_norm, readout)
    return torch.stack([pool(h, attention_mask, pooling) for h in layers])
