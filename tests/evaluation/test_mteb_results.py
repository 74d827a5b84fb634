"""A run read back through mteb's own ResultCache: one result per layer, each equal to scores.csv, never averaged."""

from __future__ import annotations

import pandas as pd
import pytest
from mteb.cache import ResultCache

from layer_mteb import UserError, mteb_layer_scores
from layer_mteb.common.config import EncodeConfig
from layer_mteb.evaluation.sweep import sweep


@pytest.fixture(scope="module")
def run(tiny_gpt_neox, data_dir, tmp_path_factory):
    out = tmp_path_factory.mktemp("run")
    config = EncodeConfig(batch_size=16)
    sweep(
        tiny_gpt_neox,
        ["STS17", "BIOSSES"],
        layers=[0, 1, 2],
        config=config,
        data_dir=data_dir,
        output=out,
        progress=False,
    )
    return out


def test_mteb_reads_one_result_per_layer_only_when_asked_for_experiments(run):
    cache = ResultCache(run / "mteb")
    assert len(cache.load_results(include_remote=False).model_results) == 0  # mteb's default skips experiments
    results = cache.load_results(load_experiments="match_name", include_remote=False)
    # the experiment also names the task's data fingerprint, so each (task, layer) is an experiment of its own
    found = sorted(
        (t.task_name, m.model_meta.experiment_kwargs["layer"]) for m in results.model_results for t in m.task_results
    )
    assert found == [(task, layer) for task in ("BIOSSES", "STS17") for layer in (0, 1, 2)]


def test_the_tidy_frame_equals_scores_csv_row_for_row(run):
    ours = pd.read_csv(run / "scores.csv")
    theirs = mteb_layer_scores(run)
    key = ["task", "subset", "layer"]
    merged = ours.merge(theirs, on=key, suffixes=("", "_mteb"), validate="one_to_one")
    assert len(merged) == len(ours) == len(theirs) == 6
    assert (merged["main_score"] == merged["main_score_mteb"]).all()
    assert (merged["readout"] == merged["readout_mteb"]).all()
    # no two layers share a score row: nothing was averaged across experiments
    assert theirs.groupby(["task", "layer"]).size().eq(1).all()


def test_a_folder_without_mteb_results_is_one_clear_error(tmp_path):
    with pytest.raises(UserError, match="mteb results"):
        mteb_layer_scores(tmp_path)
