"""``layer-mteb``: parse arguments and route to the library; user mistakes print one line and exit 2."""

from __future__ import annotations

import argparse
import errno
import logging
import os
import sys
import warnings
from pathlib import Path

from layer_mteb.config import DTYPES, POOLINGS, READOUTS
from layer_mteb.errors import UserError


class _Parser(argparse.ArgumentParser):
    """argparse, but a usage mistake is one line (and exit 2) like every other user error."""

    def error(self, message: str):
        self.exit(2, f"layer-mteb: error: {message} (see {self.prog} --help)\n")


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(prog="layer-mteb", description="Score every layer of a model on MTEB tasks.")
    commands = parser.add_subparsers(dest="command", required=True, parser_class=_Parser)
    run = commands.add_parser("run", help="score every requested layer on every task (one forward pass per task)")
    run.add_argument(
        "--model",
        action="append",
        required=True,
        help="hub id, local folder, GGUF file, or packaged name (minilm-l6, ...); repeat for several models",
    )
    run.add_argument("--revision", default=None, help="hub revision(s), comma-separated (e.g. step1000,step143000)")
    run.add_argument("--tasks", default="paper32", help="tasks.yaml[:suite], a suite name, or comma-separated tasks")
    run.add_argument("--data-dir", default=None, help="folder of local task data (default: $LAYER_MTEB_DATA)")
    run.add_argument("--layers", default="all", help="all | 0,3,-1 | 0:12 (hidden states; 0 = embeddings)")
    run.add_argument("--readout", choices=READOUTS, default="final_norm")
    run.add_argument("--pooling", choices=POOLINGS, default="mean")
    run.add_argument("--max-length", type=int, default=512)
    run.add_argument("--batch-size", type=int, default=32)
    run.add_argument(
        "--max-batch-tokens", type=int, default=None, help="also cap each batch at this many padded tokens"
    )
    run.add_argument("--device", default=None, help="cpu | cuda | cuda:N (default: cuda if available)")
    run.add_argument("--dtype", choices=DTYPES, default="float32")
    run.add_argument("--device-map", default=None, help="split one large model over devices, e.g. auto (accelerate)")
    run.add_argument("--shard", default=None, help="I/N: run the I-th of N shards of the work (SLURM array jobs)")
    run.add_argument("--output", default=None, help="run folder (default: results/<model>)")
    run.add_argument("--overwrite", action="store_true", help="recompute results that already exist")
    run.add_argument("--no-vector-cache", action="store_true", help="do not keep pooled vectors on disk")
    run.add_argument("--trust-remote-code", action="store_true", help="allow model code from the hub (off by default)")
    run.add_argument(
        "--task-metrics",
        action="store_true",
        help="also write each task's label-free metrics (prompt entropy, ...) from the same forward pass",
    )
    run.set_defaults(handler=_run)
    merge = commands.add_parser("merge", help="join the shard tables of a run folder into its scores.csv")
    merge.add_argument("--output", required=True, help="the run folder the shards wrote to")
    merge.set_defaults(handler=_merge)
    report = commands.add_parser("report", help="Table 1, Figure 1, heatmaps and selector leaderboard from run folders")
    report.add_argument("--run", action="append", required=True, help="a run folder with scores.csv (repeatable)")
    report.add_argument("--output", default=str(Path("results") / "report"), help="report folder (results/report)")
    report.add_argument(
        "--random-run",
        action="append",
        default=[],
        help="a run of a randomly initialised model (repeatable): in the tables and heatmaps, not in Figure 1",
    )
    report.add_argument("--paper-curves", action="store_true", help="overlay the authors' Pythia curves on Figure 1")
    report.add_argument(
        "--reference",
        default=None,
        help="the authors' per-layer scores (default: $LAYER_MTEB_REFERENCE or "
        "../shared/reference/official_pythia_layer_scores.csv)",
    )
    report.add_argument(
        "--paper-tasks",
        choices=("run", "all"),
        default="run",
        help="average the paper curves over the tasks the runs scored (run, default) or all 32 paper tasks (all)",
    )
    report.add_argument("--entropy-selector", default=None, help="selection.csv selector for Table 1's entropy columns")
    report.set_defaults(handler=_report)
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
        device=process_device(args.device or default_device()),
        device_map=getattr(args, "device_map", None),
        max_batch_tokens=getattr(args, "max_batch_tokens", None),
    )


def _output(args: argparse.Namespace) -> Path:
    """``--output``, else ``results/<first model's name>``."""
    model = args.model if isinstance(args.model, str) else args.model[0]
    return Path(args.output or Path("results") / Path(model).name.replace("/", "__"))


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
        revision=args.revision.split(",") if args.revision else None,
        trust_remote_code=args.trust_remote_code,
        shard=parse_shard(args.shard),
        task_metrics=args.task_metrics,
    )
    if os.environ.get("RANK", "0") != "0":
        return  # under accelerate/torchrun the main process prints the merged table
    for (model, revision), part in frame.groupby(["model", "revision"], sort=False):
        print(f"\n{model} @ {revision}\n{layer_table(part).round(4).to_string()}")
    print(f"\nscores: {output / 'scores.csv'}  ·  mteb results: {output / 'mteb'}")


def _merge(args: argparse.Namespace) -> None:
    from layer_mteb.sweep import merge_shards

    frame = merge_shards(args.output)
    print(f"merged {len(frame)} rows into {Path(args.output) / 'scores.csv'}")


def parse_shard(text: str | None) -> tuple[int, int] | None:
    """``I/N`` (0 <= I < N) -> (I, N)."""
    if text is None:
        return None
    index, _, count = text.partition("/")
    if not (index.isdigit() and count.isdigit() and 0 <= int(index) < int(count)):
        raise UserError(f"--shard {text!r} must be I/N with 0 <= I < N, e.g. 0/4")
    return int(index), int(count)


def process_device(device: str) -> str:
    """Under ``accelerate launch`` / ``torchrun`` on GPUs each process takes its own GPU (``LOCAL_RANK``)."""
    if device == "cuda" and "LOCAL_RANK" in os.environ:
        return f"cuda:{os.environ['LOCAL_RANK']}"
    return device


def _report(args: argparse.Namespace) -> None:
    from layer_mteb.publish import write_report

    paths = write_report(
        args.run,
        args.output,
        paper_curves=args.paper_curves,
        reference=args.reference,
        paper_tasks=args.paper_tasks,
        entropy_selector=args.entropy_selector,
        random_runs=args.random_run,
    )
    print((Path(args.output) / "table1.md").read_text())
    print(f"report: {args.output}  ·  {len(paths)} files: {', '.join(p.name for p in paths)}")


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
    from transformers.utils import logging as transformers_logging

    transformers_logging.disable_progress_bar()  # keep stderr for progress of the sweep and one-line errors
    for handler in logging.getLogger().handlers:  # the paper's tasks are superseded on purpose; say it once, in docs
        handler.addFilter(lambda record: "is superseded by" not in record.getMessage())
    try:
        args.handler(args)
    except UserError as err:
        return _fail(str(err))
    except OSError as err:
        if err.errno in (errno.ENOSPC, errno.EDQUOT):
            return _fail(
                f"no space left on device writing {err.filename or 'results'}; free space or use another "
                "--output / $LAYER_MTEB_CACHE"
            )
        if err.errno in (errno.EACCES, errno.EROFS, errno.EPERM):
            return _fail(f"cannot write {err.filename}: {err.strerror}; choose another --output / $LAYER_MTEB_CACHE")
        raise
    return 0


def _fail(message: str) -> int:
    print(f"layer-mteb: error: {message}", file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main())
