"""``--arithmetic authors``: each metric as the authors' final code computes it. Exact hand-derived cases pin every
departure from the paper's formulas (the clamp, |cos| on centred unit tokens, centred views, DiME's D×D covariance
for N > D), and each metric equals a plain numpy re-derivation of their formula to 1e-10; the paper's stay exact."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest
import torch
from _metric_fixtures import TEXTS, tiny_gpt2
from conftest import write_tiny_gpt2_scores

from layer_mteb.analysis.report.build import arithmetic_notes
from layer_mteb.analysis.report.merged import Runs, load_runs
from layer_mteb.analysis.runs.folders import one_arithmetic
from layer_mteb.analysis.selection.correlation import correlate
from layer_mteb.analysis.selection.picks import select_layers
from layer_mteb.common.config import ARITHMETICS, EncodeConfig
from layer_mteb.common.errors import UserError
from layer_mteb.common.run_folder import RunFolder
from layer_mteb.metrics import METRICS_TABLE
from layer_mteb.metrics import authors_arithmetic as authors
from layer_mteb.metrics import representation as paper
from layer_mteb.metrics.metric_settings import MetricSettings
from layer_mteb.metrics.runner import compute_metrics
from layer_mteb.paper.regenerate import arithmetic_line

SQRT3 = math.sqrt(3)
#: three unit vectors 120° apart (mean zero, so centring and unit rows leave them as they are)
TRIANGLE = [[1.0, 0.0], [-0.5, SQRT3 / 2], [-0.5, -SQRT3 / 2]]


def _t(rows) -> torch.Tensor:
    return torch.tensor(rows, dtype=torch.float64)


def _shannon(p) -> float:
    p = np.asarray(p, dtype=float)
    return float(-(p * np.log(p)).sum())


# --- exact hand-derived cases -----------------------------------------------------------------------------------


@pytest.mark.parametrize("alpha", [1.0, 2.0, 0.5])
def test_the_clamp_turns_a_rank_two_gram_of_three_rows_into_the_identity(alpha: float) -> None:
    # Gram of the triangle's rows: 1 on the diagonal, −1/2 off it; eigenvalues 3/2, 3/2, 0 -> ln 2 at every α.
    # Clamped at 0 it is the 3×3 identity -> ln 3 at every α.
    z = _t([[*row, 0.0] for row in TRIANGLE])  # N = D = 3: the authors take the N×N Gram
    assert paper.matrix_entropy(z, alpha) == pytest.approx(math.log(2), abs=1e-12)
    assert authors.matrix_entropy(z, alpha) == pytest.approx(math.log(3), abs=1e-12)
    assert math.exp(authors.matrix_entropy(z)) == pytest.approx(3.0, abs=1e-12)  # effective rank 3, not 2


def test_for_more_rows_than_dimensions_the_clamp_bites_the_covariance() -> None:
    # rows at 0, π, −π/4, 3π/4 (mean zero, unit): covariance [[3, −1], [−1, 1]], eigenvalues 2 ± √2;
    # clamped: [[3, 0], [0, 1]] -> p = 3/4, 1/4
    r = 1 / math.sqrt(2)
    z = _t([[1, 0], [-1, 0], [r, -r], [-r, r]])
    assert paper.matrix_entropy(z) == pytest.approx(_shannon([(2 + math.sqrt(2)) / 4, (2 - math.sqrt(2)) / 4]))
    assert authors.matrix_entropy(z) == pytest.approx(_shannon([0.75, 0.25]), abs=1e-12)


def test_prompt_entropy_of_a_padded_batch_uses_each_prompts_own_kernel() -> None:
    # prompt 0: the 3×3 case above, one padding token (3 ≤ D: its Gram, clamped to I: ln 3); prompt 1: the 4-row
    # case with a zero third coordinate (4 > D = 3: its covariance, clamped to diag(3, 1, 0): p = 3/4, 1/4)
    r = 1 / math.sqrt(2)
    first = [[*row, 0.0] for row in TRIANGLE] + [[0.0, 0.0, 0.0]]
    second = [[1, 0, 0], [-1, 0, 0], [r, -r, 0], [-r, r, 0]]
    hidden = _t([first, second])
    mask = torch.tensor([[1, 1, 1, 0], [1, 1, 1, 1]], dtype=torch.bool)
    entropies, lengths, valid = authors.token_entropies(hidden, mask)
    assert lengths.tolist() == [3, 4] and valid.all()
    assert entropies.tolist() == pytest.approx([math.log(3), _shannon([0.75, 0.25])], abs=1e-12)


def test_an_obtuse_turn_is_its_acute_supplement_under_the_authors_cos() -> None:
    # the triangle's steps (−3/2, √3/2) then (0, −√3): cos = −1/2, a 120° turn; |cos| makes it 60°
    z = _t(TRIANGLE)
    assert paper.curvature(z) == pytest.approx(2 * math.pi / 3, abs=1e-12)
    assert authors.curvature(z) == pytest.approx(math.pi / 3, abs=1e-12)


def test_the_authors_curvature_is_of_centred_unit_tokens() -> None:
    # the triangle scaled and shifted: centring undoes the shift, unit rows the scale, so still 60°
    z = 5.0 * _t(TRIANGLE) + _t([[2.0, -7.0]])
    assert authors.curvature(z) == pytest.approx(math.pi / 3, abs=1e-12)
    # a zero-length step turns by 0 and counts: A, A, B has one turn, of 0
    repeated = _t([[1.0, 0.0], [1.0, 0.0], [0.0, 1.0]])
    assert authors.curvature(repeated) == 0.0
    with pytest.raises(ValueError, match="no two consecutive non-zero steps"):
        paper.curvature(repeated)


def test_infonce_views_are_centred_over_the_prompts() -> None:
    # a = (1,0), (0,1): centred and unit, u and −u with u = (1,−1)/√2; b = (2,0), (0,1): v and −v, v = (2,−1)/√5.
    # logits [[c, −c], [−c, c]]/τ with c = u·v = 3/√10: loss log(1 + e^{−2c/τ}).
    # The paper's unit rows (1,0), (0,1) for both: log(1 + e^{−1/τ})
    a, b = _t([[1, 0], [0, 1]]), _t([[2, 0], [0, 1]])
    c = 3 / math.sqrt(10)
    assert authors.infonce(a, b) == pytest.approx(math.log1p(math.exp(-20 * c)), rel=1e-12)
    assert paper.infonce(a, b) == pytest.approx(math.log1p(math.exp(-10)), rel=1e-12)


def test_lidar_views_are_centred_per_view_and_unit_rows() -> None:
    views = torch.randn(6, 3, 4, generator=torch.Generator().manual_seed(0), dtype=torch.float64)
    shifted = views + torch.randn(1, 3, 4, generator=torch.Generator().manual_seed(1), dtype=torch.float64)
    scaled = shifted * torch.rand(1, 3, 1, generator=torch.Generator().manual_seed(2), dtype=torch.float64).add(0.5)
    # a translation and a scale of each view: nothing to the authors' LiDAR, something to the paper's
    assert authors.lidar(scaled) == pytest.approx(authors.lidar(views), abs=1e-10)
    assert abs(paper.lidar(scaled) - paper.lidar(views)) > 1e-3
    assert authors.lidar(views) == pytest.approx(paper.lidar(authors.centred_views(views)), abs=1e-12)


def test_dime_for_more_prompts_than_dimensions_permutes_the_covariances_features() -> None:
    # both views the 4 rows of the covariance case: C = [[3, −1], [−1, 1]]; joint C∘C = [[9, 1], [1, 1]], eigenvalues
    # 5 ± √17; with the two features swapped C∘PCP = [[3, 1], [1, 3]], eigenvalues 4, 2
    r = 1 / math.sqrt(2)
    a = _t([[1, 0], [-1, 0], [r, -r], [-r, r]])
    joint = _shannon([(5 + math.sqrt(17)) / 10, (5 - math.sqrt(17)) / 10])
    swapped = _shannon([2 / 3, 1 / 3])
    generator = torch.Generator().manual_seed(3)
    swaps = sum(torch.randperm(2, generator=generator).tolist() == [1, 0] for _ in range(10))
    expected = swaps / 10 * (swapped - joint)
    assert 0 < swaps < 10
    assert authors.dime(a, a, n_permutations=10, seed=3) == pytest.approx(expected, abs=1e-12)
    assert paper.dime(a, a, n_permutations=10, seed=3) != pytest.approx(expected, abs=1e-3)


# --- each metric against a plain numpy re-derivation of the authors' formula ------------------------------------


def _np_normalize(rows: np.ndarray) -> np.ndarray:
    centred = rows - rows.mean(axis=0)
    return centred / np.linalg.norm(centred, axis=1, keepdims=True)


def _np_positive_entropy(kernel: np.ndarray, alpha: float) -> float:
    eigenvalues = np.linalg.eigvalsh(kernel)
    p = eigenvalues[eigenvalues > 0]
    p = p / p.sum()
    return float(-(p * np.log(p)).sum()) if alpha == 1 else float(np.log((p**alpha).sum()) / (1 - alpha))


def _np_entropy(rows: np.ndarray, alpha: float = 1.0) -> float:
    """compute_entropy: Zᵀ Z for N > D else Z Zᵀ, clamped at 0, divided by its trace, repitl's entropy."""
    n, d = rows.shape
    kernel = rows.T @ rows if n > d else rows @ rows.T
    kernel = np.clip(kernel, 0, None)
    return _np_positive_entropy(kernel / np.trace(kernel), alpha)


