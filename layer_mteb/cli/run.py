"""``layer-mteb run``: score every requested layer on every task, one forward pass per task. Its options are the
fields of :class:`~layer_mteb.evaluation.request.RunRequest`, which the check builds and the sweep takes as it is."""

from __future__ import annotations

import argparse
import os

from layer_mteb.cli.console import RESUME, print_scores
from layer_mteb.cli.options import add_encode_options, add_fields, encode_config, output_folder, settings_of
from layer_mteb.evaluation.request import RunRequest, check_instructions, own_settings
from layer_mteb.model.names import model_kind

NAME = "run"
HELP = "score every requested layer on every task (one forward pass per task)"
INTERRUPTED = RESUME


def add_options(run: argparse.ArgumentParser) -> None:
    """The fields of :class:`RunRequest` that are options, then the encode options and the memory bound."""
    add_fields(run, RunRequest)
    add_encode_options(run)
    run.add_argument(
        "--max-cache-memory",
        help="memory for a task's pooled vectors of all layers, e.g. 2GB or 256MB; beyond it each layer goes to its "
        "own file on disk (default: half the free memory of the device, at most half the host's)",
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
