"""``layer-mteb import``: per-layer mteb result JSONs (mteb 1.x or 2.x, the authors' layout) into a run folder.
(The module's name ends in ``_``: ``import`` is a Python keyword.)"""

from __future__ import annotations

import argparse
from dataclasses import dataclass
from pathlib import Path

from layer_mteb.cli.console import RESUME
from layer_mteb.cli.options import as_keywords, settings_of
from layer_mteb.common.errors import UserError
from layer_mteb.evaluation.plan import check_writable

NAME = "import"
HELP = "read per-layer mteb result JSONs (mteb 1.x or 2.x) into a run folder"
INTERRUPTED = RESUME


def add_options(imp: argparse.ArgumentParser) -> None:
    from layer_mteb.common.config import ATTENTIONS
    from layer_mteb.metrics import RELEASE_NORMALIZATIONS

    imp.add_argument("folder", help="folder of layer_<k>/<Task>.json (mteb 1.x) or an mteb 2.x results folder")
    imp.add_argument("--output", required=True, help="run folder to write scores.csv (and metrics.csv) into")
    imp.add_argument("--model", help="model name for the rows (default: from the files)")
    imp.add_argument("--n-layers", type=int, help="the model's number of layers (default: known/deepest)")
    imp.add_argument(
        "--attention",
        choices=ATTENTIONS,
        help="the attention the model ran, where the files do not say (default: the files', else the release's)",
    )
    imp.add_argument("--metrics", help="a long-format metrics table (official_layer_metrics.csv.gz)")
    imp.add_argument("--metrics-model", help="the model's name in that table (default: --model)")
    imp.add_argument(
        "--normalization",
        choices=RELEASE_NORMALIZATIONS,
        default="paper",
        help="metric normalisation (paper: maxEntropy for entropies and LiDAR, raw for the others, as its figures)",
    )


@dataclass(frozen=True)
class Settings:
    folder: str
    output: str
    model: str | None
    n_layers: int | None
    attention: str | None
    metrics: str | None
    metrics_model: str | None
    normalization: str


def check(args: argparse.Namespace) -> Settings:
    if not Path(args.folder).is_dir():
        raise UserError(f"results folder {args.folder!r} does not exist")
    check_writable(Path(args.output))
    return settings_of(Settings, args)


def execute(settings: Settings) -> None:
    from layer_mteb.analysis.runs.importing import write_import

    print("\n".join(write_import(**as_keywords(settings))))
