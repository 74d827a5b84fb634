"""Every transformers internal layer_mteb leans on, here so a transformers upgrade breaks one module
(``tests/model/test_compat.py`` guards each workaround).
"""

from __future__ import annotations

from pathlib import Path

from torch import nn


def install_output_hooks(model: nn.Module) -> None:
    """Install transformers' hidden-state hooks on every block before :func:`first_blocks` hides the deeper ones:
    transformers >= 5 installs them (privately) on the first forward that asks, which would miss hidden blocks."""
    try:
        from transformers.utils.output_capturing import maybe_install_capturing_hooks
    except ImportError:
        return
    maybe_install_capturing_hooks(model)


def drop_gguf_quantizer(model: nn.Module) -> None:
    """Mark a model loaded from GGUF as the plain weights transformers dequantised it to: its leftover quantizer
    says it is not serializable, and ``save_pretrained`` would refuse."""
    model.hf_quantizer = None
    model.config.__dict__.pop("quantization_config", None)


def commit_hash(model: nn.Module, hub_id: str) -> str | None:
    """The hub commit a model was loaded from: ``config._commit_hash`` before transformers 5.18, else the name of the
    snapshot folder ``config.json`` was read from."""
    if value := getattr(model.config, "_commit_hash", None):
        return value
    from huggingface_hub import try_to_load_from_cache

    path = try_to_load_from_cache(hub_id, "config.json")
    return Path(path).parent.name if isinstance(path, str) else None


def attention_implementation(model: nn.Module) -> str | None:
    """The attention implementation a loaded model runs (``"sdpa"``, ...), or None: only kept privately."""
    return getattr(model.config, "_attn_implementation", None)


def hub_file(source: str, filename: str, revision: str | None, *, unreachable_ok: bool = False) -> str | None:
    """The local path of ``filename`` of hub repo ``source``, or None when it has no such file (or, with
    ``unreachable_ok``, the hub is unreachable and it is not cached): ``cached_file``'s private switches."""
    from transformers.utils import cached_file

    return cached_file(
        source,
        filename,
        revision=revision,
        _raise_exceptions_for_missing_entries=False,
        _raise_exceptions_for_connection_errors=not unreachable_ok,
    )


def snapshot_commit(path: str) -> str | None:
    """The hub commit of a file in the hub cache, or None, read as transformers reads it (an undocumented function)."""
    from transformers.utils.hub import extract_commit_hash

    return extract_commit_hash(path, None)
