"""What each ``layer-mteb`` subcommand does with its parsed arguments: build the settings, call the library, print.
The library is imported inside each command, so ``--help`` and argument errors stay instant."""

from __future__ import annotations

import argparse
import dataclasses
import os
import time
from pathlib import Path
from typing import TYPE_CHECKING

from layer_mteb.cli.arguments import output_folder, parse_lengths, process_device
from layer_mteb.common.errors import UserError

if TYPE_CHECKING:
    from layer_mteb.analysis.selection.agreement import AgreementOptions


def import_results(args: argparse.Namespace) -> None:
    from layer_mteb.analysis.runs.importing import write_import

    lines = write_import(
        args.folder,
        args.output,
        model=args.model,
        n_layers=args.n_layers,
        metrics=args.metrics,
        metrics_model=args.metrics_model,
        normalization=args.normalization,
    )
    print("\n".join(lines))


def _encode_config(args: argparse.Namespace):
    from layer_mteb.common.config import EncodeConfig, default_device
    from layer_mteb.vectors.budget import parse_size

    return EncodeConfig(
        readout=args.readout,
        pooling=args.pooling,
        max_length=args.max_length,
        dtype=args.dtype,
        batch_size=args.batch_size,
        device=process_device(args.device or default_device()),
        device_map=args.device_map,
        max_batch_tokens=args.max_batch_tokens,
        attention=args.attention,
        normalize=args.normalize,
        max_cache_memory=parse_size(args.max_cache_memory) if getattr(args, "max_cache_memory", None) else None,
    )


def _probe_hub_if_needed(args: argparse.Namespace) -> None:
    """Probe the hub only when something may come from it; before mteb and datasets import (they read
    ``HF_HUB_OFFLINE`` once)."""
    from layer_mteb.cli.checks import hub_needed

    if hub_needed(args):
        from layer_mteb.model.hub import offline_unless_reachable

        offline_unless_reachable()


def run(args: argparse.Namespace) -> None:
    _probe_hub_if_needed(args)
    from layer_mteb.cli.console import print_scores
    from layer_mteb.evaluation.sweep import SweepOptions, run_request

    request = dataclasses.replace(args.request, config=_encode_config(args))  # the device: known once torch is
    options = SweepOptions(overwrite=args.overwrite, show_warnings=args.verbose, vector_cache=not args.no_vector_cache)
    frame = run_request(request, options)
    if os.environ.get("RANK", "0") == "0":  # under accelerate/torchrun the main process prints the merged table
        print_scores(frame, request.output)


def merge(args: argparse.Namespace) -> None:
    from layer_mteb.evaluation.merge import merge_shards

    frame = merge_shards(args.output)
    print(f"merged {len(frame)} rows into {Path(args.output) / 'scores.csv'}")


def report(args: argparse.Namespace) -> None:
    from layer_mteb.analysis.report.build import write_report
    from layer_mteb.cli.console import print_report

    paths = write_report(
        args.run,
        args.output,
        paper_curves=args.paper_curves,
        reference=args.reference,
        paper_tasks=args.paper_tasks,
        entropy_selector=args.entropy_selector,
        random_runs=args.random_run,
    )
    print_report(Path(args.output), paths)


def metrics(args: argparse.Namespace) -> None:
    _probe_hub_if_needed(args)
    from layer_mteb.cli.console import print_metrics
    from layer_mteb.evaluation.plan import check_writable
    from layer_mteb.metrics.runner import PAPER_METRIC_SIZES, QUICK_METRIC_SIZES, MetricSettings, compute_metrics
    from layer_mteb.metrics.texts import text_sources
    from layer_mteb.model.loading import load_model

    sizes = PAPER_METRIC_SIZES if args.full_protocol else QUICK_METRIC_SIZES
    settings = MetricSettings(
        n_prompts=sizes["n_prompts"] if args.n_prompts is None else args.n_prompts,
        views=sizes["views"] if args.views is None else args.views,
        augment_prompts=sizes["augment_prompts"] if args.augment_prompts is None else args.augment_prompts,
        p=args.augment_p,
        alpha=args.alpha,
        seed=args.seed,
    )
    output = output_folder(args)
    check_writable(output)  # an unusable --output must fail now, not after minutes of computing
    config = _encode_config(args)
    model = load_model(args.model, config, revision=args.revision, trust_remote_code=args.trust_remote_code)
    for source in text_sources(args.texts):  # one model load for every source; each is saved as it finishes
        frame = compute_metrics(model, source, config=config, settings=settings, data_dir=args.data_dir, output=output)
        print_metrics(frame, output)


