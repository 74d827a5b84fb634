"""The prompts a model is scored with: its sentence-transformers folder's (or mteb registry's), a user's mapping
(``--prompts FILE``, replacing the model's as mteb's ``model_prompts`` does) or none, picked per task and prompt type by
mteb's own ``get_prompt_name`` and put before the text (``prompt + text``), so the vector cache never mixes the two.
"""

from __future__ import annotations

import json
import warnings
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path
from typing import Any

from layer_mteb.common.errors import UserError, first_line
from layer_mteb.common.files import text_hash
from layer_mteb.common.instructions import registry_meta

ST_CONFIG = "config_sentence_transformers.json"
NONE = "none"


@dataclass(frozen=True)
class Prompts:
    """Prompt name -> text, the name used where no rule matches (``default_name``), and their ``source``."""

    prompts: tuple[tuple[str, str], ...]
    default_name: str | None = None
    source: str = "model"

    @property
    def mapping(self) -> dict[str, str]:
        """Prompt name -> text."""
        return dict(self.prompts)

    @cached_property
    def _checked(self) -> dict[str, str]:
        """The prompts mteb's wrapper looks names up in: those whose keys pass mteb's check (others are ignored)."""
        from mteb.models.abs_encoder import AbsEncoder

        with warnings.catch_warnings():  # mteb also logs each ignored key, once
            warnings.simplefilter("ignore")
            valid, _ = AbsEncoder.validate_task_to_prompt_name(self.mapping, raise_for_invalid_keys=False)
        return dict(valid or {})

    def text_for(self, task_metadata: Any, prompt_type: Any) -> str:
        """The prompt before each text of ``task_metadata`` as ``prompt_type``, by mteb's ``get_prompt_name``, else the
        default prompt, else ""."""
        from mteb.models.abs_encoder import get_prompt_name

        name = get_prompt_name(self._checked, task_metadata, prompt_type)
        return self._checked[name] if name is not None else self.mapping.get(self.default_name, "")

    def digest(self) -> str:
        """Short hash of what changes the texts: part of the vector store's key and of mteb's experiment."""
        return text_hash(sorted(self.prompts), self.default_name)

    def record(self) -> dict[str, object]:
        """The prompts as ``run.json`` states them."""
        return {"source": self.source, "prompts": self.mapping, "default_prompt_name": self.default_name}

    @classmethod
    def from_record(cls, record: dict) -> Prompts:
        """The prompts a :meth:`record` (``run.json``'s) states."""
        mapping = {str(k): str(v) for k, v in (record.get("prompts") or {}).items()}
        source = str(record.get("source", "model"))
        return cls(tuple(sorted(mapping.items())), record.get("default_prompt_name"), source)


def model_prompts(folder: str | Path | None) -> Prompts | None:
    """The prompts a sentence-transformers model folder declares, or None (no such file, or no prompts)."""
    if folder is None or not (Path(folder) / ST_CONFIG).is_file():
        return None
    path = Path(folder) / ST_CONFIG
    try:
        config = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as err:
        raise UserError(f"cannot read the prompts of {path}: {first_line(err)}") from None
    prompts = {k: v for k, v in (config.get("prompts") or {}).items() if isinstance(v, str) and v}
    default = config.get("default_prompt_name")
    if not prompts:
        return None
    return Prompts(tuple(sorted(prompts.items())), default if isinstance(default, str) else None)


def read_prompts_file(path: str | Path) -> dict[str, str]:
    """``--prompts FILE``: a JSON or YAML mapping of prompt name to text; every mistake is one line."""
    import yaml

    path = Path(path)
    try:
        raw = yaml.safe_load(path.read_text(encoding="utf-8"))  # JSON is YAML
    except (OSError, yaml.YAMLError, UnicodeDecodeError) as err:
        raise UserError(f"cannot read --prompts {str(path)!r}: {first_line(err)}") from None
    if not isinstance(raw, dict) or not all(isinstance(k, str) and isinstance(v, str) for k, v in raw.items()):
        raise UserError(f"--prompts {str(path)!r} must map prompt names to prompt texts (strings)")
    return raw


def registry_prompts(name: str | None) -> dict[str, str] | None:
    """The ``model_prompts`` mteb's registry gives model ``name`` through its sentence-transformers wrapper (E5's
    ``query: ``, ...), or None (other loaders apply prompts their own way)."""
    meta = registry_meta(name) if name else None
    if meta is None:
        return None
    from mteb.models.sentence_transformer_wrapper import SentenceTransformerEncoderWrapper

    loader = meta.loader
    if not (isinstance(loader, type) and issubclass(loader, SentenceTransformerEncoderWrapper)):
        return None
    prompts = (meta.loader_kwargs or {}).get("model_prompts") or {}
    return {str(k): str(v) for k, v in prompts.items() if v} or None


def choose_prompts(asked: str | None, model_folder: str | Path | None, name: str | None = None) -> Prompts | None:
    """The prompts a run applies: ``asked`` None for the model's own (the registry's over its folder's, as in mteb),
    ``none``, or file ``asked``'s mapping in place of the model's (its ``default_prompt_name`` stays)."""
    if asked is not None and asked.strip().lower() == NONE:
        return None
    own = model_prompts(model_folder)
    default = own.default_name if own is not None else None
    if asked is None:
        registered = registry_prompts(name)
        return own if registered is None else Prompts(tuple(sorted(registered.items())), default, "mteb registry")
    mapping = {k: v for k, v in read_prompts_file(asked).items() if v}
    return Prompts(tuple(sorted(mapping.items())), default, str(asked)) if mapping else None


def model_folder(name_or_path: str, revision: str | None = None) -> Path | None:
    """The folder of a loaded model's ``config_sentence_transformers.json`` (a hub model's: in the cache), or None."""
    if Path(name_or_path).is_dir():
        return Path(name_or_path)
    try:
        from huggingface_hub import try_to_load_from_cache

        found = try_to_load_from_cache(name_or_path, ST_CONFIG, revision=revision)
    except (ValueError, OSError):  # not a repository id
        return None
    return Path(found).parent if isinstance(found, str) else None
