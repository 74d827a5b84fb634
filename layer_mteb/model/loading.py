"""Loading a model by hub id, local folder, GGUF file or packaged short name into a :class:`LoadedModel`.

Packaged models are real models shipped inside PyPI packages (usable with no hub access); GGUF files are
dequantised once into an HF folder under :func:`~layer_mteb.common.files.cache_root`.
"""

from __future__ import annotations

import atexit
import json
import logging
import shutil
import tempfile
from collections.abc import Mapping
from dataclasses import replace
from pathlib import Path
from typing import Any

from safetensors import SafetensorError

from layer_mteb.common.config import EncodeConfig
from layer_mteb.common.errors import UserError, first_line
from layer_mteb.common.files import building, cache_root, content_hash
from layer_mteb.model.adapters import find_adapter_chain, merge_adapters
from layer_mteb.model.architectures import LoadedModel, architecture_of, wrap_model
from layer_mteb.model.compat import commit_hash, drop_gguf_quantizer
from layer_mteb.model.names import (
    PACKAGED_MODELS,
    check_loadable,
    installed_folder,
    installed_packaged,
    model_kind,
    packaged_name,
    recorded_name,
)

__all__ = ["PACKAGED_MODELS", "load_model", "packaged_folder"]

logger = logging.getLogger(__name__)


def load_model(
    name: str,
    config: EncodeConfig | None = None,
    *,
    revision: str | None = None,
    trust_remote_code: bool = False,
    tokenizer: Mapping[str, Any] | None = None,
) -> LoadedModel:
    """Load ``name``: a packaged short name (see :data:`PACKAGED_MODELS`), a GGUF file, a local folder or a hub id
    (a PEFT adapter chain too), with the attention ``config`` asks for; ``tokenizer``: arguments the tokenizer is
    made with (an mteb loader's, e5-mistral's ``add_eos_token``), as sentence-transformers' ``tokenizer_kwargs``."""
    config = config or EncodeConfig()
    source, display_name, revision = _resolve(name, revision)  # a name that cannot load: before torch
    from transformers import AutoConfig, AutoModel, AutoTokenizer

    from layer_mteb.model.attention import set_attention

    chain = find_adapter_chain(source, revision)
    if chain is not None and tokenizer:
        raise UserError(f"{name!r}: a PEFT adapter chain is loaded with its own tokenizer, not with {dict(tokenizer)}")
    if chain is not None:  # a PEFT adapter (an LLM2Vec model, say): load its base, merge the adapters in
        base_config = replace(config, attention=None)
        try:
            base = load_model(
                chain.base, base_config, revision=chain.base_revision, trust_remote_code=trust_remote_code
            )
        except UserError as err:
            raise UserError(f"base model of adapter {chain.adapters[0].source!r}: {err}") from None
        return merge_adapters(base, chain, config, name=display_name, trust_remote_code=trust_remote_code)
    kwargs: dict[str, Any] = {"trust_remote_code": trust_remote_code}
    if revision is not None and not Path(source).exists():
        kwargs["revision"] = revision
    try:
        # an architecture not in the table is refused before the weights load
        architecture_of(AutoConfig.from_pretrained(source, **kwargs).model_type, f" of {name!r}")
        made_tokenizer = AutoTokenizer.from_pretrained(source, **kwargs, **dict(tokenizer or {}))
        placement = device_placement(config.device_map) if config.device_map else {}
        model = AutoModel.from_pretrained(source, dtype=config.torch_dtype, **placement, **kwargs)
    except (OSError, ValueError, RuntimeError, SafetensorError) as err:
        raise UserError(f"cannot load model {name!r}: {first_line(err)}") from None
    if not config.device_map:
        model.to(config.device)
    revision = revision if revision is not None else commit_hash(model, source) or "no_revision_available"
    loaded = wrap_model(model, made_tokenizer, name=display_name, revision=revision)
    if config.attention is not None:
        set_attention(loaded, config.attention)
    return loaded


