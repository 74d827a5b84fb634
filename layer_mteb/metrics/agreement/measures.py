"""How much a layer's pooled vectors agree with a reference embedding of the same texts: a label-free signal for
picking a layer, on the hypothesis that layers whose neighbourhoods match a good sentence encoder's are good
embedding layers (Huh et al. 2024, "The Platonic Representation Hypothesis").

Two measures, both exact and vectorised over all layers at once:

- **mutual k-NN** (:func:`mutual_knn`): per text, the share of its k nearest neighbours (cosine similarity, itself
  excluded) that both spaces have in common, averaged over texts; 1 = same neighbourhoods, about k / (n - 1) for
  unrelated spaces. Huh et al.'s default k = 10.
- **linear CKA** (:func:`linear_cka`, Kornblith et al. 2019): centred kernel alignment of the two Gram matrices;
  invariant to orthogonal transforms and isotropic scaling of either space.

Language models have a few "rogue" dimensions of huge magnitude that dominate cosine similarity (Timkey & van
Schijndel 2021), so each measure can first treat outliers (:data:`OUTLIERS`): ``none``; ``standardize`` (each
dimension to zero mean and unit variance over the texts); ``clamp`` (every value clamped to the 0.95 quantile of
all absolute values, then each row scaled to unit length, as in the platonic-rep code).
"""

from __future__ import annotations

import numpy as np
import torch

from layer_mteb.metrics.agreement import AGREEMENT_METRICS, DEFAULT_K, OUTLIERS, AgreementMetric, Outlier

#: Huh et al.'s clamping quantile
CLAMP_QUANTILE = 0.95


def _as_tensor(x: torch.Tensor | np.ndarray) -> torch.Tensor:
    return torch.as_tensor(np.asarray(x) if not isinstance(x, torch.Tensor) else x).to(torch.float64)


def treat_outliers(x: torch.Tensor | np.ndarray, outlier: Outlier = "none") -> torch.Tensor:
    """``x`` ([..., n, D]) with outliers handled as :data:`OUTLIERS` says, in float64 (leading axes: layers, each
    treated on its own)."""
    if outlier not in OUTLIERS:
        raise ValueError(f"outlier must be one of {', '.join(OUTLIERS)}, got {outlier!r}")
    x = _as_tensor(x)
    if outlier == "standardize":
        std = x.std(dim=-2, keepdim=True)
        return (x - x.mean(dim=-2, keepdim=True)) / torch.where(std > 0, std, torch.ones_like(std))
    if outlier == "clamp":
        flat = x.abs().reshape(*x.shape[:-2], -1)
        # torch.quantile is limited to 16M values; numpy's linear interpolation is the same definition
        q = torch.from_numpy(np.quantile(flat.numpy(), CLAMP_QUANTILE, axis=-1, keepdims=True)).to(x).unsqueeze(-1)
        return _unit_rows(torch.maximum(torch.minimum(x, q), -q))
    return x


def _unit_rows(x: torch.Tensor) -> torch.Tensor:
    norms = x.norm(dim=-1, keepdim=True)
    return x / torch.where(norms > 0, norms, torch.ones_like(norms))


def mutual_knn(a: torch.Tensor | np.ndarray, b: torch.Tensor | np.ndarray, k: int = DEFAULT_K) -> torch.Tensor:
    """Mean over texts of |kNN_a(i) ∩ kNN_b(i)| / k. ``a`` is [n, D] or [L, n, D] (one value per layer), ``b`` is
    [n, D'] (broadcast over layers)."""
    a, b = _as_tensor(a), _as_tensor(b)
    n = a.shape[-2]
    if b.shape[-2] != n:
        raise ValueError(f"both spaces need the same texts: {n} rows against {b.shape[-2]}")
    if not 1 <= k < n:
        raise ValueError(f"k must be in 1..{n - 1} for {n} texts, got {k}")
    return shared_neighbours(neighbour_sets(a, k), neighbour_sets(b, k), k)


def neighbour_sets(x: torch.Tensor | np.ndarray, k: int) -> torch.Tensor:
    """[..., n, n] booleans: row i marks its ``k`` nearest rows by cosine similarity (itself excluded); computed once,
    a layer's sets serve every reference it is compared with.

    The [..., n, k] indices of each row's k nearest rows are the top k of the cosine similarities with the diagonal
    (the row itself) set to −∞, scattered into a boolean mask of all n rows."""
    unit = _unit_rows(_as_tensor(x))
    sim = unit @ unit.transpose(-1, -2)
    sim.diagonal(dim1=-2, dim2=-1).fill_(-torch.inf)
    return torch.zeros(sim.shape, dtype=torch.bool).scatter_(-1, sim.topk(k, dim=-1).indices, True)


def shared_neighbours(mine: torch.Tensor, theirs: torch.Tensor, k: int) -> torch.Tensor:
    """Mutual k-NN from two spaces' :func:`neighbour_sets`: mean over texts of the shared share of k."""
    return (mine & theirs).sum(dim=-1).to(torch.float64).mean(dim=-1) / k


def linear_cka(a: torch.Tensor | np.ndarray, b: torch.Tensor | np.ndarray) -> torch.Tensor:
    """Linear CKA ⟨K̃, L̃⟩ / (‖K̃‖ ‖L̃‖) of the column-centred Gram matrices (Kornblith et al. 2019, eq. 5 with
    the linear kernel); ``a`` [n, D] or [L, n, D], ``b`` [n, D']. The Gram form costs n² per layer, cheap for the
    few hundred texts used here whatever the width."""
    a, b = _as_tensor(a), _as_tensor(b)
    if b.shape[-2] != a.shape[-2]:
        raise ValueError(f"both spaces need the same texts: {a.shape[-2]} rows against {b.shape[-2]}")
    a = a - a.mean(dim=-2, keepdim=True)
    b = b - b.mean(dim=-2, keepdim=True)
    gram_a, gram_b = a @ a.transpose(-1, -2), b @ b.transpose(-1, -2)
    cross = (gram_a * gram_b).sum(dim=(-2, -1))
    norms = gram_a.norm(dim=(-2, -1)) * gram_b.norm(dim=(-2, -1))
    return torch.where(norms > 0, cross / torch.where(norms > 0, norms, torch.ones_like(norms)), torch.nan)


def agreement_curve(
    layers: torch.Tensor | np.ndarray,
    reference: torch.Tensor | np.ndarray,
    metric: AgreementMetric = "mknn",
    outlier: Outlier = "none",
    k: int = DEFAULT_K,
) -> np.ndarray:
    """One agreement value per layer of ``layers`` ([L+1, n, D]) with ``reference`` ([n, D']), both treated for
    outliers the same way."""
    if metric not in AGREEMENT_METRICS:
        raise ValueError(f"metric must be one of {', '.join(AGREEMENT_METRICS)}, got {metric!r}")
    ours, theirs = treat_outliers(layers, outlier), treat_outliers(reference, outlier)
    values = mutual_knn(ours, theirs, k) if metric == "mknn" else linear_cka(ours, theirs)
    return values.numpy()
