"""Intrinsic dimension (ID) of each layer's pooled vectors, and the three published selectors that read a layer off
the ID curve.

The estimator is TwoNN (Facco et al. 2017, "Estimating the intrinsic dimension of datasets by a minimal neighborhood
information"): the ratio μ = r₂/r₁ of each point's second to first nearest-neighbour distance follows a Pareto law
whose exponent is the dimension; it is fitted as the paper does (a line through (log μ, −log(1 − F(μ))), the largest
10 % of ratios discarded), by scikit-dimension's ``skdim.id.TwoNN`` (the ``metrics`` extra). It needs nothing but
Euclidean distances, so it reads a few hundred texts of a task in milliseconds per layer.

All three selectors look at the transformer blocks' outputs, layers 1..L: they were stated for those, and layer 0 (the
mean of token embeddings) is never picked. Ties go to the deeper layer, as everywhere in this project.
"""

from __future__ import annotations

import math
import operator
import warnings
from collections.abc import Callable
from typing import TYPE_CHECKING, Literal, get_args

import numpy as np

if TYPE_CHECKING:
    import torch

IdSelector = Literal["id_after_peak", "id_min", "id_valley_after_peak"]
ID_SELECTORS: tuple[str, ...] = get_args(IdSelector)
#: share of the largest ratios r2/r1 TwoNN leaves out of its fit (Facco et al.'s choice)
DISCARD_FRACTION = 0.1
#: a "first peak" must rise at least this far from the curve's minimum towards its maximum (see :func:`valley_layer`)
PEAK_HEIGHT = 0.5


def two_nn(x: torch.Tensor | np.ndarray, discard_fraction: float = DISCARD_FRACTION) -> float:
    """TwoNN intrinsic dimension of the rows of ``x`` ([n, D]); rows at distance 0 from another are dropped, and
    rows too few to fit once they are (every text one vector: a causal model read at its first token) have none
    (NaN, so no ID selector picks on that curve)."""
    try:
        from skdim.id import TwoNN
    except ImportError:
        raise ImportError("the intrinsic dimension needs scikit-dimension: pip install 'layer_mteb[metrics]'") from None
    points = np.asarray(x.cpu() if hasattr(x, "cpu") else x, dtype=np.float64)  # a torch tensor or an array
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message="Dropping .*duplicate points")
        try:
            return float(TwoNN(discard_fraction=discard_fraction).fit(points).dimension_)
        except ValueError as err:
            if "Fewer than" not in str(err):  # scikit-dimension's words for too few distinct points
                raise
            return math.nan


def id_curve(layers: torch.Tensor | np.ndarray) -> np.ndarray:
    """TwoNN ID of every layer of ``layers`` ([L+1, n, D])."""
    return np.array([two_nn(layer) for layer in layers])


def _blocks(curve: np.ndarray) -> np.ndarray:
    if len(curve) < 2:
        raise ValueError(f"an ID curve needs the embeddings and at least one block, got {len(curve)} values")
    return np.asarray(curve, dtype=np.float64)


def _deepest(curve: np.ndarray, best: Callable[[np.ndarray], float]) -> int:
    """The deepest block layer (1..L) whose ID is ``best`` of the blocks' IDs (ties: the deeper layer)."""
    values = _blocks(curve)[1:]
    return int(np.flatnonzero(np.isclose(values, best(values), rtol=0, atol=1e-9)).max()) + 1


def after_peak_layer(curve: np.ndarray) -> int:
    """Cheng et al. (ICLR 2025, "Emergence of a High-Dimensional Abstraction Phase in Language Transformers"): the
    layer right after the ID peak, i.e. argmax over layers 1..L of the ID, plus one (the last layer when the peak
    is the last layer). The peak marks the end of the abstraction phase whose representations transfer best."""
    return min(_deepest(curve, np.max) + 1, len(curve) - 1)


def min_layer(curve: np.ndarray) -> int:
    """KV-Embedding (arXiv 2601.01046): the layer of minimum ID over layers 1..L, the most compressed
    representation."""
    return _deepest(curve, np.min)


def valley_layer(curve: np.ndarray) -> int:
    """Valeriani et al. (NeurIPS 2023, "The geometry of hidden representations of large transformer models"): the
    relative minimum after the first ID peak, where their semantic information is richest.

    Precisely, over layers 1..L: the first peak is the first layer whose ID is ≥ both neighbours' (the last layer
    has one) and at least :data:`PEAK_HEIGHT` of the way from the curve's minimum to its maximum (so that noise
    on a rising curve is no peak); the pick is the first layer after it whose ID is ≤ both neighbours'. A curve
    that never comes down after its peak gives the last layer.
    """
    values = _blocks(curve)[1:]
    last = len(values) - 1
    floor = values.min() + PEAK_HEIGHT * (values.max() - values.min())

    def at_least_neighbours(i: int, better: Callable[[float, float], bool]) -> bool:
        return all(better(values[i], values[j]) for j in (i - 1, i + 1) if 0 <= j <= last)

    peak = next((i for i in range(last + 1) if values[i] >= floor and at_least_neighbours(i, operator.ge)), last)
    return next((i for i in range(peak + 1, last + 1) if at_least_neighbours(i, operator.le)), last) + 1


ID_PICKS: dict[str, Callable[[np.ndarray], int]] = {
    "id_after_peak": after_peak_layer,
    "id_min": min_layer,
    "id_valley_after_peak": valley_layer,
}


def id_pick(curve: np.ndarray, selector: str) -> int:
    """The layer ``selector`` (one of :data:`ID_SELECTORS`) picks from an ID curve over layers 0..L."""
    if selector not in ID_PICKS:
        raise ValueError(f"selector must be one of {', '.join(ID_SELECTORS)}, got {selector!r}")
    return ID_PICKS[selector](np.asarray(curve))
