"""``layer-mteb metrics``: the label-free representation metrics of every layer, of a model or of a run's model."""

from __future__ import annotations

import argparse
import logging
from dataclasses import dataclass

from layer_mteb.cli.console import RESUME
from layer_mteb.cli.options import MeasureSettings, add_measure_options, check_measured, settings_of
from layer_mteb.common.config import METRIC_SETTINGS, option
from layer_mteb.metrics.metric_settings import PAPER_METRIC_SIZES, QUICK_METRIC_SIZES, MetricSettings, help_of

NAME = "metrics"
HELP = "representation metrics of every layer (label-free)"
INTERRUPTED = RESUME
#: how the metrics are computed from the vectors, declared with the metric settings
ARITHMETIC = next(setting for setting in METRIC_SETTINGS if setting.name == "arithmetic")
QUICK, PAPER = QUICK_METRIC_SIZES, PAPER_METRIC_SIZES


def _size(name: str) -> int | None:
    """A sample size's option: None takes the quick size, or the paper's with --full-protocol."""
    return option(f"{help_of(name)} (default {QUICK[name]}; paper: {PAPER[name]})")


@dataclass(frozen=True, kw_only=True)
class Settings(MeasureSettings):
    revision: str | None = option("hub revision: branch, tag or commit (default: the main branch)")
    texts: str | None = option(
        "wikitext | task:<TaskName> | FILE (one prompt a line); several, comma-separated, share one model load "
        "(default: wikitext; with --run, the run's tasks' own texts, task:<Task> each)"
    )
    full_protocol: bool = option(
        f"the paper's protocol: {PAPER['n_prompts']} prompts, {PAPER['views']} views x {PAPER['augment_prompts']} "
        f"prompts (MiniLM-L6 on 2 CPU cores: about 14 min, 2 GB; the default, {QUICK['n_prompts']} prompts and "
        f"{QUICK['views']} views x {QUICK['augment_prompts']} prompts, takes about a minute)",
        False,
    )
    n_prompts: int | None = _size("n_prompts")
    views: int | None = _size("views")
    augment_prompts: int | None = _size("augment_prompts")
    augment_p: float = option(help_of("p"), MetricSettings.p)
    seed: int = option(help_of("seed"), MetricSettings.seed)
    arithmetic: str = option(ARITHMETIC.help, ARITHMETIC.default, choices=ARITHMETIC.choices)


def add_options(metrics: argparse.ArgumentParser) -> None:
    add_measure_options(metrics, Settings)


def check(args: argparse.Namespace) -> Settings:
    return settings_of(Settings, args, target=check_measured(args, several_texts=True))


def execute(settings: Settings) -> None:
    target = settings.target
    from layer_mteb.metrics.runner import compute_metrics
    from layer_mteb.model.loading import load_model

    sizes = PAPER if settings.full_protocol else QUICK
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
        print(frame.pivot_table(index="layer", columns="metric", values="value").round(4).to_string())
        print(f"\nmetrics: {target.output / 'metrics.csv'}")
