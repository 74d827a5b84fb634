"""A sentence-transformers model's own pipeline (pooling mode, ``Normalize``, maximum length), read from the files
sentence-transformers reads (no torch), so ``--protocol model`` scores it as ``SentenceTransformer(folder)`` encodes.
"""

from __future__ import annotations

import functools
import json
import logging
from contextlib import suppress
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal, get_args

from layer_mteb.common.config import DTYPES
from layer_mteb.common.errors import UserError, first_line
from layer_mteb.common.pooling import POOLING_MODES
from layer_mteb.model.names import PACKAGED_MODELS, check_loadable, installed_folder, installed_packaged, model_kind

logger = logging.getLogger(__name__)

#: ``model``: a sentence-transformers model's own pipeline where it has one; ``paper``: the paper's settings for all
Protocol = Literal["model", "paper"]
PROTOCOLS: tuple[str, ...] = get_args(Protocol)
#: tokenizers without a length say so with a huge ``model_max_length`` (transformers' VERY_LARGE_INTEGER)
_NO_LENGTH = 10**6
#: the sentence-transformers ``pooling_mode`` names (6.x) and ``pooling_mode_*`` flags (before) of each mode here
_ST_MODES = {mode.sentence_transformers: name for name, mode in POOLING_MODES.items()}
_ST_MODE_NAMES = {"mean": "mean", "cls": "first", "lasttoken": "last"}


@dataclass(frozen=True)
class Pipeline:
    """What a sentence-transformers ``folder`` does after the transformer: pooling, normalize, max length."""

    folder: str
    pooling: str
    normalize: bool
    max_length: int | None

    def settings(self) -> dict[str, Any]:
        """The encode settings it decides (``max_length`` only where the folder says one)."""
        values: dict[str, Any] = {"pooling": self.pooling, "normalize": self.normalize}
        return values if self.max_length is None else {**values, "max_length": self.max_length}


def model_pipeline(name: str, revision: str | None = None) -> Pipeline | None:
    """The pipeline of the model ``--model`` names (a hub model's via the hub cache); None for a model without
    ``modules.json``, a GGUF file or a hub model whose files cannot be had."""
    kind = model_kind(name)
    if kind == "gguf":
        return None
    if kind == "packaged":
        return None if PACKAGED_MODELS[name].gguf_file else read_pipeline(installed_folder(name))
    if kind == "folder":
        return read_pipeline(Path(name).expanduser())
    if revision is None and (short := installed_packaged(name)) is not None:
        return model_pipeline(short)
    check_loadable(name, revision)  # a hub id that cannot load is one line here, before its files are asked for
    return _hub_pipeline(name, revision)


def read_pipeline(folder: Path) -> Pipeline | None:
    """The pipeline ``folder`` declares, or None without ``modules.json``; a module the layers cannot reproduce (a
    ``Dense`` projection, another pooling mode) is one :class:`UserError`."""
    if (modules := _json(folder / "modules.json")) is None:
        return None
    kinds = [str(m.get("type", "")).rsplit(".", 1)[-1] for m in modules if isinstance(m, dict)]
    paths = {kind: str(m.get("path", "")) for kind, m in zip(kinds, modules, strict=True)}
    extra = [k for k in kinds if k not in ("Transformer", "Pooling", "Normalize")]
    if extra or "Pooling" not in kinds:
        what = ", ".join(extra) if extra else "no Pooling module"
        raise UserError(
            f"the sentence-transformers pipeline of {folder} has {what}, which a layer's pooled vectors cannot pass "
            "through: give --protocol paper, or --pooling/--max-length/--normalize yourself"
        )
    pooling = _pooling_mode(folder, _json(folder / paths["Pooling"] / "config.json") or {})
    transformer = _json(folder / paths.get("Transformer", "") / "sentence_bert_config.json") or {}
    modalities = transformer.get("modality_config")
    if isinstance(modalities, dict) and "message" in modalities:
        raise UserError(
            f"the sentence-transformers pipeline of {folder} renders texts through its chat template (a 'message' "
            "modality), which the layers do not: give --protocol paper, or --pooling/--max-length/--normalize yourself"
        )
    return Pipeline(str(folder), pooling, "Normalize" in kinds, _max_length(folder))


