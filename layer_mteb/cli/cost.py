"""``layer-mteb cost``: seconds and FLOPs of the model cut at every layer, with a run's settings, into the run's
``cost.csv``."""

from __future__ import annotations

import argparse
from dataclasses import dataclass, replace

from layer_mteb.cli.console import RESUME
from layer_mteb.cli.options import Placement, add_fields, as_keywords, check_runs, check_text_sources, settings_of
from layer_mteb.common.config import EncodeConfig, option
from layer_mteb.metrics.cost_table import CostSettings
from layer_mteb.model.names import check_loadable
from layer_mteb.tasks.catalog import DATA_DEFAULT

NAME = "cost"
HELP = "seconds and FLOPs of the model cut at every layer, with a run's settings, into its cost.csv"
INTERRUPTED = RESUME


@dataclass(frozen=True, kw_only=True)
class Settings(Placement):
    """The options as given; ``cost``: the measurement's own (``--n-texts``, ``--seed``, ``--repeats``)."""

    run: str = option("run folder: its scores.csv gives model, revision and settings", required=True)
    model: str | None = option("how to load the run's model (default: its name in scores.csv; packaged found)")
    texts: str | None = option(
        "texts to time, as metrics --texts (default: the run's tasks' own texts, task:<Task> each)"
    )
    data_dir: str | None = option(f"folder of local task data {DATA_DEFAULT}")
    cost: CostSettings  # its options: add_options


def add_options(cost: argparse.ArgumentParser) -> None:
    add_fields(cost, Settings)
    add_fields(cost, CostSettings)


def check(args: argparse.Namespace) -> Settings:
    """The run folder exists and is writable, the model and texts exist, the sizes are positive."""
    check_runs([args.run], args.run)
    if args.model is not None:
        check_loadable(args.model)
    if args.texts is not None:
        check_text_sources(args.texts, args.data_dir)
    # the batch sizes, checked where every command's are (on the cpu default: no torch loads for it)
    EncodeConfig(batch_size=args.batch_size, max_batch_tokens=args.max_batch_tokens)
    return settings_of(Settings, args, cost=settings_of(CostSettings, args))


def execute(settings: Settings) -> None:
    from layer_mteb.analysis.selection.tradeoff import cheapest_lines
    from layer_mteb.common.config import default_device, process_device
    from layer_mteb.common.run_folder import COST_FILE, RunFolder
    from layer_mteb.metrics.layer_cost import run_cost

    placed = replace(settings, device=process_device(settings.device or default_device()))
    frame = run_cost(**as_keywords(placed, run="folder", cost="settings"))  # the placement options: as given
    folder = RunFolder(settings.run)
    shown = ["layer", "flops_fraction", "seconds_per_1000_texts", "flops"]
    print(frame[shown].round(4).to_string(index=False))
    first = frame.iloc[0]
    sizes = f"batch size {first['batch_size']}, {first['threads']} threads"
    print(f"\n{first['n_texts']} texts, {sizes}, on {first['device']}, median of {settings.cost.repeats} passes")
    for line in cheapest_lines(folder):
        print(line)
    print(f"wrote {folder.file(COST_FILE)}")
