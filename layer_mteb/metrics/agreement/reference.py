"""The reference embedding that layer agreement is measured against: a trained sentence encoder used as it is
meant to be used (its own sentence-transformers pipeline: pooling and normalisation as shipped), never a layer of
the model under test.

A reference is a packaged model name (``mpnet-base``: all-mpnet-base-v2, the default; ``minilm-l6``:
all-MiniLM-L6-v2) or a folder a ``SentenceTransformer`` loads. Its vectors of a task's texts are kept on disk (by
exact text, like the layer store), so a study over several models encodes each text with the reference once.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from layer_mteb.common.errors import UserError, first_line
from layer_mteb.common.files import atomic_write, content_hash, text_hash
from layer_mteb.common.hub import hub_offline
from layer_mteb.metrics.agreement.lexical import is_lexical, parse_lexical
from layer_mteb.model.loading import cache_root, packaged_folder
from layer_mteb.model.names import PACKAGED_MODELS, packaged_distributions, packaged_revision

logger = logging.getLogger(__name__)

#: the references in order of preference; the first that is not the model under test is the default
REFERENCES = ("mpnet-base", "minilm-l6")


def default_reference(model: str) -> str:
    """The first installed one of :data:`REFERENCES` that is not ``model`` (a packaged name or its hub id):
    all-mpnet-base-v2 when installed, else all-MiniLM-L6-v2, else the first one's hub id when the hub is reachable;
    one line when none can serve."""
    candidates = [r for r in REFERENCES if not is_same_model(r, model)]
    for name in candidates:
        try:
            packaged_distributions(name)
        except UserError:
            continue
        return name
    if candidates and not hub_offline():  # not installed, but the hub is there to download it from
        return PACKAGED_MODELS[candidates[0]].hub_id
    raise UserError(f"no reference encoder is installed for agreement (one of {', '.join(candidates)}): make models")


def is_same_model(reference: str, model: str) -> bool:
    """Whether ``reference`` names ``model`` (packaged short name, hub id or folder name)."""
    names = {reference, PACKAGED_MODELS[reference].hub_id} if reference in PACKAGED_MODELS else {reference}
    return model in names or f"local/{Path(reference).name}" == model


@dataclass
class Reference:
    """A loaded reference encoder: ``name`` as tables show it (hub id for packaged ones), ``revision``."""

    name: str
    revision: str
    encoder: Any

    def encode(self, texts: Sequence[str], store: Path | None = None) -> np.ndarray:
        """[n, D] float32 vectors of ``texts`` as the pipeline gives them; with ``store``, read what it holds and
        add what was encoded."""
        known = _read_store(store) if store is not None else {}
        missing = [t for t in dict.fromkeys(texts) if t not in known]
        if missing:
            vectors = self.encoder.encode(missing, batch_size=32, convert_to_numpy=True, show_progress_bar=False)
            known.update(zip(missing, np.asarray(vectors, dtype=np.float32), strict=True))
            if store is not None:
                _write_store(store, known)
        return np.stack([known[t] for t in texts])

    def store(self, task: str) -> Path:
        """Where this reference's vectors of ``task``'s texts are kept."""
        return cache_root() / "reference" / self.name.replace("/", "__") / text_hash(self.revision) / task


def check_reference(name: str) -> str:
    """``name`` when it may load as a reference (an installed packaged model or a folder), before anything loads;
    else the one line :func:`load_reference` would give."""
    if name in PACKAGED_MODELS:
        packaged_distributions(name)  # one line naming the install where it is not installed
    elif not Path(name).expanduser().is_dir() and not (_is_hub_id(name) and not hub_offline()):
        raise UserError(
            f"--agreement-with {name!r} is neither a packaged model ({', '.join(REFERENCES)}), a model folder, nor a "
            "hub id with the hub reachable"
        )
    return name


def _is_hub_id(name: str) -> bool:
    return name.count("/") == 1 and not name.startswith((".", "/", "~")) and not Path(name).exists()


def load_reference(name: str, device: str = "cpu") -> Reference:
    """Load a reference by packaged name, folder path or hub id (the hub reachable); one :class:`UserError` line
    when it cannot be."""
    from safetensors import SafetensorError
    from sentence_transformers import SentenceTransformer

    if name in PACKAGED_MODELS:
        folder = packaged_folder(name)  # one line naming the install where it is not installed
        revision = packaged_revision(name)
    elif _is_hub_id(check_reference(name)):  # reachable, as check_reference found: downloaded once, then cached
        from huggingface_hub import snapshot_download
        from huggingface_hub.errors import HfHubHTTPError

        try:
            folder = Path(snapshot_download(name))
        except (OSError, HfHubHTTPError) as err:
            raise UserError(f"cannot download reference {name!r} from the hub: {first_line(err)}") from None
        revision = folder.name  # the snapshot's commit
    else:
        folder = Path(name).expanduser()
        revision = content_hash(folder)
    try:
        encoder = SentenceTransformer(str(folder), device=device, local_files_only=True)
    except (OSError, ValueError, RuntimeError, KeyError, SafetensorError) as err:
        raise UserError(f"cannot load reference {name!r} as a sentence-transformers model: {first_line(err)}") from None
    return Reference(reference_name(name), revision, encoder)


def reference_name(reference: str) -> str:
    """How ``agreement.csv`` names a reference given as a packaged name (its hub id), a lexical reference (its kind
    and settings, :mod:`.lexical`) or a folder (``local/<name>``)."""
    if reference in PACKAGED_MODELS:
        return PACKAGED_MODELS[reference].hub_id
    if is_lexical(reference):
        return parse_lexical(reference).name
    if _is_hub_id(reference):
        return reference
    return f"local/{Path(reference).expanduser().resolve().name}"


def _read_store(store: Path) -> dict[str, np.ndarray]:
    texts_file, vectors_file = store / "texts.json", store / "vectors.npy"
    if not (texts_file.is_file() and vectors_file.is_file()):
        return {}
    try:
        texts, vectors = json.loads(texts_file.read_text()), np.load(vectors_file)
    except (OSError, ValueError) as err:
        logger.warning("ignoring unreadable reference vectors %s (%s)", store, err)
        return {}
    if len(texts) != len(vectors):
        logger.warning("ignoring reference vectors %s: %d texts, %d vectors", store, len(texts), len(vectors))
        return {}
    return dict(zip(texts, vectors, strict=True))


def _write_store(store: Path, known: dict[str, np.ndarray]) -> None:
    """Vectors first, texts last: a reader pairs them only when the counts match, so a torn write is ignored."""
    vectors = np.stack(list(known.values()))
    atomic_write(store / "vectors.npy", lambda tmp: _save_array(tmp, vectors))
    atomic_write(store / "texts.json", lambda tmp: Path(tmp).write_text(json.dumps(list(known))))


def _save_array(path: str, array: np.ndarray) -> None:
    with open(path, "wb") as handle:  # a path not ending in .npy would get the suffix added by np.save
        np.save(handle, array)
