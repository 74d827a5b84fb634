"""Selectors ranked by mean regret, then mean gain: the one ranking behind ``layer-mteb select``, the report's
leaderboard and the selector studies."""

from __future__ import annotations

import math
from collections.abc import Sequence
from itertools import chain

import pandas as pd

from layer_mteb.analysis.selection.curves import MEAN
from layer_mteb.metrics.texts import task_of_label


def leaderboard(
    picks: pd.DataFrame,
    by: Sequence[str] = ("selector", "texts"),
    within: Sequence[str] = (),
    scores: pd.DataFrame | None = None,
) -> pd.DataFrame:
    """Selectors ranked by mean regret, then mean gain: the one ranking behind ``layer-mteb select`` and the report.

    Rows are grouped by ``within`` + ``by`` and ranked inside each ``within`` group (say, per model and scope);
    per-task own-text sources (``task:<name>``) are pooled as ``own texts``. ``chosen_layer`` is the layer every
    grouped row chose, else ``varies``; ``n_tasks`` counts distinct tasks, a model's ``mean`` row counting every task
    the model scored in ``scores`` (the tasks its mean averages) where given; ``beats_last`` is the share with gain > 0.
    """
    frame = picks
    counted = [[t] for t in frame["task"]]
    if scores is not None:
        mean_tasks = {str(model): sorted(part["task"].astype(str).unique()) for model, part in scores.groupby("model")}
        rows = zip(frame["model"].astype(str), frame["task"], strict=True)
        counted = [list(mean_tasks.get(m, [t])) if t == MEAN else [t] for m, t in rows]
    frame = frame.assign(counted=counted)
    if "texts" in frame.columns:
        frame = frame.assign(texts=frame["texts"].where(frame["texts"].map(task_of_label).isna(), "own texts"))
    frame = frame.assign(beats_last=frame["gain"] > 0)
    board = frame.groupby([*within, *by], sort=False).agg(
        n_tasks=("counted", lambda s: len(set(chain.from_iterable(s)))),
        chosen_layer=("chosen_layer", lambda s: s.iloc[0] if s.nunique() == 1 else "varies"),
        **{c: (c, "mean") for c in ("chosen_score", "last_score", "best_score", "regret", "gain", "beats_last")},
    )
    board = board.reset_index()
    order = [*within, "regret", "gain"]
    ascending = [True] * len(within) + [True, False]
    return board.sort_values(order, ascending=ascending, kind="stable").reset_index(drop=True)


def is_selector(board: pd.DataFrame, name: str) -> pd.Series:
    """Which rows of a :func:`leaderboard` (``selector``, ``texts``) are the study selector ``name``
    (``<metric>@<own|source>``, :func:`~.registry.by_name`) or a baseline of that name."""
    metric, _, source = name.partition("@")
    if not source:
        return board["selector"] == name
    texts = "own texts" if source == "own" else source
    return (board["selector"] == metric) & (board["texts"] == texts)


LEADERBOARD_COLUMNS = ["model", "selector", "scope", "layer", "n_tasks", "score", "last", "best", "gain", "regret"]


def selector_leaderboard(picks: pd.DataFrame | None) -> pd.DataFrame | None:
    """:func:`leaderboard` per model: one global layer each (scope ``mean``), and per-task
    picks averaged over tasks (scope ``per task``), in the report's column names.

    Numbers are the selection file's own (``chosen_score``, ``last_score``, ...); ``None`` when it is absent or lacks
    ``model, selector, scope, chosen_layer, chosen_score``.
    """
    needed = {"model", "selector", "scope", "chosen_layer", "chosen_score"}
    if picks is None or not needed <= set(picks.columns):
        return None
    frame = picks.astype({"scope": str})
    frame = frame.assign(**{c: math.nan for c in ("last_score", "best_score", "gain", "regret") if c not in frame})
    scope = frame["scope"].where(frame["scope"] == MEAN, "per task")
    board = leaderboard(frame.assign(task=frame["scope"], scope=scope), by=["selector"], within=["model", "scope"])
    board = board.rename(columns=dict(chosen_layer="layer", chosen_score="score", last_score="last", best_score="best"))
    global_pick = board["scope"] == MEAN
    board["layer"] = pd.to_numeric(board["layer"].where(global_pick), errors="coerce").astype("Int64")
    board["n_tasks"] = board["n_tasks"].where(~global_pick).astype("Int64")
    return board[LEADERBOARD_COLUMNS]
