"""``layer-mteb export``'s glue: which model, settings and layer to export, from the options or from a run folder.

With ``--run``, the model, its revision and the encode settings are the run's own (``scores.csv``), so the exported
folder is what was scored; the layer is ``--layer`` or the pick of a label-free selector (``--by``), asked of the
selection API once (:func:`_selection`). Nothing here writes: the run folder is only read.
"""

from __future__ import annotations

import argparse
from dataclasses import dataclass

import pandas as pd

from layer_mteb.cli.arguments import EXPORT_SETTINGS
from layer_mteb.common.config import EncodeConfig
from layer_mteb.common.errors import UserError
from layer_mteb.common.run_folder import RunFolder
from layer_mteb.model.export import RunRecord
from layer_mteb.model.names import packaged_name

MEAN = "mean"  # the selection API's name for the score averaged over tasks


@dataclass(frozen=True)
class ExportPlan:
    """What to load and export: ``model`` as ``load_model`` takes it, at ``revision``; ``scored_revision`` is the
    revision the run scored (the loaded model must be that one)."""

    model: str
    revision: str | None
    config: EncodeConfig
    layer: int
    run: RunRecord | None = None
    scored_revision: str | None = None


def plan_export(args: argparse.Namespace) -> ExportPlan:
    """The plan of ``args``: the options as given, or the run's model, settings and chosen layer."""
    if args.run is None:
        given = {name: getattr(args, name) for name in EXPORT_SETTINGS if getattr(args, name) is not None}
        return ExportPlan(args.model, args.revision, EncodeConfig(**given), args.layer)
    folder = RunFolder(args.run)
    scores, scored = folder.scores(), folder.setting(device="cpu")  # the device is the export's, not the run's
    name, revision, n_layers, config = scored.model, scored.revision, scored.n_layers, scored.config
    layer, summary = (args.layer, None) if args.by is None else _selection(args, scores)
    if layer > n_layers:
        raise UserError(f"--layer {layer} is out of range: {name} has layers 0 (embeddings) to {n_layers}")
    record = RunRecord(str(args.run), args.by, summary, layer_scores(scores, layer))
    model = args.model or packaged_name(name, revision) or name
    pinned = None if args.model else revision
    return ExportPlan(model, pinned, config, layer, record, scored_revision=revision)


def layer_scores(scores: pd.DataFrame, layer: int) -> list[tuple[str, float]]:
    """(task, main score) of ``layer`` in the run, a subset named after its task, then the mean over them."""
    rows = scores[scores["layer"] == layer]
    named = [
        (task if subset in ("default", "") else f"{task} ({subset})", float(score))
        for task, subset, score in zip(rows["task"], rows["subset"].astype(str), rows["main_score"], strict=True)
    ]
    named.sort()
    return [*named, (MEAN, sum(s for _, s in named) / len(named))] if named else []


def _selection(args: argparse.Namespace, scores: pd.DataFrame) -> tuple[int, str]:
    """The layer ``--by`` picks (for ``--task``, or the one pick for the mean over tasks) and a line saying how it
    compares with the last and the best layer. The run's metrics are passed in as frames, so nothing is written."""
    from layer_mteb.analysis.selection.agreement import READS_AGREEMENT, AgreementOptions, missing_curves
    from layer_mteb.analysis.selection.select import select_layers

    if args.by in READS_AGREEMENT:  # the curves' own stage first, at the default options, where the run lacks them
        missing = missing_curves(args.run, AgreementOptions())
        if missing:
            from layer_mteb.metrics.agreement.run import agreement_curves

            agreement_curves(args.run, missing)
    picks = select_layers(
        args.run,  # read for agreement curves; no selection file is written
        scores=scores,
        metrics=_metrics(args.run),
        by=args.by,
        per_task=args.task is not None,
        metric_readout=args.metric_readout,
        write=False,
    )
    label = "auto" if args.by == "auto" else args.by
    picks = picks[picks["selector"] == label]
    if args.task is not None:
        picks = picks[picks["task"] == args.task]
        if picks.empty:
            raise UserError(f"--by {args.by} picked no layer for task {args.task!r} in {args.run}")
    elif (picks["task"] == MEAN).any():
        picks = picks[picks["task"] == MEAN]
    layers = sorted(int(k) for k in picks["chosen_layer"].unique())
    if not layers:
        raise UserError(f"--by {args.by} picked no layer in {args.run}: does its metrics.csv have that metric?")
    if len(layers) > 1:
        raise UserError(
            f"--by {args.by} picks different layers ({', '.join(map(str, layers))}) across "
            f"{'tasks' if args.task is None else 'text sources'}: add --task NAME to export one task's pick, or --layer"
        )
    return layers[0], _summary(picks.iloc[0], len(picks))


def _summary(pick: pd.Series, n_picks: int) -> str:
    scope = "the mean over tasks" if pick["task"] == MEAN else f"task {pick['task']}"
    if n_picks > 1:
        return f"It picks layer {int(pick['chosen_layer'])} for each of the {n_picks} tasks of the run."
    return (
        f"On {scope} it scores {pick['chosen_score']:.4f}; the last layer ({int(pick['last_layer'])}) "
        f"{pick['last_score']:.4f}, the best layer in hindsight ({int(pick['best_layer'])}) {pick['best_score']:.4f} "
        f"(regret {pick['regret']:.4f}, gain {pick['gain']:+.4f})."
    )


def _metrics(run: str) -> pd.DataFrame:
    """The run's metrics, or none (depth and baseline selectors need none)."""
    return RunFolder(run).metrics(missing_ok=True)
