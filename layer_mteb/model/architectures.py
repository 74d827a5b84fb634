"""The one table of architectures (:data:`ARCHITECTURES`: kind, blocks, final norm), and the loaded model seen through
it; an unknown architecture is a clear error, not a guess.
"""

from __future__ import annotations

import copy
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from operator import attrgetter
from typing import Any, Literal

import torch
from torch import nn

from layer_mteb.common.errors import UserError
from layer_mteb.model.compat import install_output_hooks
from layer_mteb.model.placement import model_devices

ModelKind = Literal["causal", "encoder", "ssm"]


@dataclass(frozen=True)
class Architecture:
    """Where a base model (``AutoModel``) keeps its blocks and final norm; ``embeddings_first=False``: Mamba's
    hidden states start at block 1 (:meth:`LoadedModel.hidden_states` rebuilds the usual tuple)."""

    kind: ModelKind
    blocks: str
    final_norm: str | None
    embeddings_first: bool = True


_DECODER = Architecture("causal", "layers", "norm")
_BERT_LIKE = Architecture("encoder", "encoder.layer", None)
_SSM = Architecture("ssm", "layers", "norm_f", embeddings_first=False)

#: ``config.model_type`` -> architecture, the families that share a layout on its line. Add a type to its layout's
#: line (or a line of its own) to support a new family.
ARCHITECTURES: dict[str, Architecture] = {
    "gpt2": Architecture("causal", "h", "ln_f"),
    "gpt_neox": Architecture("causal", "layers", "final_layer_norm"),
    **dict.fromkeys(("llama", "mistral", "qwen2", "qwen3", "gemma", "gemma2", "gemma3_text"), _DECODER),
    **dict.fromkeys(("bert", "roberta", "xlm-roberta", "mpnet"), _BERT_LIKE),
    **dict.fromkeys(("mamba", "mamba2"), _SSM),
}


@dataclass
class LoadedModel:
    """A base model with its tokenizer, identity (mteb-style ``org/model`` name + revision) and architecture."""

    model: nn.Module
    tokenizer: Any
    name: str
    revision: str
    architecture: Architecture

    @property
    def blocks(self) -> nn.ModuleList:
        """The model's blocks in order: block k's output is layer k."""
        return self.model.get_submodule(self.architecture.blocks)

    @property
    def n_layers(self) -> int:
        """Blocks, so layers 0..n_layers (0: the embeddings)."""
        return len(self.blocks)

    @property
    def final_norm(self) -> nn.Module | None:
        path = self.architecture.final_norm
        return None if path is None else self.model.get_submodule(path)

    @property
    def hidden_size(self) -> int:
        return int(self.model.config.hidden_size)

    @property
    def device(self) -> torch.device:
        """Where inputs go: the first device the model computes on (under a device map, its first GPU)."""
        return model_devices(self.model)[0]

    @property
    def forward_options(self) -> dict[str, bool]:
        """Keyword arguments for every forward: no KV or state cache for decoders and SSMs (nothing is generated)."""
        return {"use_cache": False} if self.architecture.kind != "encoder" else {}

    def hidden_states(self, **inputs: Any) -> tuple[torch.Tensor, ...]:
        """The L+1 hidden states of one forward, for every family: ``[0]`` the embeddings, ``[k]`` block k's output,
        the last after the final norm."""
        states = self.model(**inputs, output_hidden_states=True).hidden_states
        if self.architecture.embeddings_first:
            return states
        # (block 1, ..., block L, norm(block L)) -> (embeddings, block 1, ..., block L-1, norm(block L))
        embeddings = self.model.get_input_embeddings()(inputs["input_ids"])
        return (embeddings, *states[:-2], states[-1])


@contextmanager
def first_blocks(model: LoadedModel, depth: int) -> Iterator[None]:
    """Run only the first ``depth`` blocks, the final norm off (the readout applies it): states 0..depth are the full
    model's (right padding, no cache). Swapped back on exit; the weights are shared."""
    install_output_hooks(model.model)
    stand_ins: dict[str, Any] = {model.architecture.blocks: nn.ModuleList(list(model.blocks)[:depth])}
    if model.architecture.final_norm is not None:
        stand_ins[model.architecture.final_norm] = nn.Identity()
    with swapped(model.model, stand_ins):
        yield


@contextmanager
def swapped(owner: Any, stand_ins: Mapping[str, Any]) -> Iterator[None]:
    """Set the attributes of ``owner`` at the dotted paths ``stand_ins`` names (a block list, ``config.x``) to its
    values for a while: the originals are put back on exit, whatever happened inside."""
    originals = {path: attrgetter(path)(owner) for path in stand_ins}
    try:
        for path, stand_in in stand_ins.items():
            _set(owner, path, stand_in)
        yield
    finally:
        for path, original in originals.items():
            _set(owner, path, original)


def _set(owner: Any, dotted: str, value: Any) -> None:
    """Set the attribute at ``dotted`` below ``owner`` (of a submodule, or of the model's config) to ``value``."""
    parent, _, name = dotted.rpartition(".")
    setattr(attrgetter(parent)(owner) if parent else owner, name, value)


def wrap_model(model: nn.Module, tokenizer: Any, *, name: str, revision: str = "no_revision_available") -> LoadedModel:
    """Wrap an already-built model (e.g. a test's tiny ``from_config`` one) as ``load_model`` does; the caller's
    tokenizer is copied, not changed, when it needs right padding or a pad token."""
    model = getattr(model, "base_model", model)
    architecture = architecture_of(model.config.model_type)
    return LoadedModel(model.eval(), _right_padding(tokenizer), _mteb_name(name), revision, architecture)


def architecture_of(model_type: str, of: str = "") -> Architecture:
    """The table's entry for ``model_type``, else one line naming the known ones (``of``: whose type it is)."""
    if model_type not in ARCHITECTURES:
        known = ", ".join(sorted(ARCHITECTURES))
        raise UserError(f"architecture {model_type!r}{of} is not supported yet (known: {known})")
    return ARCHITECTURES[model_type]


def _right_padding(tokenizer: Any) -> Any:
    """A tokenizer padding on the right (exact for absolute positions) with a pad token (causal ones often lack it)."""
    if tokenizer.padding_side == "right" and tokenizer.pad_token is not None:
        return tokenizer
    tokenizer = copy.deepcopy(tokenizer)
    tokenizer.padding_side = "right"
    if tokenizer.pad_token is None:
        fallback = tokenizer.eos_token or tokenizer.bos_token or tokenizer.unk_token
        if fallback is None:
            raise UserError("the tokenizer has no pad, eos, bos or unk token to pad with")
        tokenizer.pad_token = fallback
    return tokenizer


def _mteb_name(name: str) -> str:
    """mteb wants ``org/model``."""
    return name if name.count("/") == 1 else f"local/{name.replace('/', '__')}"
