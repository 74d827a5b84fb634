"""Invariance metrics on pooled vectors of augmented views: how much of a prompt's identity survives noise.

- InfoNCE (τ = 0.1): two views, unit rows, logits A·Bᵀ/τ, cross-entropy to the matching row. Lower is more
  invariant; log N is chance.
- LiDAR (Thilak et al. 2023): J views per prompt are one class; the entropy of the spectrum of
  S_w^{-1/2} S_b S_w^{-1/2} (within-class scatter + δI whitening the between-class scatter). Higher means more
  directions that separate prompts beyond augmentation noise. Reported as an entropy (nats), as in Skean et al.
- DiME (Skean et al. 2023): mutual information between two views as a difference of matrix entropies,
  E_P[S(K_A ∘ P K_B Pᵀ)] − S(K_A ∘ K_B), with P random permutations. Higher means views agree on who is who.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

from layer_mteb.metrics.entropy import preprocess, renyi_entropy, single_threaded, spectrum


def infonce(a: torch.Tensor, b: torch.Tensor, temperature: float = 0.1) -> float:
    """InfoNCE loss (nats) of view ``a`` [N, D] predicting its partner in view ``b`` [N, D]."""
    a, b = _pair(a, b)
    logits = F.normalize(a, dim=-1) @ F.normalize(b, dim=-1).T / temperature
    return float(F.cross_entropy(logits, torch.arange(a.shape[0], device=a.device)))


def lidar(views: torch.Tensor, *, delta: float = 1e-4, alpha: float = 1.0) -> float:
    """LiDAR entropy (nats) of ``views`` [N prompts, J views, D].

    The eigenvalues of S_w^{-1/2} S_b S_w^{-1/2} equal those of L⁻¹ S_b L⁻ᵀ for the Cholesky factor S_w = L Lᵀ
    (both are similar to S_w⁻¹ S_b), which is much cheaper than an eigendecomposition of S_w for large D.
    """
    if views.ndim != 3 or views.shape[0] < 2 or views.shape[1] < 2:
        raise ValueError(f"LiDAR needs views [N ≥ 2 prompts, J ≥ 2 views, D], got shape {tuple(views.shape)}")
    _check_finite(views)
    views = views.double()
    n, j, d = views.shape
    class_means = views.mean(dim=1)
    between = class_means - class_means.mean(dim=0)
    within = (views - class_means.unsqueeze(1)).reshape(n * j, d)
    scatter_w = within.T @ within / (n * j) + delta * torch.eye(d, dtype=views.dtype, device=views.device)
    with single_threaded(scatter_w):
        factor = torch.linalg.cholesky(scatter_w)
        whitened = torch.linalg.solve_triangular(factor, between.T, upper=False).T / n**0.5
    return float(renyi_entropy(spectrum(whitened), alpha))


def dime(a: torch.Tensor, b: torch.Tensor, *, alpha: float = 1.0, n_permutations: int = 10, seed: int = 0) -> float:
    """DiME (nats) between paired views ``a``, ``b`` [N, D], averaged over ``n_permutations`` seeded shuffles.

    Kernels are cosine Gram matrices of centred rows (the same preprocessing as the entropies); their Hadamard
    product is positive semi-definite, so it is a valid joint kernel.
    """
    a, b = _pair(a, b)
    if n_permutations < 1:
        raise ValueError(f"n_permutations must be at least 1, got {n_permutations}")
    za, zb = preprocess(a), preprocess(b)
    kernel_a, kernel_b = za @ za.T, zb @ zb.T
    joint = _kernel_entropy(kernel_a * kernel_b, alpha)
    generator = torch.Generator().manual_seed(seed)
    shuffled = []
    for _ in range(n_permutations):
        order = torch.randperm(a.shape[0], generator=generator).to(a.device)
        shuffled.append(_kernel_entropy(kernel_a * kernel_b[order][:, order], alpha))
    return sum(shuffled) / n_permutations - joint


def _kernel_entropy(kernel: torch.Tensor, alpha: float) -> float:
    with single_threaded(kernel):
        eigenvalues = torch.linalg.eigvalsh(kernel)
    return float(renyi_entropy(eigenvalues.clamp(min=0), alpha))


def _pair(a: torch.Tensor, b: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    if a.ndim != 2 or a.shape != b.shape:
        raise ValueError(f"expected two views of the same shape [N, D], got {tuple(a.shape)} and {tuple(b.shape)}")
    if a.shape[0] < 2:
        raise ValueError(f"contrastive metrics need at least 2 prompts, got {a.shape[0]}")
    _check_finite(a)
    _check_finite(b)
    return a.double(), b.double()


def _check_finite(x: torch.Tensor) -> None:
    if not bool(torch.isfinite(x).all()):
        raise ValueError("representations contain NaN or inf; try --dtype float32")
