"""Representation metrics of every layer: matrix entropy (prompt / dataset), effective rank, curvature, and the
augmentation-invariance metrics InfoNCE, LiDAR and DiME (Skean et al., "Layer by Layer", 2025).

:data:`SIGNALS`: the one registry of per-layer signals a selector may read (``metrics.csv``'s metrics, the curves of
``agreement.csv``), read by selection, its leaderboard and ``select --help``; computing them is :mod:`.representation`'s
and :mod:`.agreement`'s.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal, get_args

from layer_mteb.common.config import METRIC_SETTINGS_COLUMNS, SETTINGS_COLUMNS
from layer_mteb.common.run_folder import LAYER_COLUMNS, Table
from layer_mteb.metrics.agreement import AGREEMENT_FILE

#: ``metrics.csv``, a row per (model, texts: wikitext, task:<Task>, encoded:<Task>, file:<name>, custom; layer,
#: metric, arithmetic) over ``n`` prompts; its key: the rows of one source and setting are one computation, replaced
#: together (the two arithmetics of one source are two computations, kept side by side)
METRICS_TABLE = Table(
    [*LAYER_COLUMNS, "texts", "task", "metric", "value", "n", *SETTINGS_COLUMNS, *METRIC_SETTINGS_COLUMNS],
    "run `layer-mteb metrics --run {folder}`",
    ["model", "texts", "metric", "layer", *METRIC_SETTINGS_COLUMNS],
    ["model", "revision", "texts", *SETTINGS_COLUMNS, *METRIC_SETTINGS_COLUMNS],
    None,
    file="metrics.csv",
)
METRICS_FILE, METRIC_COLUMNS, tidy_metrics = METRICS_TABLE.file, METRICS_TABLE.columns, METRICS_TABLE.tidy

Direction = Literal["min", "max"]
#: What computing a signal takes: the model's forward pass over texts, or a reference encoder of the same texts too.
Input = Literal["model", "reference"]


@dataclass(frozen=True)
class Signal:
    """A per-layer signal: its better end, the table storing it (``metrics.csv``, made by ``layer-mteb metrics``;
    ``agreement.csv``, made on demand by the source a command hands the selection), what computing it needs, and the
    parameters keying a stored value besides the layer."""

    name: str
    direction: Direction
    table: str = METRICS_FILE
    needs: Input = "model"
    parameters: tuple[str, ...] = ("texts", "readout")


#: Every signal by name. Prompt entropy: the paper's rule, a compressed (low-entropy) prompt means the layer has
#: distilled the prompt to a few directions. Dataset entropy / effective rank: spread-out, non-collapsed pooled
#: vectors separate texts. Curvature: straighter token trajectories. InfoNCE: lower loss is more augmentation-
#: invariant. LiDAR, DiME: more discriminative directions / more information shared by views. Agreement (with a trusted
#: sentence encoder, on a task's own texts): nearer to an embedding model's geometry. TwoNN intrinsic dimension:
#: lower (KV-Embedding's rule; ``--by id_min`` and the other published rules skip layer 0).
SIGNALS: dict[str, Signal] = {
    signal.name: signal
    for signal in (
        *(Signal(name, "min") for name in ("prompt_entropy", "prompt_entropy_raw", "prompt_entropy_logn")),
        Signal("prompt_entropy_logd", "min"),
        *(Signal(name, "max") for name in ("dataset_entropy", "dataset_entropy_raw", "effective_rank")),
        *(Signal(name, "min") for name in ("curvature", "infonce")),
        *(Signal(name, "max") for name in ("lidar", "dime")),
        Signal("agreement", "max", AGREEMENT_FILE, "reference", ("reference", "metric", "outlier", "n", "k", "seed")),
        Signal("two_nn_id", "min", AGREEMENT_FILE, "model", ("n", "seed")),
    )
}
#: metric -> the better end, for every signal.
DIRECTIONS: dict[str, Direction] = {name: signal.direction for name, signal in SIGNALS.items()}

#: ``auto``: the paper's protocol (metrics of the raw residual stream choosing among the scored readout) for every
#: text source that has raw metrics, else metrics of the scored readout itself.
METRIC_READOUTS = ("auto", "raw", "final_norm", "same")

#: how imported (released) metric values are normalised (``paper``: as the paper's figures show them); the release
#: stores each entropy under these names, beside the entropy normalisations :mod:`.representation` computes
ReleaseNormalization = Literal["paper", "raw", "maxEntropy", "logN", "logD", "logNlogD"]
RELEASE_NORMALIZATIONS: tuple[str, ...] = get_args(ReleaseNormalization)
