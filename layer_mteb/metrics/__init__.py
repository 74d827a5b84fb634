"""Representation metrics of every layer: matrix entropy (prompt / dataset), effective rank, curvature, and the
augmentation-invariance metrics InfoNCE, LiDAR and DiME (Skean et al., "Layer by Layer", 2025).

:data:`DIRECTIONS` names every metric of ``metrics.csv`` and says whether a lower (``min``) or higher (``max``) value
is taken to mean a better embedding layer: the package's list of its metrics, read by whatever reads ``metrics.csv``
(selection, its leaderboard, ``select --help``); computing them is :mod:`.representation`'s.
"""

from __future__ import annotations

from typing import Literal, get_args

Direction = Literal["min", "max"]

#: metric -> the better end. Prompt entropy: the paper's rule, a compressed (low-entropy) prompt means the layer has
#: distilled the prompt to a few directions. Dataset entropy / effective rank: spread-out, non-collapsed pooled
#: vectors separate texts. Curvature: straighter token trajectories. InfoNCE: lower loss is more augmentation-
#: invariant. LiDAR, DiME: more discriminative directions / more information shared by views. Agreement (with a trusted
#: sentence encoder, on a task's own texts): nearer to an embedding model's geometry. TwoNN intrinsic dimension:
#: lower (KV-Embedding's rule; ``--by id_min`` and the other published rules skip layer 0).
DIRECTIONS: dict[str, Direction] = {
    "prompt_entropy": "min",
    "prompt_entropy_raw": "min",
    "prompt_entropy_logn": "min",
    "prompt_entropy_logd": "min",
    "dataset_entropy": "max",
    "dataset_entropy_raw": "max",
    "effective_rank": "max",
    "curvature": "min",
    "infonce": "min",
    "lidar": "max",
    "dime": "max",
    "agreement": "max",
    "two_nn_id": "min",
}

#: ``auto``: the paper's protocol (metrics of the raw residual stream choosing among the scored readout) for every
#: text source that has raw metrics, else metrics of the scored readout itself.
METRIC_READOUTS = ("auto", "raw", "final_norm", "same")

#: how imported (released) metric values are normalised (``paper``: as the paper's figures show them); the release
#: stores each entropy under these names, beside the entropy normalisations :mod:`.representation` computes
ReleaseNormalization = Literal["paper", "raw", "maxEntropy", "logN", "logD", "logNlogD"]
RELEASE_NORMALIZATIONS: tuple[str, ...] = get_args(ReleaseNormalization)
