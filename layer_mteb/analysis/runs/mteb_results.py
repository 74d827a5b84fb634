"""A run's per-layer results read back through mteb's own ``ResultCache``, as a tidy frame.

Each layer is stored as an mteb *experiment* of the model: ``ModelMeta.experiment_kwargs`` holds the layer and the
settings that made its vectors. mteb's ``load_results()`` skips experiments unless asked
(``load_experiments="match_name"``), and ``BenchmarkResults.to_dataframe()`` then averages experiments of one model
into one number, which is no layer's score. This reader keeps every experiment apart, one row per (layer, task,
split, subset), so what mteb stored can be checked against ``scores.csv`` or used without layer_mteb's own tables.
"""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from layer_mteb.common.errors import UserError
from layer_mteb.common.results import MTEB_DECIMALS
from layer_mteb.common.run_files import MTEB_FOLDER


def mteb_layer_scores(run: str | Path) -> pd.DataFrame:
    """One row per (model, revision, layer, task, split, subset) of the mteb result JSONs under ``run/mteb``, with the
    experiment's settings as columns, sorted like ``scores.csv``."""
    from mteb.cache import ResultCache

    folder = Path(run) / MTEB_FOLDER
    if not folder.is_dir():
        raise UserError(f"{folder} does not exist: a run folder written by `layer-mteb run` has its mteb results there")
    results = ResultCache(folder).load_results(load_experiments="match_name", include_remote=False)
    rows = []
    for model_result in results:
        experiment = dict(model_result.model_meta.experiment_kwargs or {}) if model_result.model_meta else {}
        if "layer" not in experiment:
            continue  # a result of the plain model, not of one of its layers
        for task_result in model_result.task_results:
            for split, subsets in task_result.scores.items():
                for scores in subsets:
                    rows.append(
                        {
                            "model": model_result.model_name,
                            "revision": model_result.model_revision,
                            **experiment,
                            "task": task_result.task_name,
                            "split": split,
                            "subset": scores["hf_subset"],
                            "main_score": round(float(scores["main_score"]), MTEB_DECIMALS),
                        }
                    )
    if not rows:
        raise UserError(f"{folder} holds no per-layer mteb results")
    frame = pd.DataFrame(rows)
    return frame.sort_values(["model", "revision", "task", "subset", "layer"], kind="stable").reset_index(drop=True)