def _np_curvature(states: np.ndarray) -> float:
    total, count = 0.0, 0
    for k in range(1, states.shape[0] - 1):
        before, after = states[k] - states[k - 1], states[k + 1] - states[k]
        norms = np.linalg.norm(before) * np.linalg.norm(after)
        total += 0.0 if norms == 0 else float(np.arccos(np.clip(abs(before @ after) / norms, -1, 1)))
        count += 1
    return total / count


def _np_infonce(a: np.ndarray, b: np.ndarray, temperature: float) -> float:
    logits = _np_normalize(a) @ _np_normalize(b).T / temperature
    top = logits.max(axis=1, keepdims=True)
    log_softmax = logits - top - np.log(np.exp(logits - top).sum(axis=1, keepdims=True))
    return float(-np.diag(log_softmax).mean())


def _np_lidar(views: np.ndarray, delta: float, alpha: float) -> float:
    n, j, d = views.shape
    views = np.stack([_np_normalize(views[:, k]) for k in range(j)], axis=1)
    dataset_mean = views.mean(axis=(0, 1))
    class_means = views.mean(axis=1)
    between = sum(np.outer(m - dataset_mean, m - dataset_mean) for m in class_means) / n
    within = sum(np.outer(x - class_means[i], x - class_means[i]) for i in range(n) for x in views[i]) / (n * j)
    within = within + delta * np.eye(d)
    eigenvalues, vectors = np.linalg.eigh(within)
    inverse_root = vectors @ np.diag(eigenvalues**-0.5) @ vectors.T
    return _np_positive_entropy(inverse_root @ between @ inverse_root, alpha)


