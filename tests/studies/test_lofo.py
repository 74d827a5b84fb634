"""The leave-one-family-out study's tables and the policy it ships, on synthetic models whose every number is known:
a task scored ``50 − 5·|layer − peak|`` (×1, layers 0…10) has its best layer, each depth's regret and gain, and
the last layer's, by hand."""

from __future__ import annotations

import json
from datetime import date
from pathlib import Path

import pandas as pd
import pytest

from layer_mteb.analysis.rules import PAPER_RULE
from layer_mteb.analysis.selection import auto
from layer_mteb.analysis.selection.auto import Rule
from layer_mteb.analysis.selection.registry import by_name
from layer_mteb.analysis.selection.selectors import ModelData
from layer_mteb.common.errors import UserError
from layer_mteb.common.package import VERSION
from studies import lofo

N_LAYERS = 10
CANDIDATES = [by_name(n) for n in ("last_layer", "depth=0.5", "depth=0.8", PAPER_RULE)]


def peaked(name: str, peaks: dict[str, int], entropy_on: tuple[str, ...] | None = None) -> ModelData:
    """A model whose task ``t`` scores ``50 − 5·|layer − peaks[t]|``; prompt entropy of a task's own texts (the
    paper's rule) is lowest at its peak, measured for the tasks ``entropy_on`` (default: all)."""
    layers = pd.RangeIndex(N_LAYERS + 1)
    scores = pd.DataFrame({t: [50.0 - 5 * abs(k - p) for k in layers] for t, p in peaks.items()}, index=layers)
    metrics = {
        ("prompt_entropy", f"task:{t}"): pd.Series([1.0 + abs(k - peaks[t]) for k in layers], index=layers)
        for t in (peaks if entropy_on is None else entropy_on)
    }
    return ModelData(name, N_LAYERS, scores, metrics)


def test_candidate_table_gives_each_candidates_mean_regret_and_gain_on_each_model_where_it_is_defined():
    """Peaks 8 and 5: the last layer loses 10 and 25 points, depth 0.5 loses 15 on the first task and gains 25 on
    the second, and so on. The paper's rule needs prompt entropy on every task: the embedding model has it on one
    of two, so the rule has no row there. A checkpoint shares its model's weight."""
    models = [
        peaked("Pythia/a", {"T1": 8, "T2": 5}),
        peaked("Pythia/a@step1", {"T1": 2, "T2": 2}),
        peaked("sentence-transformers/e", {"T1": 10, "T2": 10}, entropy_on=("T1",)),
    ]
    table = lofo.candidate_table(models, CANDIDATES).reset_index(drop=True)
    rows = [
        ("Pythia/a", "depth=0.5", 7.5, 10.0),  # T1: layer 5, 35 (−15, −5); T2: 50 (0, +25)
        ("Pythia/a", "depth=0.8", 7.5, 10.0),  # T1: 50 (0, +10); T2: layer 8, 35 (−15, +10)
        ("Pythia/a", "last_layer", 17.5, 0.0),  # 40 and 25
        ("Pythia/a", PAPER_RULE, 0.0, 17.5),  # the peaks
        ("Pythia/a@step1", "depth=0.5", 15.0, 25.0),
        ("Pythia/a@step1", "depth=0.8", 30.0, 10.0),
        ("Pythia/a@step1", "last_layer", 40.0, 0.0),
        ("Pythia/a@step1", PAPER_RULE, 0.0, 40.0),
        ("sentence-transformers/e", "depth=0.5", 25.0, -25.0),
        ("sentence-transformers/e", "depth=0.8", 10.0, -10.0),
        ("sentence-transformers/e", "last_layer", 0.0, 0.0),
    ]
    family = {"Pythia/a": "pythia", "Pythia/a@step1": "pythia", "sentence-transformers/e": "sentence-transformers"}
    kind = {"Pythia/a": "base", "Pythia/a@step1": "base", "sentence-transformers/e": "embedding"}
    weight = {"Pythia/a": 0.5, "Pythia/a@step1": 0.5, "sentence-transformers/e": 1.0}
    expected = pd.DataFrame(
        [(m, family[m], kind[m], weight[m], s, r, g) for m, s, r, g in rows],
        columns=["model", "family", "kind", "weight", "selector", "regret", "gain"],
    )
    pd.testing.assert_frame_equal(table, expected, check_dtype=False)


#: A leave-one-family-out record (``leave_one_family_out``'s columns that the means read): two families, one
#: model with a checkpoint that shares its weight.
LOFO = pd.DataFrame(
    [
        ("pythia", "Pythia/a", 0.5, 2.0, 4.0, 6.0),
        ("pythia", "Pythia/a@step1", 0.5, 10.0, -6.0, 4.0),
        ("pythia", "Pythia/b", 1.0, 4.0, 0.0, 4.0),
        ("bert", "bert/c", 1.0, 0.0, 2.0, 2.0),
        ("bert", "bert/d", 1.0, 2.0, 6.0, 8.0),
    ],
    columns=["held_out_family", "model", "weight", "regret", "gain", "last_regret"],
)


