"""Values made from the command line's arguments that several commands and their up-front checks share."""

from __future__ import annotations

import argparse
import os
from pathlib import Path

from layer_mteb.common.errors import UserError

DATA_DEFAULT = "(default: $LAYER_MTEB_DATA, else ../shared/data beside the checkout when it exists)"
MODEL_HELP = "hub id, local folder, GGUF file, or packaged name (minilm-l6, ...)"
RUNS = "runs"  # default parent of run folders; results/ holds only the committed reproduction
#: the encode settings ``export`` takes as options; with ``--run`` they are the run's and may not be given
EXPORT_SETTINGS = ("readout", "pooling", "normalize", "attention", "max_length", "dtype")


def output_folder(args: argparse.Namespace) -> Path:
    """``--output``, else the ``--run`` folder a command reads its model from, else ``runs/<first model's name>``:
    outside the committed ``results/``, so a first try never rewrites the project's own tables."""
    if args.output is None and getattr(args, "run", None) and isinstance(args.run, str):
        return Path(args.run)
    model = args.model if isinstance(args.model, str) else args.model[0]
    return Path(args.output or Path(RUNS) / Path(model).name.replace("/", "__"))


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


def parse_lengths(text: str | None) -> tuple[int, ...] | None:
    """``--lengths 64,128`` -> (64, 128); None when not given (the stress test's own lengths)."""
    if not text:
        return None
    try:
        return tuple(int(n) for n in text.split(","))
    except ValueError:
        raise UserError(f"--lengths must be comma-separated token counts, got {text!r}") from None


#: the encode options' defaults on the command line, beside which ``metrics --run`` / ``stress --run`` tell what the
#: user gave (the run's own settings replace them)
ENCODE_DEFAULTS: dict[str, object] = {
    "pooling": "mean",
    "max_length": 512,
    "dtype": "float32",
    "attention": None,
    "normalize": False,
}
