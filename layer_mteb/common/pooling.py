"""Pooling: how a text's token vectors become one vector; each mode is one row of :data:`POOLING_MODES` (name,
function, sentence-transformers flag). Each takes right-padded [B, T, D] states and their mask and returns [B, D]
float32, with tensor methods only, so the command line checks modes without importing torch.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from torch import Tensor


def _mean(hidden: Tensor, mask: Tensor) -> Tensor:
    hidden = hidden.float()
    mask = mask.to(hidden.dtype)
    # a batched matrix product sums over tokens without materialising hidden * mask, another [B, T, D] tensor
    return mask.unsqueeze(1).bmm(hidden).squeeze(1) / mask.sum(dim=1, keepdim=True)


def _first(hidden: Tensor, mask: Tensor) -> Tensor:
    return hidden[:, 0].float()


def _last(hidden: Tensor, mask: Tensor) -> Tensor:
    last = mask.sum(dim=1) - 1  # right padding: the last real token of each text
    return hidden.gather(1, last.view(-1, 1, 1).expand(-1, 1, hidden.shape[2])).squeeze(1).float()


@dataclass(frozen=True)
class PoolingMode:
    """One pooling mode: ``pool`` computes it; ``sentence_transformers``: its export's ``pooling_mode_`` flag."""

    name: str
    pool: Callable[[Tensor, Tensor], Tensor]
    sentence_transformers: str


POOLING_MODES: dict[str, PoolingMode] = {
    mode.name: mode
    for mode in (
        PoolingMode("mean", _mean, "mean_tokens"),  # the paper's
        PoolingMode("last", _last, "lasttoken"),
        PoolingMode("first", _first, "cls_token"),  # [CLS]
    )
}
#: what ``--pooling`` takes (the first is the default)
POOLINGS: tuple[str, ...] = tuple(POOLING_MODES)
#: every ``pooling_mode_*`` flag of sentence-transformers' ``Pooling`` config, in the order it writes them
ST_FLAGS = ("cls_token", "mean_tokens", "max_tokens", "mean_sqrt_len_tokens", "weightedmean_tokens", "lasttoken")

Pooling = str


def pool(hidden: Tensor, attention_mask: Tensor, pooling: Pooling, *, normalize: bool = False) -> Tensor:
    """[B, T, D] right-padded token states -> [B, D] float32 over real tokens; ``normalize``: unit L2 norm, as
    sentence-transformers' ``Normalize``."""
    if attention_mask.device != hidden.device:  # with a device map, layers may live on different devices
        attention_mask = attention_mask.to(hidden.device)
    pooled = POOLING_MODES[pooling].pool(hidden, attention_mask)
    return pooled / pooled.norm(dim=1, keepdim=True).clamp_min(1e-12) if normalize else pooled


def sentence_transformers_config(pooling: Pooling, hidden_size: int) -> dict[str, int | bool]:
    """The ``1_Pooling/config.json`` of an exported layer pooled by ``pooling``."""
    flag = POOLING_MODES[pooling].sentence_transformers
    flags = {f"pooling_mode_{name}": name == flag for name in ST_FLAGS}
    return {"word_embedding_dimension": hidden_size, **flags, "include_prompt": True}
