"""The authors' release on disk, apart from reading its files (:mod:`.release`): where it lives on this machine
(:func:`release_folder`, ``$LAYER_MTEB_RELEASE``), how a clone lays out its results (``experiments/results/<family>/
<size>/<revision>/``, the text models' with ``mteb/`` or ``metrics/{mteb,wikitext}/``) and how to get one. The
command line checks a ``--release`` folder with it before any table is read."""

from __future__ import annotations

import os
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from layer_mteb.common.errors import UserError

#: The folder of the authors' release on this machine (its tables, and its clone in ``release/``).
RELEASE_ENV = "LAYER_MTEB_RELEASE"
RELEASE_DEFAULT = Path("..") / "shared" / "reference"
#: Files of that folder: every released model's per-layer scores, and Pythia's in the form Figure 1 overlays.
RELEASE_SCORES_FILE, PYTHIA_SCORES_FILE = "official_layer_scores.csv", "official_pythia_layer_scores.csv"


def release_folder(folder: str | Path | None = None) -> Path:
    """The authors' release: ``folder``, else ``$LAYER_MTEB_RELEASE``, else ``../shared/reference`` from the
    working folder or beside the checkout: the first of those that exists, the first if none does. Never a folder
    further up: a clone with nothing beside it reads no release it was not pointed at."""
    chosen = folder or os.environ.get(RELEASE_ENV)
    if chosen:
        return Path(chosen)
    repository = Path(__file__).resolve().parents[3]
    candidates = [RELEASE_DEFAULT, repository.parent / "shared" / "reference"]
    return next((c for c in candidates if c.is_dir()), candidates[0])


#: Where the tables come from, and how to get it: one line for a machine that has no copy.
RELEASE_REPOSITORY = "https://github.com/XuweiyiChen/information_flow"
RELEASE_COMMIT = "dde387a7"
HOW_TO_GET = (
    f"get the authors' release with `git clone {RELEASE_REPOSITORY} && git -C information_flow checkout "
    f"{RELEASE_COMMIT}` (the results of the public OFSkean/information_flow at its last commit) and pass "
    "--release information_flow"
)
RESULTS = Path("experiments") / "results"

#: What makes a ``<revision>`` folder one of a text model: per-layer mteb results or metrics on text.
TEXT_RESULTS = ("mteb", "metrics/mteb", "metrics/wikitext")


def results_folder(path: str | Path) -> Path:
    """The release's ``experiments/results`` folder: ``path`` is a clone of the repository or that folder itself."""
    root = Path(path).expanduser()
    for candidate in (root / RESULTS, root):
        if candidate.is_dir() and any(_text_folders(candidate)):
            return candidate
    if not root.exists():
        raise UserError(f"no authors' release at {path}: {HOW_TO_GET}")
    raise UserError(f"{path} holds no <family>/<size>/<revision>/mteb or metrics folder of the release: {HOW_TO_GET}")


@dataclass(frozen=True)
class ModelFolder:
    """One ``<family>/<size>/<revision>`` folder and its model name (``@<revision>`` for a checkpoint)."""

    model: str
    path: Path


def subfolders(folder: Path) -> list[os.DirEntry]:
    with os.scandir(folder) as entries:
        return sorted((e for e in entries if e.is_dir()), key=lambda e: e.name)


def _text_folders(results: Path) -> Iterator[ModelFolder]:
    for family in subfolders(results):
        for size in subfolders(Path(family.path)):
            for revision in subfolders(Path(size.path)):
                path = Path(revision.path)
                if any((path / sub).is_dir() for sub in TEXT_RESULTS):
                    name = f"{family.name}/{size.name}"
                    yield ModelFolder(name if revision.name == "main" else f"{name}@{revision.name}", path)


def model_folders(results: Path) -> list[ModelFolder]:
    """Every text model folder of the release (:data:`TEXT_RESULTS`; vision folders hold ImageNet metrics only)."""
    return list(_text_folders(results))
