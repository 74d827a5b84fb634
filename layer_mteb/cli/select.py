"""``layer-mteb select``: pick layers of a run by a label-free selector (a metric, a depth, ``auto``, agreement
with a sentence encoder) or by K labelled examples, and score the choice against the truth.

The selection is handed one :class:`~layer_mteb.metrics.agreement.source.SignalSource` (model, reference, sample),
through which the curves a selector needs and the run lacks are computed first; then the selector picks."""

from __future__ import annotations

import argparse
from dataclasses import dataclass

from layer_mteb.analysis.selection.registry import by_help, by_name, check_selector
from layer_mteb.cli.console import CURVES_SAVED, NOTHING_SAVED
from layer_mteb.cli.options import DATA_DEFAULT, ReadoutChoice, ReferenceChoice, add_fields, check_runs, settings_of
from layer_mteb.common.config import option
from layer_mteb.metrics.agreement import DEFAULT_K
from layer_mteb.metrics.texts import DEFAULT_N
from layer_mteb.model.names import check_loadable

NAME = "select"
HELP = "pick layers by a metric and score the choice against the truth"
INTERRUPTED = NOTHING_SAVED


def _labels_budget(value: str) -> int | str:
    if value == "full":
        return value
    try:
        return int(value)
    except ValueError:
        raise argparse.ArgumentTypeError(f"--labels takes a number of examples or 'full', not {value!r}") from None


@dataclass(frozen=True, kw_only=True)
class Settings(ReadoutChoice, ReferenceChoice):
    run: str = option("run folder holding scores.csv and metrics.csv", required=True)
    by: str | None = option(
        f"the selector (default: every metric): {by_help()}; one on each task's own texts (agreement, auto) picks per "
        "task; writes selection.<by>.csv"
    )
    per_task: bool | None = option(
        "choose a layer per task, not once for the mean over tasks (default: per task without --by where the run has "
        "metrics on its tasks' own texts, which pick only per task; else once for the mean)"
    )
    labels: int | str | None = option(
        "pick each task's layer by scoring every layer on K labelled test examples (or 'full'), from the run's cached "
        "vectors, instead of by a metric (default: off, pick by metrics)",
        type=_labels_budget,
    )
    draws: int = option("seeded draws of K examples per task (with --labels)", 10)
    seed: int = option("seed of the draws (--labels) or of the text sample (--by agreement)", 0)
    model: str | None = option("with --labels: how to load the run's model (default: its name in scores.csv)")
    eval_workers: int | None = option("with --labels: processes scoring layers at once (default: one per CPU core)")
    # named n and k, as agreement.csv's columns and the curves' parameters are
    n: int = option("with --by agreement: texts drawn per task (seeded)", DEFAULT_N, flags=("--sample",))
    k: int = option("with --by agreement: k of mutual k-NN", DEFAULT_K, flags=("--neighbours",))
    data_dir: str | None = option(
        "with --labels: folder of local task data (default: the folder the run read, from its run.json, else "
        f"{DATA_DEFAULT.strip('()').removeprefix('default: ')})"
    )
    #: what Ctrl-C leaves: each task's agreement curves are written as it finishes (a rerun reads them back); any
    #: other pick writes its file at the end
    interrupted: str = NOTHING_SAVED


def add_options(select: argparse.ArgumentParser) -> None:
    add_fields(select, Settings)


def check(args: argparse.Namespace) -> Settings:
    check_runs([args.run])
    if args.model is not None:
        check_loadable(args.model)  # a hub id that cannot load: one line before torch loads
    # a mistyped --by in a fraction of a second, with the nearest names
    selector = None if args.by is None else check_selector(args.by)
    saves_curves = args.labels is None and selector is not None and selector.computes_curves
    return settings_of(Settings, args, interrupted=CURVES_SAVED if saves_curves else NOTHING_SAVED)


def execute(settings: Settings) -> None:
    if settings.labels is not None:
        _select_by_labels(settings)
        return
    from layer_mteb.analysis.selection.picks import (
        explained,
        metric_texts,
        run_leaderboard,
        select_layers,
        selection_file,
    )
    from layer_mteb.analysis.selection.tradeoff import cheapest_lines
    from layer_mteb.cli.console import arithmetics_of, print_leaderboard
    from layer_mteb.common.run_folder import RunFolder
    from layer_mteb.metrics.agreement.source import SignalSource

    folder, by = RunFolder(settings.run), settings.by  # the one folder every reader below is handed
    selector = None if by is None else by_name(by)
    source = settings_of(SignalSource, settings)  # --agreement-with, --model, --sample, --neighbours, --seed
    per_task = bool(settings.per_task)
    own, shared = metric_texts(folder) if settings.per_task is None and by is None else (False, False)
    if own and not shared:  # the metric picks the run has are all per task: shown, and said first
        per_task = True
        print(
            "a layer per task: this run's metrics are on its tasks' own texts, which pick per task (--no-per-task: "
            "one layer for the mean over tasks, which only the baselines then pick)\n"
        )
    elif own:
        print(
            "one layer for the mean over tasks, by the metrics of shared texts; --per-task also shows the picks of "
            "the metrics on each task's own texts\n"
        )
    picks = select_layers(
        folder,
        by=selector,
        per_task=per_task,
        metric_readout=settings.metric_readout,
        arithmetic=settings.arithmetic,
        source=source,
    )
    for line in explained(folder, picks, selector, source):  # what the selector read, why, where its curves are
        print(line)
    board, lines = run_leaderboard(folder, picks, by)
    lines += [f"metrics computed by the {a} arithmetic (`metrics --arithmetic`)" for a in arithmetics_of(picks)]
    print_leaderboard(board, folder.file(selection_file(by)), "\n".join(lines))
    for line in cheapest_lines(folder):
        print(line)


def _select_by_labels(settings: Settings) -> None:
    from layer_mteb.analysis.labels.budget import labels_file, select_with_labels
    from layer_mteb.common.run_folder import RunFolder

    picks = select_with_labels(
        settings.run,
        settings.labels,
        draws=settings.draws,
        seed=settings.seed,
        model=settings.model,
        workers=settings.eval_workers,
        data_dir=settings.data_dir,
    )
    path = RunFolder(settings.run).write_table(labels_file(settings.labels), picks, float_format="%.6f")
    shown = ["task", "chosen_layer", "chosen_score", "best_layer", "regret", "gain", "mean_regret", "regret_std"]
    print(picks[[*shown, "picks", "seconds"]].round(4).to_string(index=False))
    means = picks[["regret", "gain", "mean_regret"]].mean().round(4)
    summary = ", ".join(f"{k} {v}" for k, v in means.items())
    print(f"\nK={settings.labels}, {settings.draws} draws, {len(picks)} tasks: {summary}")
    print(f"wrote {path}")
