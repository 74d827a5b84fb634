"""Resolving a request into the :class:`~layer_mteb.common.settings.RunSettings` of one (model, task), once."""

from __future__ import annotations

from layer_mteb.common.config import EncodeConfig
from layer_mteb.common.settings import RunSettings
from layer_mteb.model.architectures import LoadedModel
from layer_mteb.model.attention import with_model_attention
from layer_mteb.vectors.memory import resolve_budget


def resolve_settings(
    loaded: LoadedModel,
    config: EncodeConfig,
    *,
    eval_workers: int = 1,
    data: str | None = None,
    data_fingerprint: str | None = None,
) -> RunSettings:
    """Every open choice of ``config`` made for ``loaded``, after it is loaded and before anything is encoded.

    The attention is the one ``loaded`` runs: loading already applied ``config.attention``, or else the model's
    own (bidirectional for LLM2Vec adapters, see :mod:`layer_mteb.model.adapters`; causal for other decoders); a
    config asking for the other one is an error. The memory budget is ``config.max_cache_memory`` or, measured
    now that the model takes its memory, the automatic one.
    """
    return RunSettings(
        encode=with_model_attention(config, loaded),
        budget=resolve_budget(config.max_cache_memory, config.device),
        eval_workers=eval_workers,
        data=data,
        data_fingerprint=data_fingerprint,
    )
