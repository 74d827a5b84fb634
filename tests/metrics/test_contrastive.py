"""InfoNCE, LiDAR, DiME: exact values where the maths gives them, true pairings above shuffled ones, seeded."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from layer_mteb.metrics.representation import augment, dime, infonce, lidar


def _randn(*shape: int, seed: int = 0) -> torch.Tensor:
    return torch.randn(*shape, generator=torch.Generator().manual_seed(seed), dtype=torch.float64)


def test_infonce_identical_orthogonal_views_is_near_zero() -> None:
    n = 16
    views = torch.eye(n) * 3.0
    expected = math.log(1 + (n - 1) * math.exp(-1 / 0.1))  # diagonal logit 10, the others 0
    assert infonce(views, views) == pytest.approx(expected, rel=1e-9)
    assert infonce(views, views) < 1e-3


def test_infonce_random_views_is_near_chance() -> None:
    n = 32
    loss = infonce(_randn(n, 4096), _randn(n, 4096, seed=1))
    assert loss == pytest.approx(math.log(n), abs=0.2)


def test_lidar_of_a_regular_simplex_is_log_of_classes_minus_one() -> None:
    # Class means: a centred simplex (N − 1 equal between-class eigenvalues); views: ± steps along every axis
    # (isotropic within-class scatter). Whitening keeps the spectrum uniform: LiDAR = log(N − 1), its maximum.
    n = 6
    steps = torch.cat([torch.eye(n), -torch.eye(n)]) * 0.3
    views = (torch.eye(n) - 1 / n).unsqueeze(1) + steps.unsqueeze(0)
    assert lidar(views.double()) == pytest.approx(math.log(n - 1), abs=1e-6)
    order = torch.randperm(views.shape[0] * views.shape[1], generator=torch.Generator().manual_seed(0))
    shuffled = views.reshape(-1, n)[order].reshape(views.shape)
    assert lidar(shuffled.double()) < math.log(n - 1) - 0.1


def test_dime_true_pairs_score_above_shuffled_pairs() -> None:
    a = _randn(64, 4)
    b = a + 0.05 * _randn(64, 4, seed=1)
    shuffled = b[torch.randperm(64, generator=torch.Generator().manual_seed(2))]
    assert dime(a, b) > 0.2
    assert abs(dime(a, shuffled)) < 0.1
    assert dime(a, b) > dime(a, shuffled) + 0.2


def test_infonce_true_pairs_score_below_shuffled_pairs() -> None:
    a = _randn(64, 16)
    b = a + 0.1 * _randn(64, 16, seed=1)
    shuffled = b[torch.randperm(64, generator=torch.Generator().manual_seed(2))]
    assert infonce(a, b) < infonce(a, shuffled) - 1.0


def test_infonce_of_a_known_permutation_is_exact() -> None:
    # each row's partner is orthogonal to it (logit 0) while one other row matches it exactly (logit 1 / τ = 10)
    n = 16
    views = torch.eye(n) * 3.0
    assert infonce(views, views.roll(1, dims=0)) == pytest.approx(math.log(math.exp(10) + n - 1), rel=1e-9)
    # relabelling the prompts of both views together changes nothing
    order = torch.randperm(n, generator=torch.Generator().manual_seed(0))
    a, b = _randn(n, 8), _randn(n, 8, seed=1)
    assert infonce(a[order], b[order]) == pytest.approx(infonce(a, b), rel=1e-12)


def _entropy_of_kernel(kernel: np.ndarray) -> float:
    p = np.linalg.eigvalsh(kernel).clip(min=0)
    p = p[p > 1e-12] / p.sum()
    return float(-(p * np.log(p)).sum())


def _cosine_kernel(z: torch.Tensor) -> np.ndarray:
    centred = z.numpy() - z.numpy().mean(axis=0)
    unit = centred / np.linalg.norm(centred, axis=1, keepdims=True)
    return unit @ unit.T


def test_dime_is_the_entropy_gap_to_the_permutations_its_seed_draws() -> None:
    """DiME = mean over P of S(K_a ∘ P K_b Pᵀ) − S(K_a ∘ K_b), computed here from the definition with numpy, for the
    permutations ``torch.randperm`` draws from the given seed, whatever the global random state."""
    a = _randn(12, 5)
    b = a + 0.3 * _randn(12, 5, seed=1)
    ka, kb = _cosine_kernel(a), _cosine_kernel(b)
    generator = torch.Generator().manual_seed(3)
    orders = [torch.randperm(12, generator=generator).numpy() for _ in range(4)]
    shuffled = [_entropy_of_kernel(ka * kb[order][:, order]) for order in orders]
    want = sum(shuffled) / 4 - _entropy_of_kernel(ka * kb)
    torch.manual_seed(99)  # the global generator is not the one DiME draws from
    assert dime(a, b, n_permutations=4, seed=3) == pytest.approx(want, rel=1e-9, abs=1e-12)
    assert dime(a, b, n_permutations=4, seed=4) != pytest.approx(want, rel=1e-6)


def test_dime_is_zero_when_one_view_cannot_tell_prompts_apart() -> None:
    # b's prompts are the corners of a regular simplex: every permutation leaves K_b as it is
    n = 6
    simplex = torch.eye(n, dtype=torch.float64) - 1 / n
    assert dime(_randn(n, n), simplex, seed=5) == pytest.approx(0.0, abs=1e-12)


def test_lidar_ignores_the_order_of_prompts_and_views_and_a_rotation() -> None:
    views = _randn(10, 4, 8)
    generator = torch.Generator().manual_seed(0)
    prompts = torch.randperm(10, generator=generator)
    per_prompt = torch.stack([views[i, torch.randperm(4, generator=generator)] for i in range(10)])
    rotation, _ = torch.linalg.qr(_randn(8, 8, seed=2))
    want = lidar(views)
    assert lidar(per_prompt[prompts]) == pytest.approx(want, rel=1e-9)
    assert lidar(views @ rotation) == pytest.approx(want, rel=1e-9)
    mixed = views.transpose(0, 1).reshape(10, 4, 8)  # views regrouped across prompts: a different answer
    assert lidar(mixed) != pytest.approx(want, rel=1e-3)


def test_clear_errors() -> None:
    with pytest.raises(ValueError, match="same shape"):
        infonce(_randn(4, 3), _randn(5, 3))
    with pytest.raises(ValueError, match="at least 2"):
        dime(_randn(1, 3), _randn(1, 3))
    with pytest.raises(ValueError, match="J ≥ 2"):
        lidar(_randn(5, 1, 3))
    nan = _randn(4, 3)
    nan[0, 0] = float("nan")
    with pytest.raises(ValueError, match="NaN"):
        infonce(nan, _randn(4, 3))


def test_augmented_views_are_seeded_noisy_and_never_the_clean_text() -> None:
    texts = ["The quick brown fox jumps over the lazy dog near the riverbank.", "Hi", "", "a b"]
    views = augment(texts, 3, seed=7)
    assert [len(v) for v in views] == [3, 3, 3, 3]
    for text, per_text in zip(texts, views, strict=True):
        assert all(isinstance(v, str) and v != text for v in per_text)
    assert len(set(views[0])) == 3  # different views of one text differ
    assert augment(texts, 3, seed=7) == views
    assert augment(texts[:1], 3, seed=7)[0] == views[0]  # a text's views do not depend on its neighbours
    assert augment(texts, 3, seed=8) != views