def stress(args: argparse.Namespace) -> None:
    _probe_hub_if_needed(args)
    from layer_mteb.evaluation.plan import check_writable
    from layer_mteb.metrics.stress import LENGTHS, PAPER_STRESS_SIZES, QUICK_STRESS_SIZES, StressSettings, run_stress

    sizes = PAPER_STRESS_SIZES if args.paper_sizes else QUICK_STRESS_SIZES
    lengths = parse_lengths(args.lengths) or LENGTHS
    settings = StressSettings(
        tests=tuple(t.strip() for t in args.tests.split(",") if t.strip()),
        n_prompts=sizes["n_prompts"] if args.n_prompts is None else args.n_prompts,
        length_prompts=sizes["length_prompts"] if args.length_prompts is None else args.length_prompts,
        lengths=lengths,
        alpha=args.alpha,
        seed=args.seed,
    )
    output = output_folder(args)
    check_writable(output)
    started = time.time()
    values, dips = run_stress(
        args.model,
        args.texts,
        config=_encode_config(args),
        settings=settings,
        data_dir=args.data_dir,
        output=output,
        compress=args.gzip,
    )
    means = values[values["normalization"] == "maxEntropy"].groupby(["test", "level", "layer"])["value"].mean()
    print(means.unstack("layer").round(3).rename(index=lambda v: f"{v:g}", level="level").to_string())
    for (test, level), part in dips.groupby(["test", "level"]):
        top = part.sort_values(["dip", "layer"], ascending=[False, True]).iloc[0]
        print(
            f"{test} {level:g}: most bimodal layer {int(top['layer'])} (dip {top['dip']:.3f}, p {top['p_value']:.3g})"
        )
    print_written(output, started)


def select(args: argparse.Namespace) -> None:
    from layer_mteb.analysis.selection.select import best_lines, run_leaderboard, select_layers
    from layer_mteb.cli.console import print_leaderboard
    from layer_mteb.common.run_folder import selection_file

    if args.labels is not None:
        select_by_labels(args)
        return
    from layer_mteb.analysis.selection.agreement import READS_AGREEMENT, AgreementOptions, describe_agreement
    from layer_mteb.common.run_folder import AGREEMENT_FILE

    reads_curves = args.by in READS_AGREEMENT or (args.by == "auto" and (Path(args.run) / AGREEMENT_FILE).is_file())
    options = AgreementOptions(
        reference=_stored_reference(args.reference) if reads_curves else None,
        metric=args.agreement,
        outlier=args.outliers,
        n=args.sample,
        k=args.neighbours,
        seed=args.seed,
    )
    if args.by in READS_AGREEMENT:
        _compute_missing_curves(args, options)
    selection = select_layers(
        args.run, by=args.by, per_task=args.per_task, metric_readout=args.metric_readout, agreement=options
    )
    if args.by in ("auto", "agreement"):  # which rule picked for each model, and why
        for line in describe_agreement(args.run, selection, args.by, options):
            print(line)
    board, note = run_leaderboard(args.run, selection, args.by)
    lines = [*best_lines(args.run, selection), *([note] if note else [])]
    print_leaderboard(board, Path(args.run) / selection_file(args.by), "\n".join(lines))
    print_cheapest(args.run)
    if args.by in READS_AGREEMENT:  # the curves it measured (or read back) are kept for the next pick
        print(f"agreement curves: {Path(args.run) / AGREEMENT_FILE}")


def _stored_reference(reference: str | None) -> str | None:
    """``--reference`` as the run's ``agreement.csv`` names it (a packaged name becomes its hub id), so the
    selection, which only reads that table, finds its curves without knowing the packaged models."""
    if reference is None:
        return None
    from layer_mteb.metrics.agreement.reference import reference_name

    return reference_name(reference)


def _compute_missing_curves(args: argparse.Namespace, options: AgreementOptions) -> None:
    """The agreement curves' own stage, run before the pick for the tasks whose curve under ``options`` the run's
    ``agreement.csv`` lacks (one model and one reference load for them all); the pick then only reads."""
    from layer_mteb.analysis.selection.agreement import missing_curves

    missing = missing_curves(args.run, options)
    if missing:
        from layer_mteb.metrics.agreement.run import agreement_curves

        agreement_curves(
            args.run,
            missing,
            n=options.n,
            seed=options.seed,
            k=options.k,
            reference=args.reference,
            model=args.model,
        )


def print_cheapest(run: str) -> None:
    """The cheapest layer within one point of the best (mean over tasks), one line per model of the run."""
    from layer_mteb.analysis.selection.curves import MEAN
    from layer_mteb.analysis.selection.tradeoff import cheapest_line, run_cheapest

    picks = run_cheapest(run)
    for _, row in picks[picks["scope"] == MEAN].iterrows():
        print(cheapest_line(row, run))


