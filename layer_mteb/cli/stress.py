"""``layer-mteb stress``: prompt entropy of every layer under randomness, repetition and length (per prompt), and
the dip test of its distribution."""

from __future__ import annotations

import argparse
import logging
import time
from dataclasses import dataclass

from layer_mteb.cli.console import RESUME, print_written
from layer_mteb.cli.options import MeasureSettings, add_measure_options, check_measured, parse_lengths, settings_of
from layer_mteb.common.config import option

NAME = "stress"
HELP = "prompt entropy of every layer under randomness, repetition and length (per prompt), dip test"
INTERRUPTED = RESUME


@dataclass(frozen=True, kw_only=True)
class Settings(MeasureSettings):
    texts: str = option("prompts to perturb: wikitext | task:<TaskName> | FILE", "wikitext")
    tests: tuple[str, ...] = option("comma-separated stress tests", "randomness,repetition,length", type=str)
    paper_sizes: bool = option(
        "the paper's sizes: 1000 prompts per level and per length (default: 16 and 10, about a minute of CPU for "
        "MiniLM-L6)",
        False,
    )
    n_prompts: int | None = option("prompts per randomness/repetition level")
    length_prompts: int | None = option("random prompts per length")
    lengths: tuple[int, ...] | None = option("prompt lengths, e.g. 64,128 (default 64 ... 2048)", type=str)
    seed: int = option("seed of the prompt sample and the perturbations", 0)
    gzip: bool = option("write stress.csv.gz instead of stress.csv", False)


def add_options(stress: argparse.ArgumentParser) -> None:
    add_measure_options(stress, Settings)


def check(args: argparse.Namespace) -> Settings:
    # the options first: a mistyped --lengths is named even where the texts' data folder is missing
    lengths = parse_lengths(args.lengths)
    tests = tuple(t.strip() for t in args.tests.split(",") if t.strip())
    target = check_measured(args, several_texts=False)
    return settings_of(Settings, args, target=target, tests=tests, lengths=lengths)


def execute(settings: Settings) -> None:
    target = settings.target
    from layer_mteb.metrics.stress_tests import (
        LENGTHS,
        PAPER_STRESS_SIZES,
        QUICK_STRESS_SIZES,
        StressSettings,
        run_stress,
    )

    sizes = PAPER_STRESS_SIZES if settings.paper_sizes else QUICK_STRESS_SIZES
    sizes = {name: size if getattr(settings, name) is None else getattr(settings, name) for name, size in sizes.items()}
    lengths = settings.lengths or LENGTHS
    measure = StressSettings(settings.tests, **sizes, lengths=lengths, alpha=settings.alpha, seed=settings.seed)
    started = time.time()
    config = target.config.placed()
    logging.getLogger(__name__).info("loading model %s on %s, then the stress tests", target.model, config.device)
    values, dips = run_stress(
        target.model,
        target.texts,
        config=config,
        settings=measure,
        data_dir=target.data_dir,
        output=target.output,
        compress=settings.gzip,
    )
    means = values[values["normalization"] == "maxEntropy"].groupby(["test", "level", "layer"])["value"].mean()
    print(means.unstack("layer").round(3).rename(index=lambda v: f"{v:g}", level="level").to_string())
    for (test, level), part in dips.groupby(["test", "level"]):
        top = part.sort_values(["dip", "layer"], ascending=[False, True]).iloc[0]
        print(
            f"{test} {level:g}: most bimodal layer {int(top['layer'])} (dip {top['dip']:.3f}, p {top['p_value']:.3g})"
        )
    print_written(target.output, started)
