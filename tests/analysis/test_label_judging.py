"""How label-budget picks are judged (:func:`judge`) and which rows of a run they are judged on (:func:`one_setting`),
on small hand-made inputs whose answers are known exactly."""

from __future__ import annotations

import math

import pandas as pd
import pytest

from layer_mteb.analysis.labels.budget import TaskLayers, judge
from layer_mteb.common.errors import UserError
from layer_mteb.common.scores import one_setting

#: mteb's full-split score per layer: best at layer 1, last layer 3
CURVE = pd.Series({0: 0.40, 1: 0.70, 2: 0.55, 3: 0.50})


def _unit(curve: pd.Series = CURVE, n_layers: int = 3) -> TaskLayers:
    """A task's layers as :func:`judge` reads them: only the scores and the model's depth matter (no examples or
    vectors needed)."""
    return TaskLayers("acme/m", "STS12", "default", curve, examples=None, vectors=None, n_layers=n_layers)


def test_judge_reports_the_most_frequent_pick_and_the_regret_and_gain_of_every_draw():
    judged = judge(_unit(), [1, 1, 2, 3, 1])
    regrets = [0.0, 0.0, 0.15, 0.20, 0.0]  # 0.70 minus each pick's score
    gains = [0.20, 0.20, 0.05, 0.0, 0.20]  # each pick's score minus the last layer's 0.50
    assert judged["chosen_layer"] == 1 and judged["best_layer"] == 1
    assert judged["picks"] == "1:3 2:1 3:1"
    expected = {
        "chosen_score": 0.70,
        "best_score": 0.70,
        "last_score": 0.50,
        "regret": 0.0,
        "gain": 0.20,
        "mean_regret": 0.07,
        "regret_std": 0.0871779788708135,  # population deviation of the five regrets
        "mean_gain": 0.13,
    }
    assert {k: judged[k] for k in expected} == pytest.approx(expected, abs=1e-12)
    assert judged["mean_regret"] == pytest.approx(sum(regrets) / 5)
    assert judged["mean_gain"] == pytest.approx(sum(gains) / 5)


def test_judge_regret_and_gain_are_the_chosen_layers_not_the_draws_average():
    """A pick that is not the best has regret ``best − chosen``; a pick below the last layer has a negative gain."""
    judged = judge(_unit(), [0, 0, 2])
    assert (judged["chosen_layer"], judged["picks"]) == (0, "0:2 2:1")
    assert judged["regret"] == pytest.approx(0.30) and judged["gain"] == pytest.approx(-0.10)
    assert judged["mean_regret"] == pytest.approx((0.30 + 0.30 + 0.15) / 3)
    assert judged["mean_gain"] == pytest.approx((-0.10 - 0.10 + 0.05) / 3)


def test_judge_breaks_ties_towards_the_deeper_layer():
    """The analysis rules' one tie rule: equally frequent picks, and equally good layers, go to the deeper layer."""
    judged = judge(_unit(), [2, 3, 2, 3])
    assert judged["chosen_layer"] == 3 and judged["chosen_score"] == pytest.approx(0.50)
    assert judged["regret"] == pytest.approx(0.20) and judged["gain"] == pytest.approx(0.0)
    tied = judge(_unit(pd.Series({0: 0.40, 1: 0.70, 2: 0.70, 3: 0.50})), [1])
    assert tied["best_layer"] == 2 and tied["regret"] == pytest.approx(0.0)


def test_judge_on_scored_layers_that_skip_some():
    """Layers are labels, not positions: a run that scored layers 0, 4 and 8 of 8 is judged on those."""
    judged = judge(_unit(pd.Series({0: 0.2, 4: 0.9, 8: 0.6}), n_layers=8), [8, 4, 4])
    assert (judged["chosen_layer"], judged["best_layer"]) == (4, 4)
    assert judged["last_score"] == pytest.approx(0.6) and judged["gain"] == pytest.approx(0.3)
    assert judged["mean_regret"] == pytest.approx(0.1)


def test_judge_gives_no_gain_where_the_last_layer_was_not_scored():
    """Scored layers 0, 4 and 8 of a 10-layer model: layer 8 is not the last layer, so there is no gain to report
    (never a gain over a shallower layer), while the regret stands."""
    judged = judge(_unit(pd.Series({0: 0.2, 4: 0.9, 8: 0.6}), n_layers=10), [8, 4, 4])
    assert math.isnan(judged["last_score"]) and math.isnan(judged["gain"]) and math.isnan(judged["mean_gain"])
    assert judged["chosen_layer"] == 4 and judged["regret"] == 0 and judged["mean_regret"] == pytest.approx(0.1)


SETTINGS = {"readout": "final_norm", "pooling": "mean", "max_length": 512, "dtype": "float32", "normalize": False}


def _rows(*rows: tuple) -> pd.DataFrame:
    """scores.csv rows of one model: (task, layer, attention, main_score), the other columns fixed."""
    base = {"model": "acme/m", "revision": "r", "subset": "default", "split": "test", **SETTINGS}
    return pd.DataFrame(
        [{**base, "task": t, "layer": k, "attention": a, "main_score": s} for t, k, a, s in rows]
    ).reset_index(drop=True)


def test_one_setting_keeps_the_latest_row_of_each_layer_and_refuses_two_attentions():
    scores = _rows(
        ("STS12", 0, "causal", 0.20),
        ("STS12", 2, "causal", 0.40),
        ("STS12", 2, "causal", 0.45),  # the later of two rows of one layer wins
        ("STS13", 0, "causal", 0.50),  # same layer, other task: its own row
    )
    kept = one_setting(scores)
    found = {(t, k): s for t, k, s in kept[["task", "layer", "main_score"]].itertuples(False)}
    assert found == {("STS12", 0): 0.20, ("STS12", 2): 0.45, ("STS13", 0): 0.50}
    mixed = pd.concat([scores, _rows(("STS12", 1, "bidirectional", 0.3))], ignore_index=True)
    with pytest.raises(UserError, match=r"several settings of acme/m \(attention differ\)"):
        one_setting(mixed)


def test_one_setting_keeps_a_run_without_an_attention_column():
    scores = _rows(("STS12", 0, "x", 0.1), ("STS12", 0, "x", 0.2), ("STS12", 1, "x", 0.3)).drop(columns="attention")
    kept = one_setting(scores)
    assert kept[["layer", "main_score"]].values.tolist() == [[0, 0.2], [1, 0.3]]


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"model": "acme/other"}, "several models or revisions"),
        ({"revision": "r2"}, "several models or revisions"),
        ({"pooling": "last"}, r"several settings of .+ \(pooling differ\): give a run of one setting"),
        ({"normalize": True}, "several settings"),
        ({"attention": "bidirectional"}, r"several settings of .+ \(attention differ\)"),
    ],
)
def test_one_setting_refuses_a_run_of_several_models_or_settings(change, message):
    scores = _rows(("STS12", 0, "causal", 0.1), ("STS12", 1, "causal", 0.2))
    for column, value in change.items():
        scores.loc[1, column] = value
    with pytest.raises(UserError, match=message):
        one_setting(scores)
