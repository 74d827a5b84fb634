"""``layer-mteb run``: score every requested layer on every task, one forward pass per task.

Its options are resolved up front into the :class:`~layer_mteb.evaluation.request.RunRequest` the sweep takes as
it is (the encode settings built once, the device added when torch may load)."""

from __future__ import annotations

import argparse
import os
from dataclasses import dataclass, replace

from layer_mteb.cli.console import RESUME
from layer_mteb.cli.options import (
    DATA_DEFAULT,
    MODEL_HELP,
    add_encode_options,
    encode_config,
    hub_needed,
    on_device,
    output_folder,
    parse_shard,
    probe_hub_if,
)
from layer_mteb.evaluation.request import RunRequest, check_output, resolve_run

NAME = "run"
HELP = "score every requested layer on every task (one forward pass per task)"
INTERRUPTED = RESUME
TASKS_HELP = (
    'tasks.yaml[:suite], or comma-separated suite names, mteb tasks and mteb benchmarks by name, e.g. "MTEB(eng, v2)" '
    "(its tasks, splits and languages as mteb defines them; `mteb available-benchmarks` lists the names)"
)
PROMPTS_HELP = (
    "prompts put before the texts, per task and query/document as mteb picks them: a JSON/YAML file mapping prompt "
    "names to prompts, or none (default: the model's own, from its config_sentence_transformers.json)"
)


def add_options(run: argparse.ArgumentParser) -> None:
    run.add_argument("--model", action="append", required=True, help=f"{MODEL_HELP}; repeat for several models")
    run.add_argument(
        "--revision",
        default=None,
        help="hub revision(s), comma-separated, e.g. step1000,step143000 (default: the main branch)",
    )
    run.add_argument("--tasks", default="paper32", help=TASKS_HELP)
    run.add_argument("--data-dir", default=None, help=f"folder of local task data {DATA_DEFAULT}")
    run.add_argument("--prompts", default=None, help=PROMPTS_HELP)
    run.add_argument("--layers", default="all", help="all | 0,3,-1 | 0:12 (hidden states; 0 = embeddings)")
    add_encode_options(run)
    run.add_argument(
        "--shard",
        default=None,
        help="I/N: run the I-th of N shards of the work, for SLURM array jobs (default: all of it)",
    )
    run.add_argument(
        "--max-cache-memory",
        default=None,
        help="memory for a task's pooled vectors of all layers, e.g. 2GB or 256MB; beyond it each layer goes to its "
        "own file on disk (default: half the free memory of the device, at most half the host's)",
    )
    run.add_argument(
        "--eval-workers",
        type=int,
        default=None,
        help="layers evaluated at once in worker processes (default: one per CPU core)",
    )
    run.add_argument("--output", default=None, help="run folder (default: runs/<model>)")
    run.add_argument("--overwrite", action="store_true", help="recompute results that already exist")
    run.add_argument("--no-vector-cache", action="store_true", help="do not keep pooled vectors on disk")
    run.add_argument(
        "--skip-unavailable",
        action="store_true",
        help="with the hub offline, run the tasks that have a local copy and list the others (default: stop)",
    )
    run.add_argument(
        "--task-metrics",
        action="store_true",
        help="also write each task's label-free metrics (prompt entropy, ...) from the same forward pass",
    )
    run.add_argument(
        "-v",
        "--verbose",
        action="store_true",
        help="show every warning of the evaluators (default: counted, one line per task) and the progress bars of "
        "datasets (default: off)",
    )


@dataclass(frozen=True)
class Settings:
    """The resolved request (its encode settings on no device yet) and the device to put them on."""

    request: RunRequest
    device: str | None
    verbose: bool

    def hub_needed(self) -> bool:
        """A hub model id, or a task of the request with no local copy (custom tasks are read from their files)."""
        request = self.request
        names = [spec.name for spec in request.tasks if spec.custom is None]
        return hub_needed(list(request.models), request.data_dir, names)


def check(args: argparse.Namespace) -> Settings:
    """``run``'s options resolved into the request the sweep takes as it is; its output folder holds no other model
    or setting."""
    request = resolve_run(
        args.model,
        args.tasks,
        layers=args.layers,
        data_dir=args.data_dir,
        output=output_folder(args.output, None, args.model[0]),
        revision=args.revision.split(",") if args.revision else None,
        shard=parse_shard(args.shard),
        eval_workers=args.eval_workers,
        task_metrics=args.task_metrics,
        skip_unavailable=args.skip_unavailable,
        trust_remote_code=args.trust_remote_code,
        overwrite=args.overwrite,
        show_warnings=args.verbose,
        vector_cache=not args.no_vector_cache,
        prompts=args.prompts,
    )
    request = replace(request, config=encode_config(args, args.model))
    check_output(request.output, request.models, request.revisions, request.config)  # no other model or setting
    return Settings(request, args.device, args.verbose)


def execute(settings: Settings) -> None:
    probe_hub_if(settings.hub_needed())
    from layer_mteb.cli.console import print_scores
    from layer_mteb.evaluation.sweep import run_request

    request = replace(settings.request, config=on_device(settings.request.config, settings.device))
    frame = run_request(request)
    if os.environ.get("RANK", "0") == "0":  # under accelerate/torchrun the main process prints the merged table
        print_scores(frame, request.output)
