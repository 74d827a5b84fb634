"""The paper's representation metrics of a layer's vectors, by the paper's formulas (``--arithmetic paper``; the
authors' code computes several otherwise: :mod:`.authors_arithmetic`, docs/selection.md).

- Matrix-based Rényi entropy of rows Z (prompt/dataset entropy, effective rank): the spectrum of the smaller of
  ``Z Zᵀ`` and ``Zᵀ Z`` (the same non-zero spectrum) after centring and unit-scaling the rows (invariant to
  translation, scale and rotation); the authors' code also clamps the kernel at 0 elementwise, which changes it.
- Curvature: mean angle arccos(cos(v_k, v_{k+1})) between raw token steps (0 straight, π doubling back);
  ``absolute=True`` takes |cos| alone (the authors' code also centres and unit-scales the tokens first).
- On augmented views: InfoNCE (τ = 0.1; lower is more invariant, log N is chance), LiDAR (Thilak et al. 2023, the
  entropy of S_w^{-1/2} S_b S_w^{-1/2}) and DiME (Skean et al. 2023, E_P[S(K_A ∘ P K_B Pᵀ)] − S(K_A ∘ K_B)).
  Views are nlpaug's ``Sequential(SplitAug, RandomCharAug, KeyboardAug)``, seeded per (seed, text, view).
"""

from __future__ import annotations

import hashlib
import math
import random
from collections.abc import Sequence
from contextlib import AbstractContextManager, contextmanager, nullcontext

import numpy as np
import torch
import torch.nn.functional as F

from layer_mteb.common.errors import UserError
from layer_mteb.common.threads import torch_threads
from layer_mteb.metrics import NORMALIZATIONS, Normalization

_RELATIVE_TOL = 1e-10
_RETRIES = 5


def preprocess(z: torch.Tensor, mask: torch.Tensor | None = None) -> torch.Tensor:
    """Centre, then L2-normalise the rows (the authors' code does the same) in float64; ``z`` [n, d] or [B, T, d] with
    ``mask``. Masked rows and rows equal to the mean stay zero (only zero eigenvalues, never NaN)."""
    z = z.double()
    if mask is None:
        mask = torch.ones(z.shape[:-1], dtype=torch.bool, device=z.device)
    weights = mask.to(z.dtype).unsqueeze(-1)
    count = weights.sum(dim=-2, keepdim=True).clamp(min=1)
    centred = (z - (z * weights).sum(dim=-2, keepdim=True) / count) * weights
    norms = centred.norm(dim=-1, keepdim=True)
    # Rounding in the mean leaves ~1e-16 residue on rows equal to it; scaled up, that noise would look like signal.
    scale = (z.norm(dim=-1, keepdim=True) * weights).amax(dim=-2, keepdim=True)
    has_direction = norms > _RELATIVE_TOL * scale
    return torch.where(has_direction, centred / norms.clamp(min=torch.finfo(z.dtype).tiny), torch.zeros_like(centred))


def spectrum(z: torch.Tensor) -> torch.Tensor:
    """Eigenvalues (≥ 0, float64) of the smaller of ``Z Zᵀ`` and ``Zᵀ Z``, for [n, d] or batched [B, n, d] rows."""
    z = z.double()
    kernel = smaller_kernel(z)
    with single_threaded(kernel):
        eigenvalues = torch.linalg.eigvalsh(kernel)
    # Numerical rank: eigenvalues below the solver's noise floor are zero, as in numpy.linalg.matrix_rank.
    floor = eigenvalues.amax(dim=-1, keepdim=True).clamp(min=0) * max(z.shape[-2:]) * torch.finfo(eigenvalues.dtype).eps
    return torch.where(eigenvalues > floor, eigenvalues, torch.zeros_like(eigenvalues))


def smaller_kernel(z: torch.Tensor) -> torch.Tensor:
    """The smaller of ``Z Zᵀ`` and ``Zᵀ Z`` (``Z Zᵀ`` when N ≤ D): the same non-zero spectrum, at the least cost."""
    n, d = z.shape[-2], z.shape[-1]
    return z @ z.transpose(-1, -2) if n <= d else z.transpose(-1, -2) @ z


def single_threaded(tensor: torch.Tensor) -> AbstractContextManager[None]:
    """Run CPU eigensolvers on one thread. MKL's multi-threaded eigvalsh on these small matrices gains nothing,
    and on a machine whose cores are shared it spins: measured 0.16 s on one thread, up to 96 s on two."""
    return torch_threads(1) if tensor.device.type == "cpu" else nullcontext()


