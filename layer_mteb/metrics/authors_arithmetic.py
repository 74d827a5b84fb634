"""The representation metrics as the authors' final code computes them (``--arithmetic authors``).

:mod:`.representation` follows the paper's formulas. The authors' code (XuweiyiChen/information_flow @ dde387a7,
``experiments/utils/metrics/``, with uk-cliplab/representation-itl @ fd0da54) departs from them in ways that move
values by 5–100 % and reorder layers, so a researcher comparing with their numbers needs their arithmetic, by name:

- A, entropy (prompt, dataset; effective rank = exp of it): rows centred and unit-scaled, then the smaller of
  ``Z Zᵀ`` (N ≤ D) and ``Zᵀ Z`` (N > D) **clamped at 0 elementwise**; its positive eigenvalues, normalised to sum to
  one. The clamp makes the two kernels' spectra differ, so which one is used matters.
- D, E, curvature: token states centred and unit-scaled per prompt, then arccos(**|cos|**) between steps; a step of
  zero length turns by 0 and counts.
- F, InfoNCE: each view centred over the prompts and unit-scaled before the logits.
- H, LiDAR: each view centred over the prompts and unit-scaled before the scatter matrices. Their scatter matrices
  are float32 (I); here float64, so values differ from theirs by float32 rounding (about 1e-4 relative).
- J, DiME: for N > D the D×D covariances of the two views, their features permuted (N ≤ D: the paper's N×N Grams).

Two of their departures are bugs and are not reproduced: repitl's α = 2 "Frobenius" shortcut (C) divides by the
matrix size squared, adding 2·ln(size) to a trace-normalised entropy; here every α is exact. Their pooled vectors
and views are centred per dataloader batch of 2 (K), which leaves two antipodal rows per batch; here they are
centred over the whole set.
"""

from __future__ import annotations

import torch

from layer_mteb.metrics import representation as paper
from layer_mteb.metrics.representation import _RELATIVE_TOL, _check_rows, _pair, kernel_entropy, preprocess


def matrix_entropy(z: torch.Tensor, alpha: float = 1.0) -> float:
    """The authors' S_α of rows ``z`` [n, d]: centred unit rows, their kernel (the smaller of ``Z Zᵀ`` and ``Zᵀ Z``,
    ``Z Zᵀ`` when N ≤ D, as the authors choose) clamped at 0 elementwise, its positive spectrum (raw, nats)."""
    _check_rows(z, centred=True)
    return float(kernel_entropy(paper.smaller_kernel(preprocess(z)).clamp(min=0), alpha))


def token_entropies(
    hidden: torch.Tensor, mask: torch.Tensor, alpha: float = 1.0
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """The authors' prompt entropy of every prompt of a right-padded batch -> (raw entropies, real-token counts,
    valid), each [B]: a prompt of T ≤ D tokens on its clamped T×T Gram (padding rows are zero, so they add only zero
    eigenvalues), a longer one on its clamped D×D covariance (chosen by T, not the padded length). Under 2 real
    tokens or all identical: not valid, 0."""
    z = preprocess(hidden, mask)
    lengths = mask.sum(dim=-1)
    long = lengths > z.shape[-1]
    entropies = torch.zeros(z.shape[0], dtype=torch.float64, device=z.device)
    valid = (lengths >= 2) & ((z.norm(dim=-1) > 0).sum(dim=-1) > 0)
    for chosen, covariance in ((~long, False), (long, True)):
        rows = torch.nonzero(chosen & valid).flatten()
        if rows.numel():
            picked = z[rows].transpose(-1, -2) if covariance else z[rows]
            entropies[rows] = kernel_entropy((picked @ picked.transpose(-1, -2)).clamp(min=0), alpha)
    return entropies, lengths, valid


def token_curvatures(hidden: torch.Tensor, mask: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """The authors' curvature of every prompt of a right-padded batch -> (values, valid): token states centred and
    unit-scaled per prompt, mean of arccos(|cos|) over consecutive steps, a zero-length step turning by 0 (and
    counted). Under 3 real tokens: not valid, value 0 (their code averages such a prompt in as 0)."""
    z = preprocess(hidden, mask)
    steps = z[:, 1:] - z[:, :-1]
    lengths = steps.norm(dim=-1)
    pairs = mask[:, 2:].bool()  # right padding: steps k and k+1 both join real tokens
    moving = (lengths[:, :-1] > _RELATIVE_TOL) & (lengths[:, 1:] > _RELATIVE_TOL)
    cosine = (steps[:, :-1] * steps[:, 1:]).sum(-1) / (lengths[:, :-1] * lengths[:, 1:]).clamp(min=1e-300)
    angles = torch.where(moving, torch.arccos(cosine.abs().clamp(max=1.0)), torch.zeros_like(cosine))
    values, count = paper.masked_mean(angles, pairs)
    return values, count > 0


def curvature(z: torch.Tensor) -> float:
    """The authors' curvature of one trajectory ``z`` [T, D] (T ≥ 3)."""
    if z.ndim != 2 or z.shape[0] < 3:
        raise ValueError(f"curvature needs a trajectory [T ≥ 3, D], got shape {tuple(z.shape)}")
    values, _ = token_curvatures(z.unsqueeze(0), torch.ones(1, z.shape[0], dtype=torch.bool, device=z.device))
    return float(values[0])


def centred_views(views: torch.Tensor) -> torch.Tensor:
    """Each view of ``views`` [N, J, D] centred over the N prompts, then unit rows (the authors' view preprocessing)."""
    return torch.stack([preprocess(views[:, j]) for j in range(views.shape[1])], dim=1)


def infonce(a: torch.Tensor, b: torch.Tensor, temperature: float = 0.1) -> float:
    """The authors' InfoNCE: each view centred over the prompts and unit-scaled, then the paper's loss."""
    a, b = _pair(a, b)
    return paper.infonce(preprocess(a), preprocess(b), temperature)


def lidar(views: torch.Tensor, *, delta: float = 1e-4, alpha: float = 1.0) -> float:
    """The authors' LiDAR: each view centred over the prompts and unit-scaled, then the paper's LiDAR (float64)."""
    paper.check_views(views)
    return paper.lidar(centred_views(views.double()), delta=delta, alpha=alpha)


def dime(a: torch.Tensor, b: torch.Tensor, *, alpha: float = 1.0, n_permutations: int = 10, seed: int = 0) -> float:
    """The authors' DiME: N ≤ D is the paper's; N > D is E_P[S(C_A ∘ P C_B Pᵀ)] − S(C_A ∘ C_B) on the views' D×D
    covariances (centred unit rows), P permuting features, drawn as :func:`~.representation.dime` draws samples."""
    a, b = _pair(a, b)
    if a.shape[0] <= a.shape[1]:
        return paper.dime(a, b, alpha=alpha, n_permutations=n_permutations, seed=seed)
    za, zb = preprocess(a), preprocess(b)
    return paper.permuted_dime(za.T @ za, zb.T @ zb, alpha, n_permutations, seed)
