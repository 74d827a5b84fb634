"""The ``cost.csv`` table (:data:`COST_TABLE`) and what ``layer-mteb cost`` is asked to fill it (``--n-texts``,
``--seed``, ``--repeats``), checked when the command line is read: no torch here, so a wrong value fails before the
model loads and the readers of ``cost.csv`` (the tradeoff, the report) never reach the model (:mod:`.layer_cost`
measures)."""

from __future__ import annotations

from dataclasses import dataclass

from layer_mteb.common.config import option
from layer_mteb.common.errors import UserError
from layer_mteb.common.run_folder import COST_FILE
from layer_mteb.common.table import Table


@dataclass(frozen=True)
class CostSettings:
    """How many texts the cost is measured on, the seed that draws them and how many timed passes per depth (their
    median is kept): 256 texts time each depth to a few percent on a CPU while keeping the slowest packaged model
    (Gemma-3-270M, 19 depths) to minutes."""

    n_texts: int = option("texts drawn (seeded) from --texts and timed per layer", 256)
    seed: int = option("seed of the text sample", 0)
    repeats: int = option("timed passes per depth; the median is kept", 3)

    def __post_init__(self) -> None:
        if self.n_texts < 1:
            raise UserError(f"--n-texts must be a positive integer, got {self.n_texts}")
        if self.repeats < 1:
            raise UserError(f"--repeats must be a positive integer, got {self.repeats}")


COST_TABLE = Table(
    ["model", "layer", "flops_fraction", "seconds_per_1000_texts"],
    "rerun `layer-mteb cost --run {folder}`",
    floats="%.6g",
    file=COST_FILE,
)
