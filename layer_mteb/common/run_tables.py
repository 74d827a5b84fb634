"""The tables of a run folder as frames: each table's columns, row order and key, and the one update every table
shares (rows of the new table's keys replace the stored ones, every other stored row stays). Files are read and
written only by :class:`~layer_mteb.common.run_folder.RunFolder`; this module holds what needs pandas.

- ``scores.csv``: one row per (task, layer, subset) with mteb's main score, keyed by integer layer, and the run's
  one model and setting read back from it (:func:`one_setting`).
- ``metrics.csv``: one row per (model, text source, layer, metric). ``texts`` is ``wikitext``, ``task:<Task>`` (its
  evaluation-split texts), ``encoded:<Task>`` (every text its evaluator encodes), ``file:<name>`` or ``custom``;
  ``n`` counts the prompts the value is over. Rerunning a source with the same settings replaces its rows, so WikiText
  and each task's own-text metrics sit together (``task:`` and ``encoded:`` rows of a task are different sources).
- ``agreement.csv``: per-layer agreement and intrinsic-dimension curves per (task, reference, metric, outlier, n, k,
  seed, settings); ``reference`` is :data:`NO_REFERENCE` for the ID, which reads none; ``k`` is 0 where none applies.
- ``stress.csv`` (or ``stress.csv.gz``, the same rows gzipped with no timestamp) and ``dip.csv``: per-prompt entropy
  of the stress tests and the dip test per layer, per (model, texts, readout, test).
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any, TypedDict

import pandas as pd

from layer_mteb.common.config import SETTINGS_COLUMNS, EncodeConfig, default_device
from layer_mteb.common.errors import UserError, first_line


class LayerId(TypedDict):
    """Which layer of which model a row is about: the first columns of scores and metrics alike."""

    model: str
    revision: str
    layer: int
    n_layers: int
    relative_depth: float


LAYER_COLUMNS = tuple(LayerId.__annotations__)
SCORE_COLUMNS = [*LAYER_COLUMNS, "task", "task_type", "split", "subset", "main_score", *SETTINGS_COLUMNS, "data"]
#: what a ``scores.csv`` must hold to be read at all
REQUIRED_SCORE_COLUMNS = ["model", "layer", "n_layers", "task", "main_score"]
#: mteb's ``TaskResult.to_disk`` stores scores rounded to 6 decimals; the table uses the same value whether a unit
#: was just computed or read back from mteb's result JSON, so a resumed run equals an uninterrupted one exactly.
MTEB_DECIMALS = 6
#: What makes two score rows the same measurement: a newer one replaces an older one, any other older row stays.
ROW_KEY = ["model", "revision", "layer", "task", "split", "subset", *SETTINGS_COLUMNS]

METRIC_COLUMNS = [*LAYER_COLUMNS, "texts", "task", "metric", "value", "n", *SETTINGS_COLUMNS]
#: metric rows with equal values here come from the same computation and are replaced together
METRIC_KEY = ["model", "revision", "texts", *SETTINGS_COLUMNS]

#: the ``metric`` of TwoNN intrinsic-dimension rows
ID_METRIC = "two_nn_id"
#: the ``reference`` of rows that read no reference
NO_REFERENCE = "-"
CURVE_KEY = ["task", "reference", "metric", "outlier", "n", "k", "seed"]
AGREEMENT_COLUMNS = [*LAYER_COLUMNS, "task", "reference", "reference_revision", *CURVE_KEY[2:], "value"]
AGREEMENT_COLUMNS += list(SETTINGS_COLUMNS)
AGREEMENT_KEY = ["model", "revision", *CURVE_KEY, *SETTINGS_COLUMNS]

STRESS_COLUMNS = ["model", "test", "level", "prompt", "layer", "normalization", "value", "texts", "readout"]
DIP_COLUMNS = ["model", "texts", "test", "level", "layer", "dip", "p_value", "n", "readout"]
STRESS_KEY = ["model", "texts", "readout", "test"]
#: 8 significant digits keep distinct values distinct (mutual k-NN moves in steps of 1 / (n k) >= 1e-5)
FLOATS = "%.8g"


def read_table(path: Path, columns: Sequence[str], fix: str, **read: Any) -> pd.DataFrame:
    """``path`` read as a table with ``columns``: a torn or undecodable file, or one lacking a column, is one
    :class:`UserError` line naming the file and ``fix``, never a traceback or a table silently taken as empty."""
    try:
        frame = pd.read_csv(path, **read)
    except (pd.errors.ParserError, pd.errors.EmptyDataError, UnicodeDecodeError, EOFError, OSError) as err:
        raise UserError(f"cannot read {path}: {first_line(err)}; {fix}") from None
    missing = sorted(set(columns) - set(frame.columns))
    if missing:
        raise UserError(f"{path} is missing column(s) {missing}; {fix}")
    return frame


def replace_rows(old: pd.DataFrame, new: pd.DataFrame, key: Sequence[str]) -> pd.DataFrame:
    """``old`` updated with ``new``: a stored row whose ``key`` a new row holds is replaced, every other stays (what
    every table of a run folder does on writing, so a run of one part never drops another part's rows)."""
    if old.empty:
        return new.reset_index(drop=True)
    held = set(new[list(key)].astype(str).apply(tuple, axis=1))
    replaced = old[list(key)].astype(str).apply(tuple, axis=1).isin(held)
    return pd.concat([old[~replaced], new], ignore_index=True)


# --- scores.csv ---


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


def combine_scores(kept: pd.DataFrame, new_rows: list[dict]) -> pd.DataFrame:
    """``kept`` (a table already in the run folder) updated with ``new_rows`` (:func:`replace_rows` by
    :data:`ROW_KEY`), so a run of a few tasks never drops the others' scores."""
    new = tidy_scores(new_rows)
    if kept.empty:
        return new
    return tidy_scores(replace_rows(kept, new, ROW_KEY).to_dict("records"))


def layer_table(frame: pd.DataFrame) -> pd.DataFrame:
    """Layers as rows, tasks as columns, plus the mean over tasks: the table a person reads first."""
    table = frame.pivot_table(index="layer", columns="task", values="main_score", aggfunc="mean")
    table["mean"] = table.mean(axis=1)
    return table


def one_setting(scores: pd.DataFrame) -> pd.DataFrame:
    """The rows of the run's one model and settings. Every command that loads a run's model again
    (``select --labels``, ``cost``, ``export``, the agreement curves) reads the run through this, so they refuse the
    same mixed tables."""
    if scores["model"].nunique() > 1 or scores["revision"].nunique() > 1:
        runs = scores[["model", "revision"]].astype(str).drop_duplicates()
        named = ", ".join(f"{m} @ {r}" for m, r in zip(runs["model"], runs["revision"], strict=True))
        raise UserError(
            f"scores.csv holds several models or revisions ({named}): this command reads one; give a run folder of "
            "one model (`layer-mteb run --model MODEL --tasks TASKS --output RUN`, one folder per model)"
        )
    settings = [c for c in SETTINGS_COLUMNS if c in scores.columns]
    if len(scores[settings].astype(str).drop_duplicates()) > 1:
        differ = [c for c in settings if scores[c].astype(str).nunique() > 1]
        raise UserError(
            f"scores.csv holds several settings of {scores['model'].iloc[0]} ({', '.join(differ)} differ): give a "
            "run of one setting (one --output per setting)"
        )
    return scores.drop_duplicates(["task", "subset", "split", "layer"], keep="last")


def one_setting_per_model(scores: pd.DataFrame) -> pd.DataFrame:
    """:func:`one_setting` for each model of a table that may hold several (a ``run`` of several ``--model``): the
    readers that group by model (``select``, ``correlate``, the cost tradeoff) refuse a model scored at several
    revisions or settings, which they would otherwise average."""
    return pd.concat([one_setting(part) for _, part in scores.groupby("model", sort=False)], ignore_index=True)


def scores_config(scores: pd.DataFrame, **placement: Any) -> EncodeConfig:
    """The :class:`EncodeConfig` a (:func:`one_setting`) run table was scored with; ``placement`` (batch size,
    device, ...) is not recorded in the table and comes from the caller (default device: cuda if available)."""
    return EncodeConfig.from_key(scores.iloc[-1], **{"device": default_device(), **placement})


# --- metrics.csv, agreement.csv, stress.csv, dip.csv ---


def tidy_metrics(rows: list[dict]) -> pd.DataFrame:
    """Metric rows -> the ``metrics.csv`` frame: its columns in order, rows sorted so reruns write identical files."""
    frame = pd.DataFrame(rows, columns=METRIC_COLUMNS)
    return frame.sort_values(["model", "texts", "metric", "layer"], kind="stable").reset_index(drop=True)


def tidy_agreement(rows: list[dict] | pd.DataFrame) -> pd.DataFrame:
    """Rows -> the ``agreement.csv`` frame: its columns in order, sorted so that rewriting gives the same file."""
    frame = pd.DataFrame(rows, columns=AGREEMENT_COLUMNS)
    order = ["model", "task", "reference", "metric", "outlier", "n", "k", "seed", "layer"]
    return frame.sort_values(order, kind="stable").reset_index(drop=True)


def tidy_stress(frame: pd.DataFrame) -> pd.DataFrame:
    order = ["model", "readout", "test", "texts", "level", "normalization", "layer", "prompt"]
    return frame.sort_values(order, kind="stable")[STRESS_COLUMNS]


def tidy_dips(frame: pd.DataFrame) -> pd.DataFrame:
    return frame.sort_values(["model", "readout", "test", "texts", "level", "layer"], kind="stable")[DIP_COLUMNS]


def curves(frame: pd.DataFrame, **key: object) -> dict[str, pd.Series]:
    """task -> value per layer, for the ``agreement.csv`` rows whose columns equal ``key`` (e.g. ``metric="mknn",
    outlier="clamp", n=256, k=10, seed=0, reference=...``); a key that leaves several curves per task is an error."""
    rows = frame
    for column, value in key.items():
        rows = rows[rows[column] == value]
    out: dict[str, pd.Series] = {}
    for task, part in rows.groupby("task", sort=True):
        if part["layer"].duplicated().any():
            raise ValueError(f"{task}: {key} leaves several curves; name more of {CURVE_KEY}")
        out[str(task)] = part.set_index("layer")["value"].sort_index()
    return out