def _pooling_mode(folder: Path, config: dict) -> str:
    mode = config.get("pooling_mode")
    if isinstance(mode, str):
        name = _ST_MODE_NAMES.get(mode)
    else:
        on = [k.removeprefix("pooling_mode_") for k, v in config.items() if k.startswith("pooling_mode_") and v is True]
        mode = "+".join(on) or "none"
        name = _ST_MODES.get(on[0]) if len(on) == 1 else None
    if name is None:
        raise UserError(
            f"the pooling mode {mode!r} of {folder} is not one of the modes here ({', '.join(POOLING_MODES)}): give "
            "--pooling, or --protocol paper"
        )
    if config.get("include_prompt") is False:
        raise UserError(
            f"{folder} pools without its prompt tokens (include_prompt: false), which the layers cannot: give "
            "--protocol paper, or --prompts none"
        )
    return name


def _max_length(folder: Path) -> int | None:
    """Where sentence-transformers truncates: ``max_seq_length`` (up to 5.x), else the tokenizer's
    ``model_max_length`` capped at ``max_position_embeddings``; else None."""
    length = (_json(folder / "sentence_bert_config.json") or {}).get("max_seq_length")
    if not isinstance(length, int):
        length = (_json(folder / "tokenizer_config.json") or {}).get("model_max_length")
        length = int(length) if isinstance(length, int | float) and length < _NO_LENGTH else None
        positions = (_json(folder / "config.json") or {}).get("max_position_embeddings")
        if length is not None and isinstance(positions, int):
            length = min(length, positions)
    return length if isinstance(length, int) and length > 0 else None


def checkpoint_dtype(folder: Path) -> str:
    """The dtype a checkpoint's ``config.json`` stores its weights in (what ``dtype="auto"`` loads), float32 where it
    says none; one of the dtypes a run computes in, else one line."""
    config = _json(folder / "config.json") or {}
    dtype = str(config.get("dtype") or config.get("torch_dtype") or "float32").removeprefix("torch.")
    if dtype not in DTYPES:
        raise UserError(f"{folder} stores its weights in {dtype}, which a run cannot compute in: give --dtype")
    return dtype


def _json(path: Path) -> Any:
    if not path.is_file():
        return None
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as err:
        raise UserError(f"cannot read {path}: {first_line(err)}") from None


#: the files :func:`read_pipeline` reads, fetched into the hub cache for a hub model
PIPELINE_FILES = ("modules.json", "sentence_bert_config.json", "tokenizer_config.json", "config.json")


@functools.cache  # a command resolves its settings more than once: the hub is asked, and the lack said, once
def _hub_pipeline(name: str, revision: str | None) -> Pipeline | None:
    """A hub model's pipeline from its small files in the hub cache; None without ``modules.json``."""
    from huggingface_hub import hf_hub_download
    from huggingface_hub.errors import EntryNotFoundError, HfHubHTTPError, LocalEntryNotFoundError

    missing = (EntryNotFoundError, LocalEntryNotFoundError, HfHubHTTPError, OSError, ValueError)
    try:
        modules_file = Path(hf_hub_download(name, "modules.json", revision=revision))
    except missing:
        logger.info("%s: no sentence-transformers pipeline found (no modules.json): the paper's settings apply", name)
        return None
    modules = _json(modules_file) or []
    pooling = next((m.get("path", "") for m in modules if str(m.get("type", "")).endswith("Pooling")), None)
    for file in [*PIPELINE_FILES[1:], *([f"{pooling}/config.json"] if pooling else [])]:
        with suppress(*missing):
            hf_hub_download(name, file, revision=revision)
    return read_pipeline(modules_file.parent)
