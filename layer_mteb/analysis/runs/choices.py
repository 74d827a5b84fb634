"""The choices of the analysis commands' options, in a module that imports nothing, so that the command line declares
them without loading pandas."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Literal, get_args

#: ``auto``: the paper's protocol (metrics of the raw residual stream choosing among the scored readout) for every
#: text source that has raw metrics, else metrics of the scored readout itself.
METRIC_READOUTS = ("auto", "raw", "final_norm", "same")

#: how imported (released) metric values are normalised (``paper``: as the paper's figures show them); not the
#: entropy normalisations of :mod:`layer_mteb.metrics.representation`
ReleaseNormalization = Literal["paper", "raw", "maxEntropy", "logN", "logD", "logNlogD"]
RELEASE_NORMALIZATIONS: tuple[str, ...] = get_args(ReleaseNormalization)

#: The authors' released results: one variable names the folder (the command line reads it without pandas).
REFERENCE_ENV = "LAYER_MTEB_REFERENCE"
REFERENCE_DEFAULT = Path("..") / "shared" / "reference"
#: Files of that folder: every released model's per-layer scores, and Pythia's in the form Figure 1 overlays.
RELEASE_SCORES_FILE, PYTHIA_SCORES_FILE = "official_layer_scores.csv", "official_pythia_layer_scores.csv"


def reference_folder(folder: str | Path | None = None) -> Path:
    """The authors' release: ``folder``, else ``$LAYER_MTEB_REFERENCE``, else ``../shared/reference`` from the
    working folder or beside the repository (or one level higher, for a checkout in a subfolder): the first of those
    that exists, the first if none does."""
    chosen = folder or os.environ.get(REFERENCE_ENV)
    if chosen:
        return Path(chosen)
    repository = Path(__file__).resolve().parents[3]
    candidates = [REFERENCE_DEFAULT, repository.parent / "shared" / "reference"]
    candidates.append(repository.parent.parent / "shared" / "reference")
    return next((c for c in candidates if c.is_dir()), candidates[0])
