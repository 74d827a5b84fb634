"""``layer-mteb``: parse arguments and route to the library; user mistakes print one line and exit 2."""

from __future__ import annotations

import argparse
import logging
import os
import sys
import warnings

from layer_mteb.config import DTYPES, POOLINGS, READOUTS
from layer_mteb.errors import UserError


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="layer-mteb", description="Score every layer of a model on MTEB tasks.")
    commands = parser.add_subparsers(dest="command", required=True)
    run = commands.add_parser("run", help="score every requested layer on every task (one forward pass per task)")
    run.add_argument(
        "--model", required=True, help="hub id, local folder, GGUF file, or packaged name (minilm-l6, ...)"
    )
    run.add_argument("--revision", default=None, help="hub revision (branch, tag or commit)")
    run.add_argument("--tasks", default="paper32", help="tasks.yaml[:suite], a suite name, or comma-separated tasks")
    run.add_argument("--data-dir", default=None, help="folder of local task data (default: $LAYER_MTEB_DATA)")
    run.add_argument("--layers", default="all", help="all | 0,3,-1 | 0:12 (hidden states; 0 = embeddings)")
    run.add_argument("--readout", choices=READOUTS, default="final_norm")
    run.add_argument("--pooling", choices=POOLINGS, default="mean")
    run.add_argument("--max-length", type=int, default=512)
    run.add_argument("--batch-size", type=int, default=32)
    run.add_argument("--device", default=None, help="cpu | cuda | cuda:N (default: cuda if available)")
    run.add_argument("--dtype", choices=DTYPES, default="float32")
    run.add_argument("--output", default=None, help="run folder (default: results/<model>)")
    run.add_argument("--overwrite", action="store_true", help="recompute results that already exist")
    run.add_argument("--no-vector-cache", action="store_true", help="do not keep pooled vectors on disk")
    run.add_argument("--trust-remote-code", action="store_true", help="allow model code from the hub (off by default)")
    run.set_defaults(handler=_run)
    _add_metrics(commands)
    _add_select(commands)
    _add_correlate(commands)
    return parser


def _add_metrics(commands) -> None:
    metrics = commands.add_parser("metrics", help="representation metrics of every layer (label-free)")
    metrics.add_argument("--model", required=True, help="hub id, local folder, GGUF file, or packaged name")
    metrics.add_argument("--revision", default=None, help="hub revision (branch, tag or commit)")
    metrics.add_argument("--texts", default="wikitext", help="wikitext | task:<TaskName> | FILE (one prompt a line)")
    metrics.add_argument("--n-prompts", type=int, default=1000, help="texts to use (seeded sample if more)")
    metrics.add_argument("--views", type=int, default=16, help="augmented views per prompt for LiDAR (0: skip)")
    metrics.add_argument("--augment-prompts", type=int, default=200, help="prompts that get augmented views")
    metrics.add_argument("--augment-p", type=float, default=0.3, help="augmentation probability")
    metrics.add_argument("--alpha", type=float, default=1.0, help="Rényi order of the matrix entropies")
    metrics.add_argument("--seed", type=int, default=0)
    metrics.add_argument("--data-dir", default=None, help="folder of local data (WikiText2/, tasks; $LAYER_MTEB_DATA)")
    metrics.add_argument("--readout", choices=READOUTS, default="final_norm")
    metrics.add_argument("--pooling", choices=POOLINGS, default="mean")
    metrics.add_argument("--max-length", type=int, default=512)
    metrics.add_argument("--batch-size", type=int, default=32)
    metrics.add_argument("--device", default=None, help="cpu | cuda | cuda:N (default: cuda if available)")
    metrics.add_argument("--dtype", choices=DTYPES, default="float32")
    metrics.add_argument("--output", default=None, help="run folder (default: results/<model>)")
    metrics.add_argument("--trust-remote-code", action="store_true", help="allow model code from the hub")
    metrics.set_defaults(handler=_metrics)