def renyi_entropy(eigenvalues: torch.Tensor, alpha: float = 1.0) -> torch.Tensor:
    """Rényi entropy (nats) of eigenvalues normalised to sum to one (``alpha = 1``: Shannon). All-zero spectra
    raise: an entropy of nothing is undefined, and NaN would hide it."""
    if bool((eigenvalues.sum(dim=-1) <= 0).any()):
        raise ValueError("matrix entropy of an all-zero matrix is undefined (e.g. a single row after centring)")
    return _renyi(eigenvalues, alpha)


def token_entropies(
    hidden: torch.Tensor, mask: torch.Tensor, alpha: float = 1.0
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Prompt entropy of every prompt of a right-padded batch -> (raw entropies, real-token counts, valid), each [B].
    Equal to :func:`matrix_entropy` per prompt; under 2 real tokens or all identical: not valid, value 0 (never NaN).
    """
    eigenvalues = spectrum(preprocess(hidden, mask))
    lengths = mask.sum(dim=-1)
    valid = (lengths >= 2) & (eigenvalues.sum(dim=-1) > 0)
    safe = torch.where(valid.unsqueeze(-1), eigenvalues, torch.ones_like(eigenvalues))
    return torch.where(valid, _renyi(safe, alpha), torch.zeros_like(lengths, dtype=safe.dtype)), lengths, valid


def _renyi(eigenvalues: torch.Tensor, alpha: float) -> torch.Tensor:
    if not alpha > 0:
        raise ValueError(f"alpha must be > 0, got {alpha}")
    p = eigenvalues / eigenvalues.sum(dim=-1, keepdim=True)
    if math.isclose(alpha, 1.0):
        return -torch.where(p > 0, p * torch.log(p.clamp(min=torch.finfo(p.dtype).tiny)), torch.zeros_like(p)).sum(-1)
    return torch.log(torch.where(p > 0, p**alpha, torch.zeros_like(p)).sum(-1)) / (1.0 - alpha)


def normalize_entropy(
    entropy: torch.Tensor | float, normalization: Normalization, n: int | torch.Tensor, d: int
) -> torch.Tensor | float:
    """Divide by log N, log D or min(log N, log D) (the maximum), or leave raw; ``n`` may be a tensor of counts."""
    if normalization == "raw":
        return entropy
    if normalization not in NORMALIZATIONS:
        raise ValueError(f"normalization must be one of {', '.join(NORMALIZATIONS)}; got {normalization!r}")
    counts = isinstance(n, torch.Tensor)
    smallest_n = int(n.min()) if counts else n
    if min(smallest_n, d) < 2:
        raise ValueError(f"cannot normalise an entropy of {smallest_n} rows of dimension {d}: log 1 = 0")
    log_n, log_d = (torch.log(n.double()) if counts else math.log(n)), math.log(d)
    largest = torch.clamp(log_n, max=log_d) if counts else min(log_n, log_d)
    return entropy / {"logN": log_n, "logD": log_d, "maxEntropy": largest}[normalization]


def matrix_entropy(
    z: torch.Tensor, alpha: float = 1.0, *, normalization: Normalization = "raw", center_and_normalize: bool = True
) -> float:
    """S_α(Z) = 1/(1−α) · log Σ (λ_i / tr K)^α for one matrix of rows ``z`` [n, d]."""
    _check_rows(z, centred=center_and_normalize)
    z = preprocess(z) if center_and_normalize else z
    value = renyi_entropy(spectrum(z), alpha)
    return float(normalize_entropy(value, normalization, z.shape[0], z.shape[1]))


def effective_rank(z: torch.Tensor, *, center_and_normalize: bool = True) -> float:
    """exp(S_1(Z)), between 1 and rank(K); never above Roy & Vetterli's (on singular values, a flatter spectrum)."""
    return math.exp(matrix_entropy(z, 1.0, center_and_normalize=center_and_normalize))


def _check_rows(z: torch.Tensor, *, centred: bool) -> None:
    """A finite, non-empty matrix of rows ``z`` [n, d]; at least 2 of them when they are to be ``centred``."""
    if z.ndim != 2:
        raise ValueError(f"expected a matrix of rows [n, d], got shape {tuple(z.shape)}")
    if z.shape[0] < 1 or z.shape[1] < 1:
        raise ValueError(f"matrix entropy of an empty matrix {tuple(z.shape)} is undefined")
    _check_finite(z)
    if centred and z.shape[0] < 2:
        raise ValueError("matrix entropy after centring needs at least 2 rows: one row centred on itself is zero")


def token_curvatures(
    hidden: torch.Tensor, mask: torch.Tensor, *, absolute: bool = False
) -> tuple[torch.Tensor, torch.Tensor]:
    """Curvature of every prompt of a right-padded batch -> (values, valid). Zero-length steps have no direction:
    their angles are skipped; under 3 real tokens or no angle left: not valid, value 0."""
    z = hidden.double() * mask.unsqueeze(-1).to(torch.float64)
    steps = z[:, 1:] - z[:, :-1]
    lengths = steps.norm(dim=-1)
    scale = z.norm(dim=-1).amax(dim=-1, keepdim=True)
    real_steps = mask[:, 1:].bool() & mask[:, :-1].bool() & (lengths > _RELATIVE_TOL * scale)
    cosine = (steps[:, :-1] * steps[:, 1:]).sum(-1) / (lengths[:, :-1] * lengths[:, 1:]).clamp(min=1e-300)
    angles = torch.arccos((cosine.abs() if absolute else cosine).clamp(-1.0, 1.0))
    values, count = masked_mean(angles, real_steps[:, :-1] & real_steps[:, 1:])
    return values, count > 0


def masked_mean(values: torch.Tensor, keep: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """The mean of ``values`` where ``keep`` holds, along the last axis -> (means, counts); 0 where none is kept."""
    count = keep.sum(dim=-1)
    total = torch.where(keep, values, torch.zeros_like(values)).sum(dim=-1)
    return torch.where(count > 0, total / count.clamp(min=1), torch.zeros_like(total)), count


def curvature(z: torch.Tensor, *, absolute: bool = False) -> float:
    """Mean turning angle (radians) of one trajectory ``z`` [T, D]; needs at least 3 states and 2 non-zero steps."""
    if z.ndim != 2:
        raise ValueError(f"expected a trajectory [T, D], got shape {tuple(z.shape)}")
    if z.shape[0] < 3:
        raise ValueError(f"curvature needs at least 3 token states (two steps), got {z.shape[0]}")
    _check_finite(z)
    mask = torch.ones(1, z.shape[0], dtype=torch.bool, device=z.device)
    values, valid = token_curvatures(z.unsqueeze(0), mask, absolute=absolute)
    if not bool(valid[0]):
        raise ValueError("curvature is undefined: no two consecutive non-zero steps in the trajectory")
    return float(values[0])


def infonce(a: torch.Tensor, b: torch.Tensor, temperature: float = 0.1) -> float:
    """InfoNCE loss (nats) of view ``a`` [N, D] predicting its partner in view ``b`` [N, D]."""
    a, b = _pair(a, b)
    logits = F.normalize(a, dim=-1) @ F.normalize(b, dim=-1).T / temperature
    return float(F.cross_entropy(logits, torch.arange(a.shape[0], device=a.device)))


def lidar(views: torch.Tensor, *, delta: float = 1e-4, alpha: float = 1.0) -> float:
    """LiDAR entropy (nats) of ``views`` [N, J, D]; uses L⁻¹ S_b L⁻ᵀ (Cholesky S_w = L Lᵀ, the same spectrum as
    S_w^{-1/2} S_b S_w^{-1/2}), far cheaper than an eigendecomposition of S_w for large D."""
    check_views(views)
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


def check_views(views: torch.Tensor) -> None:
    """LiDAR's input: [N ≥ 2 prompts, J ≥ 2 views, D]."""
    if views.ndim != 3 or views.shape[0] < 2 or views.shape[1] < 2:
        raise ValueError(f"LiDAR needs views [N ≥ 2 prompts, J ≥ 2 views, D], got shape {tuple(views.shape)}")


def dime(a: torch.Tensor, b: torch.Tensor, *, alpha: float = 1.0, n_permutations: int = 10, seed: int = 0) -> float:
    """DiME (nats) between paired views [N, D] over ``n_permutations`` seeded shuffles; the kernels' Hadamard
    product (cosine Grams of centred rows) is positive semi-definite, a valid joint kernel."""
    a, b = _pair(a, b)
    za, zb = preprocess(a), preprocess(b)
    return permuted_dime(za @ za.T, zb @ zb.T, alpha, n_permutations, seed)


def permuted_dime(
    kernel_a: torch.Tensor, kernel_b: torch.Tensor, alpha: float, n_permutations: int, seed: int
) -> float:
    """E_P[S(K_A ∘ P K_B Pᵀ)] − S(K_A ∘ K_B) over ``n_permutations`` permutations P of the kernels' rows and columns
    (samples of Grams, features of covariances), drawn from a generator seeded with ``seed``."""
    if n_permutations < 1:
        raise ValueError(f"n_permutations must be at least 1, got {n_permutations}")
    joint = float(kernel_entropy(kernel_a * kernel_b, alpha))
    generator = torch.Generator().manual_seed(seed)
    orders = (torch.randperm(len(kernel_a), generator=generator).to(kernel_a.device) for _ in range(n_permutations))
    return sum(float(kernel_entropy(kernel_a * kernel_b[o][:, o], alpha)) for o in orders) / n_permutations - joint


def kernel_entropy(kernel: torch.Tensor, alpha: float = 1.0) -> torch.Tensor:
    """Rényi entropy of a symmetric ``kernel``'s (or a batch's) positive eigenvalues normalised to sum to one: a
    negative one is rounding in a positive semi-definite kernel, and in a clamped one (the authors' arithmetic) it is
    dropped as repitl drops it. No positive eigenvalue raises."""
    with single_threaded(kernel):
        eigenvalues = torch.linalg.eigvalsh(kernel.double())
    return renyi_entropy(eigenvalues.clamp(min=0), alpha)


def _pair(a: torch.Tensor, b: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    if a.ndim != 2 or a.shape != b.shape:
        raise ValueError(f"expected two views of the same shape [N, D], got {tuple(a.shape)} and {tuple(b.shape)}")
    if a.shape[0] < 2:
        raise ValueError(f"contrastive metrics need at least 2 prompts, got {a.shape[0]}")
    _check_finite(a, b)
    return a.double(), b.double()


def _check_finite(*tensors: torch.Tensor) -> None:
    if not all(bool(torch.isfinite(x).all()) for x in tensors):
        raise ValueError("representations contain NaN or inf; try --dtype float32")


def augment(
    texts: Sequence[str], n_views: int = 2, *, p: float = 0.3, seed: int = 0, max_words: int | None = None
) -> list[list[str]]:
    """``n_views`` augmented versions of each text; ``p``: share of words (and of a word's characters) touched.

    nlpaug caps each augmenter at 10 words, meaningless for paragraphs: ``max_words=None`` lifts it. A view equal to
    the clean text (nlpaug skips words under 4 characters) is retried, then gets one random character inserted.
    """
    if n_views < 1:
        raise ValueError(f"n_views must be at least 1, got {n_views}")
    if not 0 < p <= 1:
        raise ValueError(f"augmentation probability p must be in (0, 1], got {p}")
    augmenter = _augmenter(p, max_words)
    return [[_view(augmenter, text, _seed(seed, text, j)) for j in range(n_views)] for text in texts]


def _augmenter(p: float, max_words: int | None):
    try:
        import nlpaug.augmenter.char as nac
        import nlpaug.augmenter.word as naw
        import nlpaug.flow as naf
    except ImportError:
        raise UserError(
            "InfoNCE, LiDAR and DiME need nlpaug: pip install 'layer_mteb[metrics]' (or --views 0 to skip them)"
        ) from None
    chars = {"aug_char_p": p, "aug_word_p": p, "aug_word_max": max_words}  # the character augmenters' shared settings
    return naf.Sequential(
        [naw.SplitAug(aug_p=p, aug_max=max_words), nac.RandomCharAug(**chars), nac.KeyboardAug(**chars)]
    )


def _view(augmenter, text: str, seed: int) -> str:
    for attempt in range(_RETRIES):
        with _seeded(seed + attempt):
            out = augmenter.augment(text)
        view = out[0] if isinstance(out, list) and out else out  # nlpaug ≥ 1.1.11 returns a list
        if isinstance(view, str) and view and view != text:
            return view
    rng = random.Random(seed)
    position = rng.randrange(len(text) + 1)
    return text[:position] + rng.choice("abcdefghijklmnopqrstuvwxyz") + text[position:]


def _seed(seed: int, text: str, view: int) -> int:
    digest = hashlib.sha256(f"{seed}\x00{view}\x00{text}".encode()).digest()
    return int.from_bytes(digest[:4], "little")


@contextmanager
def _seeded(seed: int):
    """nlpaug draws from the global ``random`` and ``numpy.random`` states: seed them, then put them back."""
    py_state, np_state = random.getstate(), np.random.get_state()
    random.seed(seed)
    np.random.seed(seed)
    try:
        yield
    finally:
        random.setstate(py_state)
        np.random.set_state(np_state)
