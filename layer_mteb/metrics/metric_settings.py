"""What a ``metrics`` computation is asked for, declared once: every metric setting with its default and, for those the
command line offers, its one-line meaning (the field's ``help``, as :func:`~layer_mteb.common.config.option` declares
an option), and the two sets of sample sizes. No torch here: the command line reads these before anything heavy
loads, and :mod:`.runner` computes with them."""

from __future__ import annotations

from dataclasses import dataclass, fields

from layer_mteb.common.config import ARITHMETICS, METRIC_SETTINGS, Arithmetic, option
from layer_mteb.common.errors import UserError

#: how the metrics are computed from the vectors: a column of ``metrics.csv``, declared with the vectors' settings
_ARITHMETIC = next(setting for setting in METRIC_SETTINGS if setting.name == "arithmetic")


@dataclass(frozen=True)
class MetricSettings:
    """Knobs of the metrics (defaults: the paper's). ``views`` = J views per prompt for LiDAR; InfoNCE and DiME use
    the first two of them; 0 skips all three. ``augment_prompts`` caps how many prompts get views (J passes each).
    ``arithmetic``: the paper's formulas, or the authors' code's (:mod:`.authors_arithmetic`; its curvature is |cos|
    whatever ``absolute_curvature`` says). The fields without a ``help`` are no option of the command line."""

    n_prompts: int = option("texts to use, seeded sample if more", 1000)
    views: int = option("augmented views per prompt for LiDAR, 0 skips", 16)
    augment_prompts: int = option("prompts that get augmented views", 200)
    p: float = option("augmentation probability", 0.3, flags=("--augment-p",))
    alpha: float = option("Rényi order of the matrix entropies", 1.0)
    temperature: float = 0.1
    delta: float = 1e-4
    dime_permutations: int = 10
    absolute_curvature: bool = False
    seed: int = option("seed of the prompt sample and the augmentations", 0)
    arithmetic: Arithmetic = option(_ARITHMETIC.help, _ARITHMETIC.default)

    def __post_init__(self) -> None:
        if self.views == 1 or self.views < 0:
            raise UserError(f"--views must be 0 (skip InfoNCE, LiDAR, DiME) or at least 2, got {self.views}")
        if self.views and self.augment_prompts < 2:
            raise UserError(f"--augment-prompts must be at least 2, got {self.augment_prompts}")
        if not self.alpha > 0:
            raise UserError(f"--alpha must be positive, got {self.alpha}")
        if not 0 < self.p <= 1:
            raise UserError(f"--augment-p must be in (0, 1], got {self.p}")
        if self.arithmetic not in ARITHMETICS:
            raise UserError(f"--arithmetic must be one of {', '.join(ARITHMETICS)}; got {self.arithmetic!r}")

    @property
    def authors(self) -> bool:
        """Whether the metrics follow the authors' code rather than the paper's formulas."""
        return self.arithmetic == "authors"


#: the command line's default sample sizes (prompts, views per prompt, prompts given views): about a minute for
#: MiniLM-L6 on a CPU, the same metrics on smaller samples
QUICK_METRIC_SIZES: dict[str, int] = {"n_prompts": 200, "views": 4, "augment_prompts": 32}
#: sample sizes of the paper's protocol (Skean et al. 2025): MetricSettings' defaults, ``metrics --full-protocol``
PAPER_METRIC_SIZES: dict[str, int] = {name: getattr(MetricSettings, name) for name in QUICK_METRIC_SIZES}


def help_of(name: str) -> str:
    """The one-line meaning a metric setting's option is declared with."""
    return next(f.metadata["help"] for f in fields(MetricSettings) if f.name == name)