def test_lofo_means_average_over_models_families_and_folders():
    """Models: the four final models. Families: pythia (a, b) and bert (c, d) averaged first. Folders: all five,
    then weighted (the checkpoint and its model weigh ½ each). The worst gain of the model and family views is the
    worst final model's (Pythia/b, 0), not the worst family mean; of the folder views, the checkpoint's (−6)."""
    means = lofo.lofo_means(LOFO)
    expected = pd.DataFrame(
        [
            ("models", 4, 2.0, 3.0, 5.0, 0.0),
            ("families", 2, 2.0, 3.0, 5.0, 0.0),  # pythia (3, 2, 5), bert (1, 4, 5)
            ("folders", 5, 3.6, 1.2, 4.8, -6.0),
            ("folders_weighted", 5, 3.0, 1.75, 4.75, -6.0),  # (1 + 5 + 4 + 0 + 2) / 4, ...
        ],
        columns=["mean_over", "n", "regret", "gain", "last_regret", "worst_gain"],
    )
    pd.testing.assert_frame_equal(means, expected, check_dtype=False)


def test_lofo_means_of_one_family_of_one_model():
    one = LOFO[LOFO["model"] == "bert/c"]
    means = lofo.lofo_means(one).set_index("mean_over")
    assert means["n"].tolist() == [1, 1, 1, 1]
    assert (means[["regret", "gain", "last_regret", "worst_gain"]].to_numpy() == [[0.0, 2.0, 2.0, 2.0]] * 4).all()


def test_train_policy_fits_on_every_model_and_records_the_lofo_it_was_judged_by():
    """Three base families peak at layer 8 on every task: depth 0.8 gains 10 points over the last layer on each, so
    every margin and variant has zero held-out regret and the most cautious (margin 2, fixed) is chosen. The one
    embedding model peaks at its last layer; no model pools its first token. The record is the models' view of the
    ``lofo`` given (the checkpoint's regret 9 left out), rounded to 4 decimals."""
    peaks = {"T1": 8, "T2": 8, "T3": 8}
    models = [peaked(name, peaks) for name in ("Pythia/a", "bert/b", "gemma/c")]
    models.append(peaked("sentence-transformers/e", {"T1": 10, "T2": 10, "T3": 10}))
    record = pd.DataFrame(
        [
            ("pythia", "Pythia/a", 0.5, 0.123456, 1 / 3, 1.11111),
            ("pythia", "Pythia/a@step1", 0.5, 9.0, -9.0, 9.0),
            ("bert", "bert/b", 1.0, 0.234567, -1 / 7, 2.22222),
        ],
        columns=LOFO.columns,
    )
    policy = lofo.train_policy(models, record, CANDIDATES[:3])
    assert policy.rules == {
        "embedding": Rule("last_layer", "the last layer has the least regret on 1 models of 1 family"),
        "cls": Rule("last_layer", "abstained: no training model of this kind"),
        "base": Rule("depth=0.8", "most gain on 3 models of 3 families (+10.00 >= margin 2)"),
    }
    assert (policy.margin, policy.variant) == (2.0, "fixed")
    assert policy.models == ("Pythia/a", "bert/b", "gemma/c", "sentence-transformers/e")
    assert policy.families == ("bert", "gemma", "pythia", "sentence-transformers")
    assert policy.date == date.today().isoformat() and policy.package_version == VERSION
    assert policy.record == {
        "lofo_mean_regret": 0.179,  # (0.123456 + 0.234567) / 2 = 0.1790115
        "lofo_worst_gain": -0.1429,
        "last_layer_mean_regret": 1.6667,
        "lofo_family_mean_regret": 0.179,
        "lofo_models": 2,
    }


def test_train_policy_abstains_where_the_best_depth_gains_less_than_every_margin():
    """Peaks at layer 10 on one task and 9 on two: depth 0.8 loses, and the last layer has the least regret."""
    models = [peaked(name, {"T1": 10, "T2": 9, "T3": 9}) for name in ("Pythia/a", "bert/b", "gemma/c")]
    record = LOFO[LOFO["model"] != "Pythia/a@step1"]
    policy = lofo.train_policy(models, record, CANDIDATES[:3])
    assert policy.rules["base"] == Rule("last_layer", "the last layer has the least regret on 3 models of 3 families")
    assert policy.record["lofo_models"] == 4 and policy.record["lofo_mean_regret"] == pytest.approx(2.0)


def test_the_policy_file_round_trips_and_keeps_its_bytes_when_only_the_date_changes(tmp_path: Path) -> None:
    rules = {"embedding": auto.Rule("last_layer", "x"), "cls": auto.Rule("last_layer", "z")}
    rules["base"] = auto.Rule("depth=0.8", "y", {"Clustering": "depth=0.9"})
    policy = auto.Policy(rules, 0.5, "by_type")
    path = lofo.write_policy(auto.Policy(**{**policy.__dict__, "date": "2026-01-01"}), tmp_path / "p.json")
    before = path.read_bytes()
    lofo.write_policy(auto.Policy(**{**policy.__dict__, "date": "2027-01-01"}), path)
    assert path.read_bytes() == before
    assert auto.load_policy(path).rules == policy.rules and auto.load_policy(path).variant == "by_type"
    path.write_text(json.dumps({"rules": {}}))
    with pytest.raises(UserError, match="regenerate"):
        auto.load_policy(path)