def select_by_labels(args: argparse.Namespace) -> None:
    from layer_mteb.analysis.labels.budget import select_with_labels
    from layer_mteb.common.run_folder import RunFolder, labels_file

    picks = select_with_labels(
        args.run,
        args.labels,
        draws=args.draws,
        seed=args.seed,
        model=args.model,
        workers=args.eval_workers,
        data_dir=args.data_dir,
    )
    path = RunFolder(args.run).write_table(labels_file(args.labels), picks, float_format="%.6f")
    shown = ["task", "chosen_layer", "chosen_score", "best_layer", "regret", "gain", "mean_regret", "regret_std"]
    print(picks[[*shown, "picks", "seconds"]].round(4).to_string(index=False))
    means = picks[["regret", "gain", "mean_regret"]].mean().round(4)
    summary = ", ".join(f"{k} {v}" for k, v in means.items())
    print(f"\nK={args.labels}, {args.draws} draws, {len(picks)} tasks: {summary}")
    print(f"wrote {path}")


def correlate(args: argparse.Namespace) -> None:
    from layer_mteb.analysis.selection.correlation import correlate, correlation_table
    from layer_mteb.cli.console import print_correlation

    frame = correlate(
        args.run,
        method=args.method,
        n_permutations=args.permutations,
        seed=args.seed,
        metric_readout=args.metric_readout,
    )
    print_correlation(correlation_table(frame), Path(args.run))


def label_budget(args: argparse.Namespace) -> None:
    from layer_mteb.analysis.labels.curve import write_curve

    started = time.time()
    needed = write_curve(
        args.run,
        args.output,
        draws=args.draws,
        seed=args.seed,
        data_dir=args.data_dir,
        baselines_only=args.baselines_only,
        workers=args.eval_workers,
    )
    print(needed.to_string(index=False))
    print_written(Path(args.output), started)


def print_written(folder: Path, since: float) -> None:
    """``wrote FOLDER: a, b, c``: the files a command wrote (or rewrote) into ``folder`` since ``since``."""
    names = sorted(p.name for p in folder.glob("*") if p.is_file() and p.stat().st_mtime >= since - 1)
    print(f"wrote {folder}: {', '.join(names) or 'nothing'}")


def reproduce(args: argparse.Namespace) -> None:
    from layer_mteb.paper.reproduce import reproduce as reproduce_paper

    policy = Path(args.policy) if args.policy else None
    extracted = args.release is None  # the deprecated --reference: tables extracted from the release
    source = Path(args.reference) if extracted else Path(args.release)
    runs = [Path(r) for r in args.run]
    reproduce_paper(source, runs, Path(args.output), args.permutations, policy, extracted=extracted)


def export(args: argparse.Namespace) -> None:
    from layer_mteb.cli.exporting import plan_export

    plan = plan_export(args)
    from layer_mteb.model.names import may_need_hub

    if may_need_hub(plan.model):
        from layer_mteb.model.hub import offline_unless_reachable

        offline_unless_reachable()
    from layer_mteb.model.export import export_layer
    from layer_mteb.model.loading import load_model

    model = load_model(plan.model, plan.config, revision=plan.revision, trust_remote_code=args.trust_remote_code)
    if plan.scored_revision is not None and model.revision != plan.scored_revision:
        raise UserError(
            f"{plan.model} is at revision {model.revision}, but {args.run} scored revision {plan.scored_revision}; "
            "pass --model the model the run scored"
        )
    output = export_layer(model, plan.layer, plan.config, args.output, overwrite=args.overwrite, run=plan.run)
    print(
        f"layer {plan.layer} of {model.name} ({plan.config.readout} readout, {plan.config.pooling} pooling) "
        f"written to {output}"
    )


def cost(args: argparse.Namespace) -> None:
    from layer_mteb.common.config import default_device
    from layer_mteb.common.run_folder import COST_FILE
    from layer_mteb.metrics.cost import CostSettings, run_cost

    frame = run_cost(
        args.run,
        model=args.model,
        texts=args.texts,
        settings=CostSettings(n_texts=args.n_texts, seed=args.seed),
        data_dir=args.data_dir,
        batch_size=args.batch_size,
        max_batch_tokens=args.max_batch_tokens,
        device=process_device(args.device or default_device()),
    )
    shown = ["layer", "flops_fraction", "seconds_per_1000_texts", "flops"]
    print(frame[shown].round(4).to_string(index=False))
    print(f"\n{frame['n_texts'].iloc[0]} texts, batch size {args.batch_size}, {frame['threads'].iloc[0]} threads")
    print_cheapest(args.run)
    print(f"wrote {Path(args.run) / COST_FILE}")
