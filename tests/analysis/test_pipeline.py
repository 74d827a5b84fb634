"""select -> correlate -> report on one run folder: the report reads what the other commands write."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from layer_mteb.analysis.report.build import write_report
from layer_mteb.analysis.selection.correlation import correlate
from layer_mteb.analysis.selection.picks import select_layers
from layer_mteb.common.config import SETTINGS_COLUMNS
from layer_mteb.common.run_folder import RunFolder
from layer_mteb.common.scores import SCORE_COLUMNS


def test_report_uses_the_selection_and_correlation_that_select_and_correlate_wrote(tmp_path):
    run = tmp_path / "run"
    run.mkdir()
    layers = np.arange(5)
    task_curves = {"A": [0.40, 0.60, 0.70, 0.65, 0.50], "B": [0.30, 0.35, 0.50, 0.45, 0.48]}
    rows = [
        dict.fromkeys(SCORE_COLUMNS, "x")
        | {
            "model": "org/m",
            "revision": "r",
            "layer": int(k),
            "n_layers": 4,
            "relative_depth": k / 4,
            "task": task,
            "task_type": "STS",
            "split": "test",
            "subset": "default",
            "main_score": curve[k],
            "aggregate": "",  # a task of the run's own, not an aggregate's subtask
        }
        for task, curve in task_curves.items()
        for k in layers
    ]
    RunFolder(run).write_scores(pd.DataFrame(rows, columns=SCORE_COLUMNS))
    entropy = [3.0, 2.0, 1.0, 1.5, 2.5]  # lowest at layer 2, where the mean score peaks
    metrics = pd.DataFrame(
        [
            {
                "model": "org/m",
                "revision": "r",
                "layer": int(k),
                "n_layers": 4,
                "relative_depth": k / 4,
                "texts": "wikitext",
                "task": "",
                "metric": "prompt_entropy",
                "value": entropy[k],
                "n": 100,
                **dict.fromkeys(SETTINGS_COLUMNS, "x"),  # the same settings as the scores
            }
            for k in layers
        ]
    )
    metrics.to_csv(run / "metrics.csv", index=False)

    select_layers(run)
    correlate(run, n_permutations=50)
    write_report([run], tmp_path / "report")

    table = pd.read_csv(tmp_path / "report" / "table1.csv")
    overall = table.iloc[0]
    assert overall["entropy_layer"] == 2
    assert overall["entropy_layer_avg"] == pytest.approx((0.70 + 0.50) / 2)
    assert (tmp_path / "report" / "correlation.png").stat().st_size > 0
    assert "prompt_entropy" in (tmp_path / "report" / "selectors.md").read_text()