def _np_dime(a: np.ndarray, b: np.ndarray, alpha: float, n_permutations: int, seed: int) -> float:
    za, zb = _np_normalize(a), _np_normalize(b)
    n, d = a.shape
    ka, kb = (za.T @ za, zb.T @ zb) if n > d else (za @ za.T, zb @ zb.T)
    generator = torch.Generator().manual_seed(seed)  # the permutations the project draws, replayed
    orders = [torch.randperm(kb.shape[0], generator=generator).numpy() for _ in range(n_permutations)]
    joint = _np_positive_entropy(ka * kb, alpha)
    return sum(_np_positive_entropy(ka * kb[o][:, o], alpha) for o in orders) / n_permutations - joint


@pytest.mark.parametrize("alpha", [1.0, 2.0, 0.5])
@pytest.mark.parametrize("shape", [(7, 12), (20, 5)])
def test_entropy_equals_a_numpy_rederivation(alpha: float, shape: tuple[int, int]) -> None:
    rows = np.random.default_rng(0).normal(size=shape) + 0.3
    assert authors.matrix_entropy(torch.from_numpy(rows), alpha) == pytest.approx(
        _np_entropy(_np_normalize(rows), alpha), abs=1e-10
    )


def test_prompt_entropy_and_curvature_of_a_batch_equal_numpy_per_prompt() -> None:
    rng = np.random.default_rng(1)
    lengths, d = [4, 9, 6], 6  # one prompt longer than D: its covariance, the others their Grams
    hidden = rng.normal(size=(3, 9, d))
    mask = np.zeros((3, 9), dtype=bool)
    for row, length in enumerate(lengths):
        mask[row, :length] = True
    hidden[~mask] = 1e3  # padding is never read
    entropies, _, valid = authors.token_entropies(torch.from_numpy(hidden), torch.from_numpy(mask), 1.0)
    bends, bends_valid = authors.token_curvatures(torch.from_numpy(hidden), torch.from_numpy(mask))
    assert valid.all() and bends_valid.all()
    for row, length in enumerate(lengths):
        states = _np_normalize(hidden[row, :length])
        assert float(entropies[row]) == pytest.approx(_np_entropy(states), abs=1e-10)
        assert float(bends[row]) == pytest.approx(_np_curvature(states), abs=1e-10)


