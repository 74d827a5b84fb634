"""Label-free per-layer curves that read a task's own pooled vectors: agreement with a reference sentence encoder
(:mod:`.measures`: mutual k-NN, linear CKA; :mod:`.reference`, :mod:`.lexical`), TwoNN intrinsic dimension and its
selectors (:mod:`.intrinsic_dimension`), computed for a scored run into ``agreement.csv`` (:mod:`.compute`).
The curves' parameters are here, so reading the curves back loads no torch."""

from __future__ import annotations

from typing import Literal, get_args

Outlier = Literal["none", "standardize", "clamp"]
AgreementMetric = Literal["mknn", "cka"]
OUTLIERS: tuple[str, ...] = get_args(Outlier)
AGREEMENT_METRICS: tuple[str, ...] = get_args(AgreementMetric)
#: Huh et al.'s neighbourhood size
DEFAULT_K = 10