def _add_select(commands) -> None:
    from layer_mteb.metrics import DIRECTIONS

    select = commands.add_parser("select", help="pick layers by a metric and score the choice against the truth")
    select.add_argument("--run", required=True, help="run folder holding scores.csv and metrics.csv")
    select.add_argument("--by", choices=list(DIRECTIONS), default=None, help="one metric (default: every metric)")
    select.add_argument("--per-task", action="store_true", help="choose a layer per task, not once for the mean")
    select.set_defaults(handler=_select)


def _add_correlate(commands) -> None:
    correlate = commands.add_parser("correlate", help="correlate each metric with the score across layers")
    correlate.add_argument("--run", required=True, help="run folder holding scores.csv and metrics.csv")
    correlate.add_argument("--method", choices=["dcor", "spearman", "kendall", "all"], default="all")
    correlate.add_argument("--permutations", type=int, default=1000, help="shuffles for the p-values")
    correlate.add_argument("--seed", type=int, default=0)
    correlate.set_defaults(handler=_correlate)


def _encode_config(args: argparse.Namespace):
    from layer_mteb.config import EncodeConfig, default_device

    return EncodeConfig(
        readout=args.readout,
        pooling=args.pooling,
        max_length=args.max_length,
        dtype=args.dtype,
        batch_size=args.batch_size,
        device=args.device or default_device(),
    )


def _output(args: argparse.Namespace):
    from pathlib import Path

    return Path(args.output or Path("results") / Path(args.model).name.replace("/", "__"))


def _run(args: argparse.Namespace) -> None:
    from layer_mteb.results import layer_table
    from layer_mteb.sweep import sweep

    config = _encode_config(args)
    output = _output(args)
    frame = sweep(
        args.model,
        args.tasks,
        layers=args.layers,
        config=config,
        data_dir=args.data_dir,
        output=output,
        vector_cache=not args.no_vector_cache,
        overwrite=args.overwrite,
        revision=args.revision,
        trust_remote_code=args.trust_remote_code,
    )
    print(layer_table(frame).round(4).to_string())
    print(f"\nscores: {output / 'scores.csv'}  ·  mteb results: {output / 'mteb'}")


def _metrics(args: argparse.Namespace) -> None:
    from layer_mteb.metrics.runner import MetricSettings, compute_metrics

    settings = MetricSettings(
        n_prompts=args.n_prompts,
        views=args.views,
        augment_prompts=args.augment_prompts,
        p=args.augment_p,
        alpha=args.alpha,
        seed=args.seed,
    )
    output = _output(args)
    frame = compute_metrics(
        args.model,
        args.texts,
        config=_encode_config(args),
        settings=settings,
        data_dir=args.data_dir,
        output=output,
        revision=args.revision,
        trust_remote_code=args.trust_remote_code,
    )
    print(frame.pivot_table(index="layer", columns="metric", values="value").round(4).to_string())
    print(f"\nmetrics: {output / 'metrics.csv'}")


def _select(args: argparse.Namespace) -> None:
    from pathlib import Path

    from layer_mteb.selection import leaderboard, select_layers

    selection = select_layers(args.run, by=args.by, per_task=args.per_task)
    print(leaderboard(selection).round(4).to_string(index=False))
    print(f"\nselection: {Path(args.run) / 'selection.csv'}")


def _correlate(args: argparse.Namespace) -> None:
    from pathlib import Path

    from layer_mteb.correlation import correlate, correlation_table

    frame = correlate(args.run, method=args.method, n_permutations=args.permutations, seed=args.seed)
    print("across layers, metric vs score averaged over tasks:")
    print(correlation_table(frame).round(4).to_string())
    print(f"\ncorrelation (also per task): {Path(args.run) / 'correlation.csv'}")


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(name)s: %(message)s")
    warnings.filterwarnings("ignore", message=".*is superseded by.*")
    logging.getLogger("mteb").addFilter(lambda record: "is superseded by" not in record.getMessage())
    try:
        args.handler(args)
    except UserError as err:
        print(f"layer-mteb: error: {err}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
