"""Every place layer_mteb leans on transformers internals, gathered here so a transformers upgrade breaks one module.

Each function is one workaround: its docstring says which transformers behaviour it relies on and why it is needed;
``tests/model/test_compat.py`` holds a guard per workaround that fails loudly when transformers changes underneath.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from torch import nn


def install_output_hooks(model: nn.Module) -> None:
    """Install transformers' hidden-state hooks on every block before :func:`first_blocks` hides the deeper ones.

    transformers >= 5 records ``output_hidden_states`` with hooks it installs on the first forward that asks for
    them (the private ``transformers.utils.output_capturing.maybe_install_capturing_hooks``). That must happen while
    every block is in place, or later full forwards would miss the blocks left out during an early stop. Older
    versions collect hidden states in the forward loop itself and have nothing to install.
    """
    try:
        from transformers.utils.output_capturing import maybe_install_capturing_hooks
    except ImportError:
        return
    maybe_install_capturing_hooks(model)


def drop_gguf_quantizer(model: nn.Module) -> None:
    """Mark a model loaded from a GGUF file as plain weights, so ``save_pretrained`` accepts it.

    transformers dequantises GGUF weights into ordinary tensors on load but keeps a GGUF quantizer on the model
    (``model.hf_quantizer``) and a ``quantization_config`` in its config; the quantizer says it is not serializable,
    and ``save_pretrained`` refuses. Both markers are dropped; the weights are untouched.
    """
    model.hf_quantizer = None
    model.config.__dict__.pop("quantization_config", None)


def commit_hash(model: nn.Module, hub_id: str) -> str | None:
    """The hub commit a model was loaded from, so results name the exact weights scored.

    transformers < 5.18 kept it in the private ``config._commit_hash``; 5.18 dropped it. The hub cache names
    each snapshot folder by its commit, so the folder ``config.json`` was read from gives it.
    """
    value: Any = getattr(model.config, "_commit_hash", None)
    if value:
        return value
    from huggingface_hub import try_to_load_from_cache

    path = try_to_load_from_cache(hub_id, "config.json")
    return Path(path).parent.name if isinstance(path, str) else None


def attention_implementation(model: nn.Module) -> str | None:
    """The attention implementation a loaded model runs (``"eager"``, ``"sdpa"``, ...), or None when it has none.

    transformers resolves the ``attn_implementation`` a model was asked for when it loads and keeps the result only
    in the private ``config._attn_implementation``; there is no public accessor.
    """
    return getattr(model.config, "_attn_implementation", None)


def hub_file(source: str, filename: str, revision: str | None, *, unreachable_ok: bool = False) -> str | None:
    """The local path of ``filename`` of hub repo ``source`` (from the cache, or downloaded), or None when the repo has
    no such file (and, with ``unreachable_ok``, when the hub cannot be reached and the file is not cached).

    transformers' ``cached_file`` raises in both cases unless given its private switches
    ``_raise_exceptions_for_missing_entries`` and ``_raise_exceptions_for_connection_errors``.
    """
    from transformers.utils import cached_file

    return cached_file(
        source,
        filename,
        revision=revision,
        _raise_exceptions_for_missing_entries=False,
        _raise_exceptions_for_connection_errors=not unreachable_ok,
    )


def snapshot_commit(path: str) -> str | None:
    """The hub commit of a file in the hub cache (the ``snapshots/<commit>/`` folder it lies in), or None.

    Read with transformers' ``utils.hub.extract_commit_hash``, an undocumented helper, so that a cache layout change
    is met the way transformers itself meets it.
    """
    from transformers.utils.hub import extract_commit_hash

    return extract_commit_hash(path, None)
