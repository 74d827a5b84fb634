"""``layer-mteb import``: per-layer mteb result JSONs (mteb 1.x or 2.x, the authors' layout) into a run folder.
(The module's name ends in ``_``: ``import`` is a Python keyword.)"""

from __future__ import annotations

import argparse
from dataclasses import dataclass
from pathlib import Path

from layer_mteb.cli.console import RESUME
from layer_mteb.cli.options import as_keywords, settings_of
from layer_mteb.common.config import ATTENTIONS, option
from layer_mteb.common.errors import UserError
from layer_mteb.evaluation.plan import check_writable
from layer_mteb.metrics import RELEASE_NORMALIZATIONS

NAME = "import"
HELP = "read per-layer mteb result JSONs (mteb 1.x or 2.x) into a run folder"
INTERRUPTED = RESUME


@dataclass(frozen=True, kw_only=True)
class Settings:
    folder: str = option("folder of layer_<k>/<Task>.json (mteb 1.x) or an mteb 2.x results folder", flags=("folder",))
    output: str = option("run folder to write scores.csv (and metrics.csv) into", required=True)
    model: str | None = option("model name for the rows (default: from the files)")
    n_layers: int | None = option("the model's number of layers (default: known/deepest)")
    attention: str | None = option(
        "the attention the model ran, where the files do not say (default: the files', else the release's)",
        choices=ATTENTIONS,
    )
    metrics: str | None = option("a long-format metrics table (official_layer_metrics.csv.gz)")
    metrics_model: str | None = option("the model's name in that table (default: --model)")
    normalization: str = option(
        "metric normalisation (paper: maxEntropy for entropies and LiDAR, raw for the others, as its figures)",
        "paper",
        choices=RELEASE_NORMALIZATIONS,
    )


def check(args: argparse.Namespace) -> Settings:
    if not Path(args.folder).is_dir():
        raise UserError(f"results folder {args.folder!r} does not exist")
    check_writable(Path(args.output))
    return settings_of(Settings, args)


def execute(settings: Settings) -> None:
    from layer_mteb.analysis.runs.importing import write_import

    print("\n".join(write_import(**as_keywords(settings))))
