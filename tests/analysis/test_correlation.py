"""Metric ↔ score correlations across layers: the statistics agree with dcor and scipy; p-values are seeded."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from _metric_fixtures import run_tables
from scipy import stats

from layer_mteb.analysis.selection.correlation import (
    METHODS,
    association,
    correlate,
    correlation_table,
    permutation_test,
)
from layer_mteb.common.errors import UserError

X = np.array([0.3, 1.2, -0.7, 2.5, 0.0, 1.9, -1.4, 0.8, 3.1])
Y = np.array([1.0, 0.4, 2.2, -0.3, 1.7, 0.9, 2.8, -1.1, 0.5])


def test_statistics_agree_with_dcor_and_scipy() -> None:
    import dcor

    assert association(X, Y, "dcor") == pytest.approx(dcor.distance_correlation(X, Y))
    assert association(X, Y, "spearman") == pytest.approx(stats.spearmanr(X, Y).statistic)
    assert association(X, Y, "kendall") == pytest.approx(stats.kendalltau(X, Y).statistic)


def test_a_monotone_transform_gives_rank_correlation_one() -> None:
    assert association(X, np.exp(X), "spearman") == pytest.approx(1.0)
    assert association(X, np.exp(X), "kendall") == pytest.approx(1.0)
    assert association(X, -(X**3), "spearman") == pytest.approx(-1.0)
    assert association(X, 2 * X + 1, "dcor") == pytest.approx(1.0)  # dCor is 1 for an affine map


@pytest.mark.parametrize("method", METHODS)
def test_permutation_p_values_are_seeded_and_sensible(method: str) -> None:
    strong = permutation_test(X, np.exp(X), method, n_permutations=500, seed=1)
    assert strong == permutation_test(X, np.exp(X), method, n_permutations=500, seed=1)
    assert 1 / 501 <= strong[1] < 0.01
    rng = np.random.default_rng(0)
    noise = permutation_test(rng.normal(size=40), rng.normal(size=40), method, n_permutations=500, seed=1)
    assert 0.05 < noise[1] <= 1


@pytest.mark.parametrize("method", ["spearman", "kendall"])
def test_vectorised_null_matches_scipy_on_every_permutation(method: str) -> None:
    # The numpy null distribution must equal scipy's statistic on each of the same shuffles (ties included), so the
    # p-value equals one computed with scipy in a loop.
    y = np.round(Y)
    statistic, p_value = permutation_test(X, y, method, n_permutations=200, seed=5)
    scipy_stat = stats.spearmanr(X, y).statistic if method == "spearman" else stats.kendalltau(X, y).statistic
    assert statistic == pytest.approx(scipy_stat)
    rng = np.random.default_rng(5)
    shuffles = rng.permuted(np.tile(np.arange(len(y)), (200, 1)), axis=1)
    scipy_null = [
        stats.spearmanr(X, y[o]).statistic if method == "spearman" else stats.kendalltau(X, y[o]).statistic
        for o in shuffles
    ]
    expected = (1 + sum(abs(s) >= abs(scipy_stat) - 1e-9 for s in scipy_null)) / 201
    assert p_value == pytest.approx(expected)


def test_correlate_a_run_per_task_and_for_the_mean(tmp_path: Path) -> None:
    scores, metrics = run_tables(
        {"A": [0.1, 0.3, 0.6, 0.5, 0.4], "B": [0.2, 0.2, 0.4, 0.7, 0.5]},
        {
            ("prompt_entropy", "wikitext"): [0.9, 0.8, 0.5, 0.6, 0.7],
            ("prompt_entropy", "task:B"): [0.9, 0.9, 0.8, 0.3, 0.5],
            ("curvature", "wikitext"): [1.0, 1.0, 1.0, 1.0, 1.0],  # constant: skipped, never NaN
        },
    )
    frame = correlate(scores=scores, metrics=metrics, n_permutations=50)
    assert set(frame["task"]) == {"mean", "A", "B"}
    assert frame["statistic"].notna().all() and frame["p_value"].between(0, 1).all()
    assert "curvature" not in set(frame["metric"])
    own = frame[frame["texts"] == "task:B"]
    assert set(own["task"]) == {"B"} and set(own["method"]) == set(METHODS)
    mean_scores = np.array([0.15, 0.25, 0.5, 0.6, 0.45])
    entropy = np.array([0.9, 0.8, 0.5, 0.6, 0.7])
    row = frame[(frame["task"] == "mean") & (frame["method"] == "spearman")].iloc[0]
    assert row["statistic"] == pytest.approx(stats.spearmanr(entropy, mean_scores).statistic)
    assert row["n_layers"] == 5
    table = correlation_table(frame)
    assert list(table.columns) == ["dcor", "dcor p", "spearman", "spearman p", "kendall", "kendall p"]


def test_clear_errors() -> None:
    scores, metrics = run_tables({"A": [0.1, 0.2]}, {("prompt_entropy", "wikitext"): [0.3, 0.1]})
    with pytest.raises(UserError, match="nothing to correlate"):
        correlate(scores=scores, metrics=metrics)
    with pytest.raises(UserError, match="--method"):
        correlate(scores=scores, metrics=metrics, method="pearson")  # type: ignore[arg-type]


def test_cli_correlate(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from layer_mteb.cli import main
    from layer_mteb.common.run_folder import RunFolder
    from layer_mteb.metrics import METRICS_TABLE

    scores, metrics = run_tables({"A": [0.1, 0.3, 0.6, 0.5]}, {("dime", "wikitext"): [0.2, 0.5, 0.9, 0.4]})
    RunFolder(tmp_path).write_scores(scores)
    RunFolder(tmp_path).update(METRICS_TABLE, metrics)
    assert main(["correlate", "--run", str(tmp_path), "--method", "spearman", "--permutations", "20"]) == 0
    assert "dime" in capsys.readouterr().out and (tmp_path / "correlation.csv").is_file()


def test_three_layers_are_enough_and_own_texts_give_a_mean_row() -> None:
    from layer_mteb.analysis.rules import MIN_LAYERS
    from layer_mteb.analysis.selection.correlation import OWN_TEXTS

    assert MIN_LAYERS == 3
    scores, metrics = run_tables(
        {"A": [0.75, 0.25, 0.75], "B": [0.25, 0.5, 0.75]},  # mean .5 .375 .75
        {("dime", "task:A"): [1.0, 4.0, 2.0], ("dime", "task:B"): [3.0, 2.0, 2.0]},  # mean 2 3 2
    )
    frame = correlate(scores=scores, metrics=metrics, method="spearman", n_permutations=10)
    rows = frame.set_index(["texts", "task"])["statistic"]
    assert rows[("task:A", "A")] == pytest.approx(stats.spearmanr([1, 4, 2], [0.75, 0.25, 0.75]).statistic)
    assert rows[(OWN_TEXTS, "mean")] == pytest.approx(-(3**0.5) / 2)  # ranks (1.5, 3, 1.5) vs (2, 1, 3)
    assert set(frame["n_layers"]) == {3}
    with pytest.raises(UserError, match="fewer than 3 layers"):
        correlate(scores=scores[scores["layer"] < 2], metrics=metrics[metrics["layer"] < 2], n_permutations=10)
