"""PEFT adapter chains: a folder or hub id holding only an adapter, on a base that may be an adapter too (LLM2Vec's
``…-mntp-unsup-simcse`` on ``…-mntp`` on Llama 3). The ``base_model_name_or_path`` links are followed down to a plain
model, and each adapter merged with ``peft`` bottom up, so no adapter code runs at encode time.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from layer_mteb.common.config import Attention, EncodeConfig
from layer_mteb.common.errors import UserError, first_line
from layer_mteb.common.files import content_hash, text_hash
from layer_mteb.model.architectures import LoadedModel, wrap_model
from layer_mteb.model.attention import set_attention
from layer_mteb.model.compat import hub_file, snapshot_commit

ADAPTER_CONFIG = "adapter_config.json"
_MAX_LINKS = 16
_TOKENIZER_FILES = ("tokenizer_config.json", "tokenizer.json")


@dataclass(frozen=True)
class AdapterLink:
    """One adapter of a chain: a local folder or a hub id (at a revision)."""

    source: str
    revision: str | None
    llm2vec: bool

    @property
    def is_folder(self) -> bool:
        """Whether the adapter is a local folder."""
        return Path(self.source).expanduser().is_dir()

    @property
    def options(self) -> dict[str, str]:
        """``from_pretrained``'s revision argument: a hub adapter's pinned revision, none for a folder."""
        return {} if self.is_folder or self.revision is None else {"revision": self.revision}


@dataclass(frozen=True)
class AdapterChain:
    """A plain base model and the adapters on it, in the order they are applied (the base's own adapter first)."""

    base: str
    base_revision: str | None
    adapters: tuple[AdapterLink, ...]

    @property
    def attention(self) -> Attention:
        """LLM2Vec adapters were trained with bidirectional attention; any other adapter keeps its decoder causal."""
        return "bidirectional" if any(link.llm2vec for link in self.adapters) else "causal"


def find_adapter_chain(source: str, revision: str | None = None) -> AdapterChain | None:
    """The chain under ``source`` (a folder or hub id), or None when ``source`` is a plain model."""
    links: list[AdapterLink] = []
    current, current_revision = source, revision
    while (config := _read_json(current, ADAPTER_CONFIG, current_revision)) is not None:
        if len(links) >= _MAX_LINKS or any(link.source == current for link in links):
            raise UserError(f"the adapters under {source!r} name each other as base models in a loop")
        base = config.get("base_model_name_or_path")
        if not base:
            raise UserError(f"adapter {current!r} names no base model (base_model_name_or_path in {ADAPTER_CONFIG})")
        links.append(AdapterLink(current, current_revision, _is_llm2vec(current, current_revision)))
        if _looks_like_path(base) and not Path(base).expanduser().exists():
            raise UserError(f"adapter {current!r} names base model {base!r}, which does not exist")
        current, current_revision = base, config.get("revision")
    return AdapterChain(current, current_revision, tuple(reversed(links))) if links else None


def merge_adapters(
    base: LoadedModel, chain: AdapterChain, config: EncodeConfig, *, name: str, trust_remote_code: bool = False
) -> LoadedModel:
    """Merge ``chain``'s adapters in order onto ``base``, with the nearest tokenizer and ``config.attention`` or the
    chain's own."""
    model = base.model
    for link in chain.adapters:
        model = _merge_adapter(model, link, base.name)
    tokenizer = _nearest_tokenizer(chain, trust_remote_code) or base.tokenizer
    fingerprints = [_fingerprint(link) for link in chain.adapters]
    loaded = wrap_model(model, tokenizer, name=name, revision=text_hash(base.revision, *fingerprints))
    set_attention(loaded, config.attention or chain.attention)
    return loaded


def _merge_adapter(model: Any, link: AdapterLink, base_name: str) -> Any:
    """Apply one adapter with peft, check that every one of its weights found its module, and merge it."""
    from peft import PeftModel, get_peft_model_state_dict
    from peft.utils import load_peft_weights

    try:
        adapted = PeftModel.from_pretrained(model, link.source, **link.options)
        saved = set(load_peft_weights(link.source, **link.options))
    except (ValueError, RuntimeError, KeyError, OSError) as err:
        raise UserError(f"cannot apply adapter {link.source!r} to {base_name}: {first_line(err)}") from None
    placed = set(get_peft_model_state_dict(adapted))
    if not saved <= placed:
        raise UserError(
            f"adapter {link.source!r} does not fit {base_name}: {len(saved - placed)} of its {len(saved)} weights "
            f"have no matching module (e.g. {min(saved - placed)}); was it trained on another architecture?"
        )
    return adapted.merge_and_unload()


def _nearest_tokenizer(chain: AdapterChain, trust_remote_code: bool) -> Any | None:
    """The tokenizer of the adapter nearest the top that ships one (LLM2Vec's ``-mntp`` folders do)."""
    from transformers import AutoTokenizer

    for link in reversed(chain.adapters):
        if any(_locate(link.source, f, link.revision) for f in _TOKENIZER_FILES):
            return AutoTokenizer.from_pretrained(link.source, trust_remote_code=trust_remote_code, **link.options)
    return None


def _is_llm2vec(source: str, revision: str | None) -> bool:
    """An LLM2Vec adapter: by name, an ``llm2vec_config.json``, or their encoder class (``…EncoderModel``,
    ``…BiModel``)."""
    if Path(source.rstrip("/")).name.lower().startswith("llm2vec") or _locate(source, "llm2vec_config.json", revision):
        return True
    config = _read_json(source, "config.json", revision) or {}
    classes = [*(config.get("auto_map") or {}).values(), *(config.get("architectures") or [])]
    return any(str(c).endswith(("EncoderModel", "BiModel")) for c in classes)


def _fingerprint(link: AdapterLink) -> str:
    """What the merged model's revision is hashed from: a folder's content, or a hub adapter's commit."""
    if link.is_folder:
        return content_hash(Path(link.source).expanduser())
    path = hub_file(link.source, ADAPTER_CONFIG, link.revision)
    return f"{link.source}@{(snapshot_commit(path) if path else None) or link.revision or 'main'}"


def _read_json(source: str, filename: str, revision: str | None) -> dict | None:
    if (path := _locate(source, filename, revision)) is None:
        return None
    try:
        return json.loads(Path(path).read_text())
    except (OSError, ValueError) as err:
        raise UserError(f"cannot read {filename} of {source!r}: {first_line(err)}") from None


def _locate(source: str, filename: str, revision: str | None) -> str | None:
    """A file of a folder, or of a hub repo (downloaded or already cached); None when it has no such file."""
    folder = Path(source).expanduser()
    if folder.is_dir():
        return str(folder / filename) if (folder / filename).is_file() else None
    if _looks_like_path(source) or source.count("/") != 1:
        return None
    try:
        return hub_file(source, filename, revision, unreachable_ok=True)
    except (OSError, ValueError):  # no access to this repo: loading it later explains why
        return None


def _looks_like_path(name: str) -> bool:
    return name.startswith((".", "/", "~")) or Path(name).expanduser().exists()