@pytest.mark.parametrize("n", [5, 12])  # fewer and more prompts than the 8 dimensions
def test_view_metrics_equal_numpy(n: int) -> None:
    views = np.random.default_rng(2).normal(size=(n, 4, 8)) + 0.5
    torch_views = torch.from_numpy(views)
    a, b = torch_views[:, 0], torch_views[:, 1]
    assert authors.infonce(a, b, 0.1) == pytest.approx(_np_infonce(views[:, 0], views[:, 1], 0.1), abs=1e-10)
    for alpha in (1.0, 2.0):
        expected = _np_lidar(views, 1e-4, alpha)
        assert authors.lidar(torch_views, alpha=alpha) == pytest.approx(expected, abs=1e-10)
        expected = _np_dime(views[:, 0], views[:, 1], alpha, 10, 4)
        assert authors.dime(a, b, alpha=alpha, seed=4) == pytest.approx(expected, abs=1e-10)


# --- the setting, end to end ------------------------------------------------------------------------------------


def test_the_runner_writes_each_arithmetic_beside_the_other(tmp_path) -> None:
    config = EncodeConfig(batch_size=3, max_length=64)
    for arithmetic in ("paper", "authors"):
        settings = MetricSettings(views=2, augment_prompts=4, arithmetic=arithmetic)
        compute_metrics(tiny_gpt2(), TEXTS, config=config, settings=settings, output=tmp_path, progress=False)
    stored = RunFolder(tmp_path).read(METRICS_TABLE)
    assert set(stored["arithmetic"]) == {"paper", "authors"}
    assert not stored.duplicated(["texts", "metric", "layer", "arithmetic"]).any()
    both = stored.pivot_table(index=["metric", "layer"], columns="arithmetic", values="value")
    moved = (both["paper"] != both["authors"]).groupby("metric").any()
    assert moved.drop("dime").all() and not moved["dime"]  # 4 prompts ≤ D: DiME is the paper's, the rest move
    assert one_arithmetic(stored, None)["arithmetic"].eq("paper").all()  # both held: the paper's
    assert one_arithmetic(stored, "authors")["arithmetic"].eq("authors").all()


def test_a_metrics_table_written_before_the_setting_reads_as_the_papers(tmp_path) -> None:
    compute_metrics(tiny_gpt2(), TEXTS, settings=MetricSettings(views=0), output=tmp_path, progress=False)
    file = tmp_path / "metrics.csv"
    pd.read_csv(file).drop(columns="arithmetic").to_csv(file, index=False)
    stored = RunFolder(tmp_path).read(METRICS_TABLE)
    assert stored["arithmetic"].eq("paper").all()
    with pytest.raises(UserError, match=r"no metrics under the authors arithmetic.*--arithmetic authors"):
        one_arithmetic(stored, "authors", tmp_path)
    with pytest.raises(UserError, match="--arithmetic"):
        MetricSettings(arithmetic="mine")


def test_picks_correlations_report_and_reproduce_name_the_arithmetic(tmp_path) -> None:
    run = write_tiny_gpt2_scores(tmp_path / "run")
    scores = pd.read_csv(run / "scores.csv")
    scores.assign(model=tiny_gpt2().name).to_csv(run / "scores.csv", index=False)
    for arithmetic in ARITHMETICS:
        settings = MetricSettings(views=0, arithmetic=arithmetic)
        compute_metrics(tiny_gpt2(), TEXTS, config=EncodeConfig(max_length=64), settings=settings, output=run)
    for arithmetic in ARITHMETICS:
        picks = select_layers(run, arithmetic=arithmetic, write=False)
        assert set(picks.loc[picks["texts"] == "custom", "arithmetic"]) == {arithmetic}
        assert set(picks.loc[picks["texts"] == "-", "arithmetic"]) == {"-"}  # the baselines read no metric
        assert set(correlate(run, arithmetic=arithmetic, n_permutations=10)["arithmetic"]) == {arithmetic}
    stored = RunFolder(run).read(METRICS_TABLE)
    runs = Runs(scores=RunFolder(run).scores(), metrics=stored[stored["arithmetic"] == "authors"])
    assert arithmetic_notes(runs) == [
        "Metrics, metric picks and correlations: authors arithmetic (paper: the paper's formulas; authors: the "
        "authors' code's arithmetic, docs/selection.md)"
    ]
    assert "this project's runs' as their metrics.csv says (tiny: authors and paper;" in arithmetic_line(stored)
    assert set(load_runs([run]).metrics["arithmetic"]) == {"paper"}  # both held, no picks: the paper's
    select_layers(run, arithmetic="authors")  # selection.csv: picks of the authors' metrics
    assert set(load_runs([run]).metrics["arithmetic"]) == {"authors"}  # the report draws what the picks read
