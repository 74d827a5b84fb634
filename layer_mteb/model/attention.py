"""Causal or bidirectional self-attention for decoder models, with transformers' own switch (no model code).

LLM2Vec makes a decoder an encoder by letting every token attend to every real token: transformers 5's documented
``is_causal=False`` on the config makes the mask factories build a bidirectional mask that still masks padding (eager
and SDPA). Each attention module's own ``is_causal`` is switched too: SDPA falls back on it without padding. Gemma's
``use_bidirectional_attention`` is left alone: it also resizes Gemma 3's sliding window.
"""

from __future__ import annotations

from dataclasses import replace
from typing import TYPE_CHECKING

from layer_mteb.common.config import Attention, EncodeConfig
from layer_mteb.common.errors import UserError
from layer_mteb.model.compat import attention_implementation

if TYPE_CHECKING:
    from layer_mteb.model.architectures import LoadedModel

#: attention implementations checked to honour the switch (tests/model/test_attention.py runs each one)
SUPPORTED_IMPLEMENTATIONS = ("eager", "sdpa")


def attention_of(loaded: LoadedModel) -> Attention:
    """How ``loaded`` attends now: encoders always bidirectionally; decoders and SSMs causally unless switched."""
    if loaded.architecture.kind == "encoder":
        return "bidirectional"
    return "causal" if getattr(loaded.model.config, "is_causal", True) else "bidirectional"


def set_attention(loaded: LoadedModel, mode: Attention) -> None:
    """Make a decoder's self-attention ``mode``; encoders (bidirectional) and SSMs (causal) accept only their own."""
    if attention_of(loaded) == mode:
        return
    kind = loaded.architecture.kind
    if kind != "causal":
        what = "an encoder reads bidirectionally" if kind == "encoder" else "a state-space model reads causally"
        raise UserError(f"--attention {mode} does not apply to {loaded.name}: {what}; leave --attention unset")
    implementation = attention_implementation(loaded.model)
    if implementation not in SUPPORTED_IMPLEMENTATIONS:
        raise UserError(
            f"--attention {mode} is supported with attention implementations {', '.join(SUPPORTED_IMPLEMENTATIONS)}; "
            f"{loaded.name} uses {implementation!r}"
        )
    causal = mode == "causal"
    for module in loaded.model.modules():  # the model's config (and a sub-model's) first, then its attention modules
        if hasattr(module, "config"):
            module.config.is_causal = causal
        if isinstance(getattr(module, "is_causal", None), bool) and not getattr(module, "is_cross_attention", False):
            module.is_causal = causal


def with_model_attention(config: EncodeConfig, loaded: LoadedModel) -> EncodeConfig:
    """``config`` with ``attention`` filled in from the model, so keys name what ran; asking for the other mode than
    the model runs is an error (vectors would be keyed wrongly)."""
    actual = attention_of(loaded)
    if config.attention is not None and config.attention != actual:
        raise UserError(
            f"the settings ask for {config.attention} attention but {loaded.name} runs {actual} attention; "
            "load it with load_model(..., config) or call layer_mteb.model.attention.set_attention first"
        )
    return config if config.attention == actual else replace(config, attention=actual)
