"""Model facts a layer selector may use without labels: which family a model belongs to (for leave-one-family-out)
and whether it was trained to produce embeddings (its last layer is then the layer its training optimised).

One table, matched in order against the lower-cased model name (a hub id, a release name such as ``Pythia/410m``, or
a local folder); the first family whose pattern occurs in the name wins, so ``roberta`` comes before ``bert``. A
model no pattern matches is a family of its own. A local folder holding a sentence-transformers pipeline
(``modules.json`` or ``config_sentence_transformers.json``) is an embedding model whatever its name.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class Family:
    """A model family: the name patterns that place a model in it and whether its models were trained for
    embeddings (``why`` says how: a contrastive sentence-transformers fine-tune, an LLM2Vec adapter, ...)."""

    name: str
    patterns: tuple[str, ...]
    embedding: bool = False
    why: str = "base language model"


FAMILIES = (
    Family(
        "sentence-transformers",
        ("sentence-transformers/", "all-minilm", "all-mpnet", "minilm-l6", "mpnet-base"),
        embedding=True,
        why="sentence-transformers pipeline (contrastive fine-tune)",
    ),
    Family("llm2vec", ("llm2vec",), embedding=True, why="LLM2Vec adapter (trained for embeddings)"),
    Family("pythia", ("pythia",)),
    Family("mamba", ("mamba",)),
    Family("roberta", ("roberta",)),
    Family("bert", ("bert",)),
    Family("smollm2", ("smollm2",)),
    Family("gemma", ("gemma",)),
)
#: Files that mark a folder as a sentence-transformers pipeline.
PIPELINE_FILES = ("modules.json", "config_sentence_transformers.json")


def family_of(model: str) -> Family:
    """The model's family (:data:`FAMILIES`), else a family of its own named after the model."""
    lowered = model.lower()
    found = next((f for f in FAMILIES if any(p in lowered for p in f.patterns)), None)
    if found is None:
        found = Family(model, (lowered,))
    if not found.embedding and _is_pipeline_folder(model):
        return Family(found.name, found.patterns, embedding=True, why=f"sentence-transformers pipeline ({model})")
    return found


def _is_pipeline_folder(model: str) -> bool:
    try:
        folder = Path(model)
        return folder.is_dir() and any((folder / name).is_file() for name in PIPELINE_FILES)
    except OSError:
        return False
