"""The tidy results table: one row per (task, layer, subset), keyed by integer layer, written atomically."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any, TypedDict

import pandas as pd

from layer_mteb.common.config import LEGACY_SETTINGS, SETTINGS_COLUMNS, EncodeConfig, default_device
from layer_mteb.common.errors import UserError
from layer_mteb.common.files import atomic_write
from layer_mteb.common.run_files import SCORES_FILE


class LayerId(TypedDict):
    """Which layer of which model a row is about: the first columns of scores and metrics alike."""

    model: str
    revision: str
    layer: int
    n_layers: int
    relative_depth: float


LAYER_COLUMNS = tuple(LayerId.__annotations__)
SCORE_COLUMNS = [*LAYER_COLUMNS, "task", "task_type", "split", "subset", "main_score", *SETTINGS_COLUMNS, "data"]
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


#: What makes two score rows the same measurement: a newer one replaces an older one, any other older row stays.
ROW_KEY = ["model", "revision", "layer", "task", "split", "subset", *SETTINGS_COLUMNS]


def combine_scores(
    kept: pd.DataFrame, new_rows: list[dict], own_attention: Mapping[tuple[str, str], str] | None = None
) -> pd.DataFrame:
    """``kept`` (a table already in the run folder) updated with ``new_rows``: rows of the same measurement are
    replaced, every other row of ``kept`` stays, so a run of a few tasks never drops the others' scores.

    Rows written before the attention was resolved say ``native``, the model's own. ``own_attention`` ((model,
    revision) -> the attention that model runs unless told otherwise) reads them as that attention, so a rerun
    replaces them like any other row instead of keeping an older copy of the same measurement beside its own."""
    new = tidy_scores(new_rows)
    if kept.empty:
        return new
    kept = _resolve_native(with_legacy_settings(kept.copy()), own_attention or {})
    if not new.empty:
        keys = pd.MultiIndex.from_frame(new[ROW_KEY].astype(str))
        kept = kept[~pd.MultiIndex.from_frame(kept[ROW_KEY].astype(str)).isin(keys)]
    return tidy_scores([*kept.to_dict("records"), *new.to_dict("records")])


def _resolve_native(frame: pd.DataFrame, own_attention: Mapping[tuple[str, str], str]) -> pd.DataFrame:
    native = frame["attention"].astype(str) == LEGACY_SETTINGS["attention"]
    for (model, revision), attention in own_attention.items():
        rows = native & (frame["model"].astype(str) == model) & (frame["revision"].astype(str) == revision)
        frame.loc[rows, "attention"] = attention
    return frame


def read_scores_if_any(run_dir: Path, name: str = SCORES_FILE) -> pd.DataFrame:
    """The table a run folder already holds (empty when there is none)."""
    path = run_dir / name
    return with_legacy_settings(pd.read_csv(path)) if path.is_file() else pd.DataFrame(columns=SCORE_COLUMNS)


def write_scores(frame: pd.DataFrame, run_dir: Path, name: str = SCORES_FILE) -> Path:
    path = run_dir / name
    atomic_write(path, lambda tmp: frame.to_csv(tmp, index=False))
    return path


def read_scores(run_dir: str | Path) -> pd.DataFrame:
    return with_legacy_settings(pd.read_csv(Path(run_dir) / SCORES_FILE))


def with_legacy_settings(frame: pd.DataFrame) -> pd.DataFrame:
    """A table written before a setting column existed (or by code that left it empty) gets that column with what
    the setting meant then."""
    for column, value in LEGACY_SETTINGS.items():
        frame[column] = frame[column].astype(object).fillna(value) if column in frame.columns else value
    return frame


def layer_table(frame: pd.DataFrame) -> pd.DataFrame:
    """Layers as rows, tasks as columns, plus the mean over tasks: the table a person reads first."""
    table = frame.pivot_table(index="layer", columns="task", values="main_score", aggfunc="mean")
    table["mean"] = table.mean(axis=1)
    return table


def one_setting(scores: pd.DataFrame) -> pd.DataFrame:
    """The rows of the run's one model and settings; rows of older runs that wrote ``attention=native`` (the model's
    own) give way to rows of the same layer that name the attention. Every command that loads a run's model again
    (``select --labels``, ``cost``) reads the run through this, so they refuse the same mixed tables."""
    if scores["model"].nunique() > 1 or scores["revision"].nunique() > 1:
        runs = scores[["model", "revision"]].astype(str).drop_duplicates()
        named = ", ".join(f"{m} @ {r}" for m, r in zip(runs["model"], runs["revision"], strict=True))
        raise UserError(
            f"scores.csv holds several models or revisions ({named}): this command reads one; give a run folder of "
            "one model (`layer-mteb run --model MODEL --tasks TASKS --output RUN`, one folder per model)"
        )
    settings = [c for c in ("readout", "pooling", "max_length", "dtype", "normalize") if c in scores.columns]
    if len(scores[settings].drop_duplicates()) > 1:
        differ = [c for c in settings if scores[c].astype(str).nunique() > 1]
        raise UserError(
            f"scores.csv holds several settings of {scores['model'].iloc[0]} ({', '.join(differ)} differ): give a "
            "run of one setting (one --output per setting)"
        )
    named = scores[scores["attention"].astype(str) != "native"] if "attention" in scores.columns else scores
    if "attention" in scores.columns and named["attention"].nunique() > 1:
        raise UserError("scores.csv holds runs with causal and bidirectional attention: give a run of one setting")
    ordered = pd.concat([scores.drop(named.index), named])
    return ordered.drop_duplicates(["task", "subset", "split", "layer"], keep="last")


def one_setting_per_model(scores: pd.DataFrame) -> pd.DataFrame:
    """:func:`one_setting` for each model of a table that may hold several (a ``run`` of several ``--model``): the
    readers that group by model (``select``, ``correlate``, the cost tradeoff) refuse a model scored at several
    revisions or settings, which they would otherwise average."""
    return pd.concat([one_setting(part) for _, part in scores.groupby("model", sort=False)], ignore_index=True)


def scores_config(scores: pd.DataFrame, **placement: Any) -> EncodeConfig:
    """The :class:`EncodeConfig` a (:func:`one_setting`) run table was scored with; ``placement`` (batch size,
    device, ...) is not recorded in the table and comes from the caller (default device: cuda if available)."""
    return EncodeConfig.from_key(scores.iloc[-1], **{"device": default_device(), **placement})
