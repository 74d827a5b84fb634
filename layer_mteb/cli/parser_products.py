"""The declarations of the commands whose product lives outside a run folder (the label-budget curve, the paper
reproduction, an exported model), and the ``--metric-readout`` option several commands share; :mod:`.parser` holds
the others and builds the one parser."""

from __future__ import annotations

from layer_mteb.cli import commands as handlers
from layer_mteb.cli.arguments import DATA_DEFAULT, MODEL_HELP
from layer_mteb.cli.console import REWRITE, TASKS_SAVED
from layer_mteb.common.config import ATTENTIONS, DTYPES, POOLINGS, READOUTS


def add_metric_readout(parser) -> None:
    from layer_mteb.metrics import METRIC_READOUTS

    parser.add_argument(
        "--metric-readout",
        choices=METRIC_READOUTS,
        default="auto",
        help="which metrics pick among the scores: auto (the paper's: raw-stream metrics where they exist), raw, "
        "final_norm, or same (the scores' readout)",
    )


def add_label_budget(commands) -> None:
    budget = commands.add_parser(
        "label-budget",
        help="mean regret of a layer picked from K labelled examples against K, beside the label-free picks",
    )
    budget.add_argument("--run", action="append", required=True, help="a run folder (repeat for several models)")
    budget.add_argument("--output", default="results/paper", help="folder for the curve, baselines and figure")
    budget.add_argument("--draws", type=int, default=10, help="draws of K examples per task and K")
    budget.add_argument("--seed", type=int, default=0, help="seed of the draws")
    budget.add_argument("--data-dir", default=None, help=f"folder of local task data {DATA_DEFAULT}")
    budget.add_argument(
        "--eval-workers", type=int, default=None, help="processes scoring layers (default: one per CPU core)"
    )
    budget.add_argument(
        "--baselines-only",
        action="store_true",
        help="re-read only the label-free baselines (e.g. after adding metrics); keep the measured curve",
    )
    budget.set_defaults(handler=handlers.label_budget, interrupted=TASKS_SAVED)


def add_reproduce(commands) -> None:
    paper = commands.add_parser(
        "reproduce", help="the paper's tables, figures and selector study from the authors' release beside our runs"
    )
    paper.add_argument(
        "--release",
        default=None,
        help="a clone of the authors' repository (OFSkean/information_flow), or its experiments/results folder "
        "(default: $LAYER_MTEB_REFERENCE/release, else ../shared/reference/release)",
    )
    paper.add_argument(
        "--reference",
        default=None,
        help="deprecated: a folder of tables extracted from the release (official_layer_scores.csv, ...); "
        "use --release (default: not used)",
    )
    paper.add_argument(
        "--run", action="append", default=[], help="one of this project's run folders (repeatable; default: none)"
    )
    paper.add_argument("--output", default="results/paper", help="folder the paper's files are written to")
    paper.add_argument(
        "--permutations", type=int, default=200, help="shuffles per correlation p-value (200: minutes on 2 cores)"
    )
    paper.add_argument(
        "--policy",
        default=None,
        help="also write the `select --by auto` policy trained on every study model here (default: not written)",
    )
    paper.set_defaults(handler=handlers.reproduce, interrupted=REWRITE)


def add_export(commands) -> None:
    export = commands.add_parser(
        "export", help="write one layer, as it was scored, as a sentence-transformers model folder"
    )
    export.add_argument(
        "--model", default=None, help=f"{MODEL_HELP}; with --run: how to load the run's model (default: its name)"
    )
    export.add_argument("--revision", default=None, help="hub revision (default: the main branch, or the run's)")
    export.add_argument("--layer", type=int, default=None, help="the layer: 0 (embeddings) to the number of blocks")
    export.add_argument(
        "--run", default=None, help="a run folder: the model, revision and settings its scores.csv was scored with"
    )
    export.add_argument(
        "--by",
        default=None,
        help="with --run, instead of --layer: the label-free selector that picks the layer, as `select --by` takes "
        "it (auto, prompt_entropy, depth=0.8, ...)",
    )
    export.add_argument(
        "--task", default=None, help="with --by: export the layer picked for this task (default: for the mean)"
    )
    add_metric_readout(export)
    export.add_argument("--output", required=True, help="the folder to write (new or empty)")
    export.add_argument("--overwrite", action="store_true", help="replace a non-empty --output folder")
    run_default = "(default: the run's with --run, else %s)"
    export.add_argument(
        "--readout",
        choices=READOUTS,
        default=None,
        help="final_norm (what a truncated model gives) or raw (only for a model without a final norm, or its last "
        "layer) " + run_default % "final_norm",
    )
    export.add_argument(
        "--pooling", choices=POOLINGS, default=None, help="how token states become one vector " + run_default % "mean"
    )
    export.add_argument(
        "--normalize",
        action="store_const",
        const=True,
        default=None,
        help="end in an L2 Normalize module " + run_default % "off",
    )
    export.add_argument(
        "--attention", choices=ATTENTIONS, default=None, help="decoder attention " + run_default % "the model's own"
    )
    export.add_argument("--max-length", type=int, default=None, help="max_seq_length " + run_default % 512)
    export.add_argument("--dtype", choices=DTYPES, default=None, help="of the weights " + run_default % "float32")
    export.add_argument("--trust-remote-code", action="store_true", help="allow model code from the hub")
    export.set_defaults(handler=handlers.export)
