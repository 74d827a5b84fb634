"""How many blocks a model has, read without loading it: a packaged model's from the package's table, a folder's from
its ``config.json``, a GGUF file's from its header (the metadata before the tensors). So ``--layers 99`` and
``export --layer 99`` are refused in a fraction of a second, not after the weights load; a model whose depth cannot be
read cheaply (a hub id, a PEFT adapter) is checked once it loads, as before.

The GGUF header is read as the format's specification lays it out (github.com/ggml-org/ggml, docs/gguf.md): magic,
version, tensor count, metadata count, then the metadata entries (a key, a value type, a value), of which
``general.architecture`` and ``<architecture>.block_count`` are the ones read here.
"""

from __future__ import annotations

import struct
from pathlib import Path
from typing import BinaryIO

from layer_mteb.model.names import PACKAGED_MODELS, config_int, model_kind

#: the config keys that count a model's blocks (``n_layer``: GPT-2; ``num_layers``: a few others)
_DEPTH_KEYS = ("num_hidden_layers", "n_layer", "num_layers")
#: GGUF value types of a fixed size: type -> struct format (little-endian)
_GGUF_SCALARS = {0: "<B", 1: "<b", 2: "<H", 3: "<h", 4: "<I", 5: "<i", 6: "<f", 7: "<?", 10: "<Q", 11: "<q", 12: "<d"}
_GGUF_STRING, _GGUF_ARRAY = 8, 9
#: metadata entries read before giving up (the depth comes among the first in every file seen)
_GGUF_MAX_ENTRIES = 4096


def known_depth(name: str) -> int | None:
    """The number of blocks of the model ``--model`` names (layers 0..depth) where it is known without loading the
    weights, else None."""
    kind = model_kind(name)
    if kind == "packaged":
        return PACKAGED_MODELS[name].n_layers or None
    path = Path(name).expanduser()
    if kind == "gguf":
        return gguf_depth(path)
    if kind == "folder" and not (path / "adapter_config.json").is_file():
        return config_depth(path / "config.json")
    return None


def config_depth(config: Path) -> int | None:
    """The block count a transformers ``config.json`` declares (its own or its ``text_config``'s), or None."""
    return config_int(config, _DEPTH_KEYS)


def gguf_depth(path: Path) -> int | None:
    """``<architecture>.block_count`` of a GGUF file's header, or None where the file does not say it (or is no
    GGUF file of version 2 or later)."""
    try:
        with path.open("rb") as file:
            magic, version, _, entries = struct.unpack("<4sIQQ", file.read(24))  # _: the tensor count
            if magic != b"GGUF" or version < 2:
                return None
            architecture = None
            for _ in range(min(entries, _GGUF_MAX_ENTRIES)):
                key, value = _string(file), _value(file, _read(file, "<I"))
                if key == "general.architecture":
                    architecture = value
                elif architecture is not None and key == f"{architecture}.block_count" and isinstance(value, int):
                    return value
    except (OSError, struct.error, UnicodeDecodeError, ValueError):
        return None
    return None


def _read(file: BinaryIO, form: str) -> int:
    """One value of ``form``; a header that ends early is a ``struct.error``."""
    return struct.unpack(form, file.read(struct.calcsize(form)))[0]


def _string(file: BinaryIO) -> str:
    return file.read(_read(file, "<Q")).decode("utf-8")


def _value(file: BinaryIO, kind: int) -> object:
    """One metadata value; an array is skipped (None): the depth is never one."""
    if kind in _GGUF_SCALARS:
        return _read(file, _GGUF_SCALARS[kind])
    if kind == _GGUF_STRING:
        return _string(file)
    if kind != _GGUF_ARRAY:
        raise ValueError(f"unknown GGUF value type {kind}")
    item, count = _read(file, "<I"), _read(file, "<Q")
    if item in _GGUF_SCALARS:
        file.seek(count * struct.calcsize(_GGUF_SCALARS[item]), 1)
    else:
        for _ in range(count):
            _value(file, item)
    return None