def device_placement(device_map: str) -> dict[str, Any]:
    """``from_pretrained``'s placement for ``--device-map``: an accelerate strategy (``auto``, ...) or device, or a
    JSON file of module name -> device (``"disk"``: offloaded to a temporary folder under the cache)."""
    if not device_map.endswith(".json"):
        return {"device_map": device_map}
    try:
        mapping = json.loads(Path(device_map).read_text())
    except (OSError, ValueError) as err:
        raise UserError(f"--device-map {device_map}: cannot read a JSON device map ({first_line(err)})") from None
    if not isinstance(mapping, dict) or not all(isinstance(v, (int, str)) for v in mapping.values()):
        raise UserError(f"--device-map {device_map}: a device map is a JSON object of module name -> device")
    placement: dict[str, Any] = {"device_map": mapping}
    if "disk" in mapping.values():
        (cache_root() / "offload").mkdir(parents=True, exist_ok=True)
        folder = tempfile.mkdtemp(dir=cache_root() / "offload")
        atexit.register(shutil.rmtree, folder, ignore_errors=True)  # offloaded weights are a copy: gone with us
        placement["offload_folder"] = folder
    return placement


def load_scored_model(name: str, revision: str, config: EncodeConfig, model: str | None = None) -> LoadedModel:
    """The model a results table names (``name`` at ``revision``): ``model`` when given, else the packaged model of
    that hub id and revision, else the hub id."""
    source = model or packaged_name(name, revision) or name
    return load_model(source, config, revision=None if model else revision)


def packaged_folder(name: str) -> Path:
    """The HF folder a packaged model loads from (a GGUF one is dequantised into the cache once)."""
    gguf_file = PACKAGED_MODELS[name].gguf_file
    folder = installed_folder(name)
    return Path(_gguf_as_folder(folder / gguf_file)) if gguf_file else folder


def _resolve(name: str, revision: str | None) -> tuple[str, str, str | None]:
    """-> (folder or hub id, mteb display name, revision); a GGUF file is dequantised into a folder first."""
    kind = model_kind(name)
    if kind == "hub" and revision is None and (short := installed_packaged(name)) is not None:
        # offline, the installed packaged model with this hub id is loaded instead, said in one INFO line
        gguf_file = PACKAGED_MODELS[short].gguf_file
        weights = f" (its quantisation {gguf_file}, not the hub's weights)" if gguf_file else ""
        logger.info("the hub is offline: loading %s from the installed packaged model %s%s", name, short, weights)
        return _resolve(short, None)
    if kind == "hub":
        check_loadable(name, revision)
        return name, name, revision
    display_name, packaged_revision = recorded_name(name)
    if kind == "packaged":
        return str(packaged_folder(name)), display_name, packaged_revision
    path = Path(name).expanduser()
    folder = _gguf_as_folder(path) if kind == "gguf" else str(path)
    return folder, display_name, revision or content_hash(path)


def _gguf_as_folder(gguf_path: Path) -> str:
    """Dequantise a GGUF file once into an HF folder: later loads take a fraction of a second instead of minutes."""
    from transformers import AutoModel, AutoTokenizer

    try:
        import gguf  # noqa: F401
    except ImportError:
        raise UserError("loading a GGUF file needs the gguf package: pip install gguf") from None
    target = cache_root() / "models" / f"gguf-{content_hash(gguf_path)}"
    if not (target / "config.json").exists():
        try:
            model = AutoModel.from_pretrained(gguf_path.parent, gguf_file=gguf_path.name)
            tokenizer = AutoTokenizer.from_pretrained(gguf_path.parent, gguf_file=gguf_path.name)
        except (OSError, ValueError, RuntimeError) as err:
            raise UserError(f"cannot read GGUF file {str(gguf_path)!r}: {first_line(err)}") from None
        drop_gguf_quantizer(model)  # the weights are plain dequantised tensors now
        with building(target) as folder:
            model.save_pretrained(folder)
            tokenizer.save_pretrained(folder)
    return str(target)
