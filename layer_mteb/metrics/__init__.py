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
from layer_mteb.common.table import LAYER_COLUMNS, Table
from layer_mteb.metrics.agreement import AGREEMENT_FILE, ID_METRIC, NO_REFERENCE

#: ``metrics.csv``, a row per (model, texts: wikitext, task:<Task>, encoded:<Task>, file:<name>, custom; layer,
#: metric, arithmetic) over ``n`` prompts; its key: the rows of one source and setting are one computation, replaced
#: together (the two arithmetics of one source are two computations, kept side by side). ``data``: which copy of
#: WikiText a ``wikitext`` row measured (``metrics.wikitext.ORIGIN_*``; ``imported`` for the release's rows), empty
#: for other texts and in rows written before it was recorded
METRICS_TABLE = Table(
    [*LAYER_COLUMNS, "texts", "task", "metric", "value", "n", *SETTINGS_COLUMNS, *METRIC_SETTINGS_COLUMNS, "data"],
    "run `layer-mteb metrics --run {folder}`",
    ["model", "texts", "metric", "layer", *METRIC_SETTINGS_COLUMNS],
    ["model", "revision", "texts", *SETTINGS_COLUMNS, *METRIC_SETTINGS_COLUMNS],
    None,
    file="metrics.csv",
    added=(("data", None),),
)
METRICS_FILE, METRIC_COLUMNS, tidy_metrics = METRICS_TABLE.file, METRICS_TABLE.columns, METRICS_TABLE.tidy

#: how an entropy is normalised (:func:`.representation.normalize_entropy`): raw nats, ÷ log N, ÷ log D, ÷ min(both)
Normalization = Literal["raw", "logN", "logD", "maxEntropy"]
NORMALIZATIONS: tuple[str, ...] = get_args(Normalization)
#: prompt-entropy columns of ``metrics.csv`` -> how each is normalised (per prompt: N is its token count)
PROMPT_ENTROPIES: dict[str, Normalization] = {
    "prompt_entropy": "maxEntropy",
    "prompt_entropy_raw": "raw",
    "prompt_entropy_logn": "logN",
    "prompt_entropy_logd": "logD",
}

Direction = Literal["min", "max"]
#: What computing a signal takes: the model's forward pass over texts, or a reference encoder of the same texts too.
Input = Literal["model", "reference"]


@dataclass(frozen=True)
class Signal:
    """A per-layer signal, declared once so that one reader serves it wherever it is stored: its better end, the
    table storing it (``metrics.csv``, made by ``layer-mteb metrics``; ``agreement.csv``, made on demand by the source
    a command hands the selection), what computing it needs, the parameters keying a stored value besides the layer
    (read from the options a pick is given), the name its rows carry in the table's ``metric`` column (``stored_as``,
    default its own) and the key columns it holds at one value (``fixed``: agreement reads untreated outliers)."""

    name: str
    direction: Direction
    table: str = METRICS_FILE
    needs: Input = "model"
    parameters: tuple[str, ...] = ("texts", "readout")
    stored_as: str = ""
    fixed: tuple[tuple[str, object], ...] = ()

    @property
    def metric(self) -> str:  # the value of its rows' ``metric`` column
        return self.stored_as or self.name

    @property
    def key(self) -> dict[str, object]:
        """The key columns held at one value; a curve that reads no reference is stored with :data:`NO_REFERENCE`."""
        return {**({} if self.needs == "reference" else {"reference": NO_REFERENCE}), **dict(self.fixed)}


#: the curves of ``agreement.csv`` are keyed by these besides the task; ``k`` only where the measure has neighbours
CURVE_PARAMETERS = ("reference", "n", "k", "seed")

#: Every signal by name. Prompt entropy: the paper's rule, a compressed (low-entropy) prompt means the layer has
#: distilled the prompt to a few directions. Dataset entropy / effective rank: spread-out, non-collapsed pooled
#: vectors separate texts. Curvature: straighter token trajectories. InfoNCE: lower loss is more augmentation-
#: invariant. LiDAR, DiME: more discriminative directions / more information shared by views. Agreement (with a trusted
#: sentence encoder, on a task's own texts; mutual k-NN, untreated): nearer to an embedding model's geometry. TwoNN
#: intrinsic dimension: lower (KV-Embedding's rule; ``--by id_min`` and the other published rules skip layer 0).
SIGNALS: dict[str, Signal] = {
    signal.name: signal
    for signal in (
        *(Signal(name, "min") for name in PROMPT_ENTROPIES),
        *(Signal(name, "max") for name in ("dataset_entropy", "dataset_entropy_raw", "effective_rank")),
        *(Signal(name, "min") for name in ("curvature", "infonce")),
        *(Signal(name, "max") for name in ("lidar", "dime")),
        Signal("agreement", "max", AGREEMENT_FILE, "reference", CURVE_PARAMETERS, "mknn", (("outlier", "none"),)),
        Signal(ID_METRIC, "min", AGREEMENT_FILE, "model", ("n", "seed"), fixed=(("outlier", "none"), ("k", 0))),
    )
}


def stored_in(table: str) -> list[str]:
    """The signals ``table`` stores (``metrics.csv`` or ``agreement.csv``), in the registry's order."""
    return [name for name, signal in SIGNALS.items() if signal.table == table]


#: metric -> the better end, for every signal.
DIRECTIONS: dict[str, Direction] = {name: signal.direction for name, signal in SIGNALS.items()}

#: ``auto``: the paper's protocol (metrics of the raw residual stream choosing among the scored readout) for every
#: text source that has raw metrics, else metrics of the scored readout itself.
METRIC_READOUTS = ("auto", "raw", "final_norm", "same")

#: how imported (released) metric values are normalised (``paper``: as the paper's figures show them); the release
#: stores each entropy under these names, beside the entropy normalisations :mod:`.representation` computes
ReleaseNormalization = Literal["paper", "raw", "maxEntropy", "logN", "logD", "logNlogD"]
RELEASE_NORMALIZATIONS: tuple[str, ...] = get_args(ReleaseNormalization)
