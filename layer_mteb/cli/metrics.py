"""``layer-mteb metrics``: the label-free representation metrics of every layer, of a model or of a run's model."""

from __future__ import annotations

import argparse
import logging
from dataclasses import dataclass

from layer_mteb.cli.console import RESUME
from layer_mteb.cli.options import (
    MeasureSettings,
    add_measure_options,
    add_model_or_run,
    check_measured,
    settings_of,
)
from layer_mteb.common.config import METRIC_SETTINGS

NAME = "metrics"
HELP = "representation metrics of every layer (label-free)"
INTERRUPTED = RESUME


def add_options(metrics: argparse.ArgumentParser) -> None:
    add_model_or_run(metrics)
    metrics.add_argument("--revision", help="hub revision: branch, tag or commit (default: the main branch)")
    metrics.add_argument(
        "--texts",
        help="wikitext | task:<TaskName> | FILE (one prompt a line); several, comma-separated, share one model load "
        "(default: wikitext; with --run, the run's tasks' own texts, task:<Task> each)",
    )
    metrics.add_argument(
        "--full-protocol",
        action="store_true",
        help="the paper's protocol: 1000 prompts, 16 views x 200 prompts (MiniLM-L6 on 2 CPU cores: about 14 min, "
        "2 GB; the default, 200 prompts and 4 views x 32 prompts, takes about a minute)",
    )
    metrics.add_argument("--n-prompts", type=int, help="texts to use, seeded sample if more (default 200; paper: 1000)")
    metrics.add_argument(
        "--views", type=int, help="augmented views per prompt for LiDAR, 0 skips (default 4; paper: 16)"
    )
    metrics.add_argument(
        "--augment-prompts", type=int, help="prompts that get augmented views (default 32; paper: 200)"
    )
    metrics.add_argument("--augment-p", type=float, default=0.3, help="augmentation probability")
    for setting in METRIC_SETTINGS:
        metrics.add_argument(setting.option, choices=setting.choices, default=setting.default, help=setting.help)
    add_measure_options(metrics, seed_help="seed of the prompt sample and the augmentations")


@dataclass(frozen=True)
class Settings(MeasureSettings):
    full_protocol: bool
    n_prompts: int | None
    views: int | None
    augment_prompts: int | None
    augment_p: float
    arithmetic: str
    trust_remote_code: bool


def check(args: argparse.Namespace) -> Settings:
    return settings_of(Settings, args, target=check_measured(args, several_texts=True))


def execute(settings: Settings) -> None:
    target = settings.target
    from layer_mteb.cli.console import print_metrics
    from layer_mteb.metrics.runner import PAPER_METRIC_SIZES, QUICK_METRIC_SIZES, MetricSettings, compute_metrics
    from layer_mteb.model.loading import load_model

    sizes = PAPER_METRIC_SIZES if settings.full_protocol else QUICK_METRIC_SIZES
    sizes = {name: size if getattr(settings, name) is None else getattr(settings, name) for name, size in sizes.items()}
    measure = MetricSettings(
        **sizes, p=settings.augment_p, alpha=settings.alpha, seed=settings.seed, arithmetic=settings.arithmetic
    )
    config = target.config.placed()
    logging.getLogger(__name__).info("loading model %s on %s", target.model, config.device)
    model = load_model(target.model, config, revision=target.revision, trust_remote_code=settings.trust_remote_code)
    for source in target.sources:  # one model load for every source; each is saved as it finishes
        frame = compute_metrics(
            model, source, config=config, settings=measure, data_dir=target.data_dir, output=target.output
        )
        print_metrics(frame, target.output)
