"""``layer-mteb run``: score every requested layer on every task, one forward pass per task. Its options are the
fields of :class:`~layer_mteb.evaluation.request.RunRequest`, which the check builds and the sweep takes as it is."""

from __future__ import annotations

import argparse
import os

from layer_mteb.cli.console import RESUME, print_scores
from layer_mteb.cli.options import (
    DATA_DEFAULT,
    MODEL_HELP,
    add_encode_options,
    encode_config,
    output_folder,
    settings_of,
)
from layer_mteb.evaluation.request import RunRequest, check_instructions, own_settings
from layer_mteb.model.names import model_kind
from layer_mteb.model.pipeline import PROTOCOLS

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
PROTOCOL_HELP = (
    "what the pooling, max length and normalisation not given are: model, a sentence-transformers model's own "
    "pipeline (its pooling mode, max_seq_length and Normalize) with mteb's instructions for it, so that its last layer "
    "is its mteb score (other models: the paper's settings); paper, the paper's protocol for every model (mean "
    "pooling, 512 tokens, no normalisation, no instructions) (default: model)"
)
INSTRUCTIONS_HELP = (
    "instruction embedders (Qwen3-Embedding, e5-mistral-instruct, ...): put mteb's per-task instruction before the "
    "texts with the template of the model's mteb registry entry (documents too only where mteb does), as mteb's "
    "InstructSentenceTransformerModel does; give the registry name of the model a local folder holds (e.g. "
    "Qwen/Qwen3-Embedding-0.6B), or none (default: the model's own entry, found by hub id or by the folder's name, "
    "under --protocol model)"
)


def add_options(run: argparse.ArgumentParser) -> None:
    run.add_argument(
        "--model", dest="models", action="append", required=True, help=f"{MODEL_HELP}; repeat for several models"
    )
    run.add_argument(
        "--revision", help="hub revision(s), comma-separated, e.g. step1000,step143000 (default: the main branch)"
    )
    run.add_argument("--tasks", default="paper32", help=TASKS_HELP)
    run.add_argument("--data-dir", help=f"folder of local task data {DATA_DEFAULT}")
    run.add_argument("--prompts", help=PROMPTS_HELP)
    run.add_argument("--instructions", help=INSTRUCTIONS_HELP)
    run.add_argument("--protocol", choices=PROTOCOLS, default="model", help=PROTOCOL_HELP)
    run.add_argument("--layers", default="all", help="all | 0,3,-1 | 0:12 (hidden states; 0 = embeddings)")
    add_encode_options(run)
    run.add_argument(
        "--shard", help="I/N: run the I-th of N shards of the work, for SLURM array jobs (default: all of it)"
    )
    run.add_argument(
        "--max-cache-memory",
        help="memory for a task's pooled vectors of all layers, e.g. 2GB or 256MB; beyond it each layer goes to its "
        "own file on disk (default: half the free memory of the device, at most half the host's)",
    )
    run.add_argument(
        "--eval-workers", type=int, help="layers evaluated at once in worker processes (default: one per CPU core)"
    )
    run.add_argument("--output", help="run folder (default: runs/<model>)")
    run.add_argument("--overwrite", action="store_true", help="recompute results that already exist")
    run.add_argument(
        "--no-vector-cache", dest="vector_cache", action="store_false", help="do not keep pooled vectors on disk"
    )
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


def check(args: argparse.Namespace) -> RunRequest:
    """``run``'s options as the one settings object the sweep takes; its output holds no other model or setting."""
    output = output_folder(args.output, None, args.models[0])
    for model in args.models:
        model_kind(model)  # a mistyped model is one line before any file is read
    instructions = check_instructions(args.instructions, args.prompts, args.protocol)
    revision = args.revision.split(",")[0] if args.revision else None
    own = own_settings(args.models, revision, args.protocol, instructions)
    config = encode_config(args, args.models, own.settings)
    return settings_of(RunRequest, args, config=config, output=output)


def execute(request: RunRequest) -> None:
    from layer_mteb.evaluation.sweep import run_request  # mteb and torch: after the checks

    frame = run_request(request)
    if os.environ.get("RANK", "0") == "0":  # under accelerate/torchrun the main process prints the merged table
        print_scores(frame, request.output)
