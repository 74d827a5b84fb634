"""Representation metrics of every layer: matrix entropy (prompt / dataset), effective rank, curvature, and the
augmentation-invariance metrics InfoNCE, LiDAR and DiME (Skean et al., "Layer by Layer", 2025).

:data:`DIRECTIONS` says, for every metric in ``metrics.csv``, whether a lower (``min``) or higher (``max``) value is
taken to mean a better embedding layer; layer selection and its leaderboard use it. The metric functions load on
first use (PEP 562), so reading :data:`DIRECTIONS` does not import torch.
"""

from __future__ import annotations

from typing import Literal

from layer_mteb.common.lazy import lazy_names

Direction = Literal["min", "max"]

#: metric -> the better end. Prompt entropy: the paper's rule, a compressed (low-entropy) prompt means the layer has
#: distilled the prompt to a few directions. Dataset entropy / effective rank: spread-out, non-collapsed pooled
#: vectors separate texts. Curvature: straighter token trajectories. InfoNCE: lower loss is more augmentation-
#: invariant. LiDAR, DiME: more discriminative directions / more information shared by views.
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
}

_HOMES = {
    **dict.fromkeys(("dime", "infonce", "lidar"), "contrastive"),
    **dict.fromkeys(("curvature", "token_curvatures"), "curvature"),
    **dict.fromkeys(
        (
            "NORMALIZATIONS",
            "effective_rank",
            "matrix_entropy",
            "normalize_entropy",
            "preprocess",
            "renyi_entropy",
            "token_entropies",
        ),
        "entropy",
    ),
}
__all__ = ["DIRECTIONS", *_HOMES]


__getattr__, __dir__ = lazy_names(__name__, _HOMES)
