"""The tidy results table: one row per (task, layer, subset), keyed by integer layer, written atomically."""

from __future__ import annotations

from pathlib import Path
from typing import TypedDict

import pandas as pd

from layer_mteb._io import atomic_write
from layer_mteb.config import SETTINGS_COLUMNS


class LayerId(TypedDict):
    """Which layer of which model a row is about: the first columns of scores and metrics alike."""

    model: str
    revision: str
    layer: int
    n_layers: int
    relative_depth: float


LAYER_COLUMNS = tuple(LayerId.__annotations__)
SCORE_COLUMNS = [*LAYER_COLUMNS, "task", "task_type", "split", "subset", "main_score", *SETTINGS_COLUMNS, "data"]
SCORES_FILE = "scores.csv"
#: mteb's ``TaskResult.to_disk`` stores scores rounded to 6 decimals; the table uses the same value whether a unit
#: was just computed or read back from mteb's result JSON, so a resumed run equals an uninterrupted one exactly.
MTEB_DECIMALS = 6


def layer_columns(model, layer: int) -> LayerId:
    """The :class:`LayerId` of a row about ``layer`` of ``model``."""
    return LayerId(
        model=model.name,
        revision=model.revision,
        layer=layer,
        n_layers=model.n_layers,
        relative_depth=layer / model.n_layers,
    )


def score_rows(task_result, *, task, encoder, data: str) -> list[dict]:
    """mteb's ``TaskResult`` for one layer -> tidy rows (one per split and subset).

    ``data`` says where the task data came from: ``hub``, ``local`` or ``local-partial`` (not comparable to mteb).
    """
    model, config, layer = encoder.model, encoder.config, encoder.layer
    rows = []
    for split, subsets in task_result.scores.items():
        for scores in subsets:
            rows.append(
                {
                    **layer_columns(model, layer),
                    "task": task.metadata.name,
                    "task_type": task.metadata.type,
                    "split": split,
                    "subset": scores["hf_subset"],
                    "main_score": round(float(scores["main_score"]), MTEB_DECIMALS),
                    **config.key(),
                    "data": data,
                }
            )
    return rows


def tidy_scores(rows: list[dict]) -> pd.DataFrame:
    """Score rows -> the ``scores.csv`` frame: its columns in order, rows sorted so reruns write identical files."""
    frame = pd.DataFrame(rows, columns=SCORE_COLUMNS)
    return frame.sort_values(["model", "revision", "task", "subset", "layer"], kind="stable").reset_index(drop=True)


def write_scores(frame: pd.DataFrame, run_dir: Path, name: str = SCORES_FILE) -> Path:
    path = run_dir / name
    atomic_write(path, lambda tmp: frame.to_csv(tmp, index=False))
    return path


def read_scores(run_dir: str | Path) -> pd.DataFrame:
    return pd.read_csv(Path(run_dir) / SCORES_FILE)


def layer_table(frame: pd.DataFrame) -> pd.DataFrame:
    """Layers as rows, tasks as columns, plus the mean over tasks: the table a person reads first."""
    table = frame.pivot_table(index="layer", columns="task", values="main_score", aggfunc="mean")
    table["mean"] = table.mean(axis=1)
    return table
