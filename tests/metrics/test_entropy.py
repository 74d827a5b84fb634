"""Matrix-based Rényi entropy: exact values where the spectrum is known, invariances, and clear failures."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from layer_mteb.metrics.representation import (
    NORMALIZATIONS,
    effective_rank,
    matrix_entropy,
    normalize_entropy,
    renyi_entropy,
    spectrum,
    token_entropies,
)

ALPHAS = [0.5, 1.0, 2.0, 3.0]


def _random(n: int, d: int, seed: int = 0) -> torch.Tensor:
    return torch.randn(n, d, generator=torch.Generator().manual_seed(seed), dtype=torch.float64)


@pytest.mark.parametrize("alpha", ALPHAS)
@pytest.mark.parametrize("rank", [1, 2, 5, 8])
def test_uniform_spectrum_gives_log_rank(alpha: float, rank: int) -> None:
    rows = torch.linalg.qr(_random(16, rank))[0].T * 2.5  # `rank` orthogonal rows of equal length
    assert matrix_entropy(rows, alpha, center_and_normalize=False) == pytest.approx(math.log(rank), abs=1e-10)


@pytest.mark.parametrize("alpha", ALPHAS)
def test_centred_simplex_has_uniform_spectrum_of_rank_r_minus_1(alpha: float) -> None:
    # Centring the r standard basis vectors leaves r − 1 equal eigenvalues.
    assert matrix_entropy(torch.eye(6), alpha) == pytest.approx(math.log(5), abs=1e-10)


@pytest.mark.parametrize("center", [True, False])
def test_rank_one_has_zero_entropy(center: bool) -> None:
    direction = _random(1, 12)
    rows = torch.tensor([[1.0], [2.0], [-3.0], [0.5]], dtype=torch.float64) * direction
    assert matrix_entropy(rows, center_and_normalize=center) == pytest.approx(0.0, abs=1e-12)


def test_alpha_one_is_the_limit_of_renyi() -> None:
    z = _random(10, 6)
    shannon = matrix_entropy(z, 1.0)
    for eps in (1e-4, 1e-6):
        assert matrix_entropy(z, 1.0 + eps) == pytest.approx(shannon, abs=10 * eps)
        assert matrix_entropy(z, 1.0 - eps) == pytest.approx(shannon, abs=10 * eps)
    # Rényi entropies fall with alpha
    values = [matrix_entropy(z, a) for a in (0.5, 1.0, 2.0, 4.0)]
    assert values == sorted(values, reverse=True)


@pytest.mark.parametrize("shape", [(5, 20), (20, 5)])
@pytest.mark.parametrize("alpha", ALPHAS)
def test_gram_and_covariance_give_the_same_entropy(shape: tuple[int, int], alpha: float) -> None:
    z = _random(*shape)
    gram = renyi_entropy(_nonzero_eigenvalues(z @ z.T), alpha)
    covariance = renyi_entropy(_nonzero_eigenvalues(z.T @ z), alpha)
    assert float(gram) == pytest.approx(float(covariance), abs=1e-10)
    assert matrix_entropy(z, alpha, center_and_normalize=False) == pytest.approx(float(gram), abs=1e-10)
    assert spectrum(z).shape[-1] == min(shape)


def _nonzero_eigenvalues(kernel: torch.Tensor) -> torch.Tensor:
    """The larger kernel has extra eigenvalues that are zero up to rounding; for alpha < 1 even 1e-15 counts."""
    eigenvalues = torch.linalg.eigvalsh(kernel)
    return torch.where(eigenvalues > 1e-12 * eigenvalues.max(), eigenvalues, torch.zeros_like(eigenvalues))


@pytest.mark.parametrize("center", [True, False])
def test_invariant_to_rotation_and_scale(center: bool) -> None:
    z = _random(12, 7)
    rotation = torch.linalg.qr(_random(7, 7, seed=1))[0]
    base = matrix_entropy(z, center_and_normalize=center)
    assert matrix_entropy(z @ rotation, center_and_normalize=center) == pytest.approx(base, abs=1e-10)
    assert matrix_entropy(3.7 * z, center_and_normalize=center) == pytest.approx(base, abs=1e-10)


def test_preprocessing_makes_it_translation_invariant() -> None:
    z = _random(12, 7)
    assert matrix_entropy(z + 100.0) == pytest.approx(matrix_entropy(z), abs=1e-8)
    assert matrix_entropy(z + 100.0, center_and_normalize=False) < matrix_entropy(z, center_and_normalize=False)


@pytest.mark.parametrize("shape", [(6, 30), (30, 6), (10, 10)])
def test_effective_rank_is_exp_entropy_and_bounded(shape: tuple[int, int]) -> None:
    z = _random(*shape)
    erank = effective_rank(z, center_and_normalize=False)
    assert erank == pytest.approx(math.exp(matrix_entropy(z, center_and_normalize=False)))
    singular = np.linalg.svd(z.numpy(), compute_uv=False)
    rank = int(np.linalg.matrix_rank(z.numpy()))
    # Roy & Vetterli's effective rank (entropy of normalised singular values) is at least exp(S_1) of the Gram
    # spectrum (squared singular values: a sharper distribution), and both lie in [1, rank].
    p = singular / singular.sum()
    roy_vetterli = math.exp(-(p * np.log(p)).sum())
    assert 1.0 <= erank <= roy_vetterli + 1e-9 <= rank + 1e-9


def test_normalizations() -> None:
    value = 1.5
    assert normalize_entropy(value, "raw", 10, 100) == value
    assert normalize_entropy(value, "logN", 10, 100) == pytest.approx(value / math.log(10))
    assert normalize_entropy(value, "logD", 10, 100) == pytest.approx(value / math.log(100))
    assert normalize_entropy(value, "maxEntropy", 10, 100) == pytest.approx(value / math.log(10))
    assert normalize_entropy(value, "maxEntropy", 100, 10) == pytest.approx(value / math.log(10))
    z = _random(9, 40)
    for normalization in NORMALIZATIONS:
        assert 0 <= matrix_entropy(z, normalization=normalization) <= math.log(9) + 1e-12
    assert matrix_entropy(z, normalization="maxEntropy") <= 1 + 1e-12


def test_batched_token_entropies_equal_one_prompt_at_a_time() -> None:
    lengths = [5, 1, 3, 8, 2]
    hidden = _random(len(lengths) * 8, 4).reshape(len(lengths), 8, 4) * 3 + 1
    mask = torch.tensor([[1] * n + [0] * (8 - n) for n in lengths])
    hidden[mask == 0] = 123.0  # garbage in padding must not matter
    values, counted, valid = token_entropies(hidden, mask, alpha=1.0)
    assert counted.tolist() == lengths
    assert valid.tolist() == [True, False, True, True, True]
    for row, n in enumerate(lengths):
        if n >= 2:
            assert float(values[row]) == pytest.approx(matrix_entropy(hidden[row, :n]), abs=1e-10)
    assert torch.isfinite(values).all()


def test_identical_tokens_are_an_invalid_prompt_not_noise() -> None:
    hidden = torch.ones(1, 4, 6) * torch.tensor([0.3, -1.0, 2.0, 0.1, 5.0, 7.0])
    values, _, valid = token_entropies(hidden, torch.ones(1, 4, dtype=torch.long))
    assert not bool(valid[0]) and float(values[0]) == 0.0
    with pytest.raises(ValueError, match="all-zero"):
        matrix_entropy(hidden[0])


def test_clear_errors() -> None:
    with pytest.raises(ValueError, match="at least 2 rows"):
        matrix_entropy(_random(1, 5))
    bad = _random(4, 5)
    bad[2, 1] = float("nan")
    with pytest.raises(ValueError, match="NaN"):
        matrix_entropy(bad)
    with pytest.raises(ValueError, match="alpha"):
        matrix_entropy(_random(4, 5), alpha=0.0)
    with pytest.raises(ValueError, match="log 1"):
        normalize_entropy(1.0, "logN", 1, 10)
    with pytest.raises(ValueError, match="normalization"):
        normalize_entropy(1.0, "bogus", 4, 10)  # type: ignore[arg-type]


def test_eigensolvers_leave_the_thread_setting_as_they_found_it() -> None:
    threads = torch.get_num_threads()
    matrix_entropy(_random(20, 8))
    token_entropies(_random(3 * 5, 4).reshape(3, 5, 4), torch.ones(3, 5, dtype=torch.long))
    assert torch.get_num_threads() == threads
