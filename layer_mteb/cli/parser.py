"""The ``layer-mteb`` argument declarations: every subcommand, option and default, and nothing else. A usage mistake
is one line and exit 2, like every other user error; ``--help`` shows each option's default."""

from __future__ import annotations

import argparse
from pathlib import Path

from layer_mteb.cli import commands as handlers
from layer_mteb.cli.arguments import DATA_DEFAULT, ENCODE_DEFAULTS, MODEL_HELP, RUNS
from layer_mteb.cli.console import NOTHING_SAVED, PROG
from layer_mteb.cli.parser_products import add_export, add_label_budget, add_metric_readout, add_reproduce
from layer_mteb.common.config import ATTENTIONS, DTYPES, POOLINGS, READOUTS


class _DefaultsShown(argparse.HelpFormatter):
    """Every option's help ends with its default, unless the help already names it or there is none to name
    (a required option, an on/off flag)."""

    def _get_help_string(self, action: argparse.Action) -> str:
        text = action.help or ""
        if "default" in text or action.default in (None, argparse.SUPPRESS) or not action.option_strings:
            return text
        return f"{text} (default: {'off' if action.default is False else '%(default)s'})"


class _Parser(argparse.ArgumentParser):
    """argparse, but a usage mistake is one line (and exit 2) like every other user error; help shows defaults."""

    def __init__(self, *args, **kwargs):
        kwargs.setdefault("formatter_class", _DefaultsShown)
        super().__init__(*args, **kwargs)

    def error(self, message: str):
        self.exit(2, f"{PROG}: error: {message} (see {self.prog} --help)\n")


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(prog=PROG, description="Score every layer of a model on MTEB tasks.")
    commands = parser.add_subparsers(dest="command", required=True, parser_class=_Parser)
    _add_run(commands)
    merge = commands.add_parser("merge", help="join the shard tables of a run folder into its scores.csv")
    merge.add_argument("--output", required=True, help="the run folder the shards wrote to")
    merge.set_defaults(handler=handlers.merge)
    _add_report(commands)
    _add_metrics(commands)
    _add_stress(commands)
    _add_select(commands)
    _add_correlate(commands)
    _add_import(commands)
    add_label_budget(commands)
    add_reproduce(commands)
    add_export(commands)
    _add_cost(commands)
    return parser


def _add_encode_options(parser: argparse.ArgumentParser) -> None:
    """How texts become vectors (``EncodeConfig``), the same for ``run`` and ``metrics``."""
    parser.add_argument(
        "--readout", choices=READOUTS, default="final_norm", help="apply the final norm to every layer, or read raw"
    )
    parser.add_argument(
        "--pooling", choices=POOLINGS, default=ENCODE_DEFAULTS["pooling"], help="how token states become one vector"
    )
    _add_vector_options(parser)
    parser.add_argument(
        "--max-length",
        type=int,
        default=ENCODE_DEFAULTS["max_length"],
        help="tokens per text (longer texts are truncated)",
    )
    parser.add_argument("--dtype", choices=DTYPES, default=ENCODE_DEFAULTS["dtype"], help="weights and activations")
    parser.add_argument("--batch-size", type=int, default=32, help="texts per forward pass")
    parser.add_argument(
        "--max-batch-tokens",
        type=int,
        default=None,
        help="also cap each batch at this many padded tokens (default: no cap)",
    )
    parser.add_argument("--device", default=None, help="cpu | cuda | cuda:N (default: cuda if available)")
    parser.add_argument(
        "--device-map",
        default=None,
        help="split one large model over devices, e.g. auto (accelerate; default: all on --device)",
    )
    parser.add_argument("--trust-remote-code", action="store_true", help="allow model code from the hub")


def _add_run(commands) -> None:
    run = commands.add_parser("run", help="score every requested layer on every task (one forward pass per task)")
    run.add_argument("--model", action="append", required=True, help=f"{MODEL_HELP}; repeat for several models")
    run.add_argument(
        "--revision",
        default=None,
        help="hub revision(s), comma-separated, e.g. step1000,step143000 (default: the main branch)",
    )
    run.add_argument("--tasks", default="paper32", help="tasks.yaml[:suite], a suite name, or comma-separated tasks")
    run.add_argument("--data-dir", default=None, help=f"folder of local task data {DATA_DEFAULT}")
    run.add_argument("--layers", default="all", help="all | 0,3,-1 | 0:12 (hidden states; 0 = embeddings)")
    _add_encode_options(run)
    run.add_argument(
        "--shard",
        default=None,
        help="I/N: run the I-th of N shards of the work, for SLURM array jobs (default: all of it)",
    )
    run.add_argument(
        "--max-cache-memory",
        default=None,
        help="memory for a task's pooled vectors of all layers, e.g. 2GB or 256MB; beyond it each layer goes to its "
        "own file on disk (default: half the free memory of the device, at most half the host's)",
    )
    run.add_argument(
        "--eval-workers",
        type=int,
        default=None,
        help="layers evaluated at once in worker processes (default: one per CPU core)",
    )
    run.add_argument("--output", default=None, help="run folder (default: runs/<model>)")
    run.add_argument("--overwrite", action="store_true", help="recompute results that already exist")
    run.add_argument("--no-vector-cache", action="store_true", help="do not keep pooled vectors on disk")
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
    run.set_defaults(handler=handlers.run)


def _add_report(commands) -> None:
    report = commands.add_parser("report", help="Table 1, Figure 1, heatmaps and selector leaderboard from run folders")
    report.add_argument("--run", action="append", required=True, help="a run folder with scores.csv (repeatable)")
    report.add_argument("--output", default=str(Path(RUNS) / "report"), help="report folder (runs/report)")
    report.add_argument(
        "--random-run",
        action="append",
        default=[],
        help="a run of a randomly initialised model (repeatable): in the tables and heatmaps, not in Figure 1",
    )
    report.add_argument("--paper-curves", action="store_true", help="overlay the authors' Pythia curves on Figure 1")
    report.add_argument(
        "--reference",
        default=None,
        help="the authors' per-layer Pythia scores, or the folder of their release holding them (default: "
        "official_pythia_layer_scores.csv in $LAYER_MTEB_REFERENCE, else in ../shared/reference)",
    )
    report.add_argument(
        "--paper-tasks",
        choices=("run", "all"),
        default="run",
        help="average the paper curves over the tasks the runs scored (run) or all 32 paper tasks (all)",
    )
    report.add_argument(
        "--entropy-selector",
        default=None,
        help="selection.csv selector for Table 1's entropy columns (default: prompt entropy)",
    )
    report.set_defaults(handler=handlers.report)


def _add_metrics(commands) -> None:
    metrics = commands.add_parser("metrics", help="representation metrics of every layer (label-free)")
    _add_model_or_run(metrics)
    metrics.add_argument(
        "--revision", default=None, help="hub revision: branch, tag or commit (default: the main branch)"
    )
    metrics.add_argument(
        "--texts",
        default=None,
        help="wikitext | task:<TaskName> | FILE (one prompt a line); several, comma-separated, share one model load "
        "(default: wikitext; with --run, the run's tasks' own texts, task:<Task> each)",
    )
    metrics.add_argument(
        "--full-protocol",
        action="store_true",
        help="the paper's protocol: 1000 prompts, 16 views x 200 prompts (MiniLM-L6 on 2 CPU cores: about 14 min, "
        "2 GB; the default, 200 prompts and 4 views x 32 prompts, takes about a minute)",
    )
    metrics.add_argument(
        "--n-prompts", type=int, default=None, help="texts to use, seeded sample if more (default 200; paper: 1000)"
    )
    metrics.add_argument(
        "--views", type=int, default=None, help="augmented views per prompt for LiDAR, 0 skips (default 4; paper: 16)"
    )
    metrics.add_argument(
        "--augment-prompts", type=int, default=None, help="prompts that get augmented views (default 32; paper: 200)"
    )
    metrics.add_argument("--augment-p", type=float, default=0.3, help="augmentation probability")
    metrics.add_argument("--alpha", type=float, default=1.0, help="Rényi order of the matrix entropies")
    metrics.add_argument("--seed", type=int, default=0, help="seed of the prompt sample and the augmentations")
    metrics.add_argument("--data-dir", default=None, help=f"folder of local data: WikiText2/, tasks {DATA_DEFAULT}")
    _add_encode_options(metrics)
    metrics.add_argument("--output", default=None, help="run folder (default: runs/<model>)")
    metrics.set_defaults(handler=handlers.metrics)


def _add_model_or_run(parser: argparse.ArgumentParser) -> None:
    """``metrics`` and ``stress`` measure a model given by name, or the model of a run folder with its settings."""
    parser.add_argument("--model", default=None, help=f"{MODEL_HELP} (or --run)")
    parser.add_argument(
        "--run",
        default=None,
        help="a run folder: its scores.csv gives the model, revision and encode settings (--readout stays yours), "
        "and the output defaults to it; with --model too, --model says how to load the run's model (a local folder)",
    )


def _add_stress(commands) -> None:
    stress = commands.add_parser(
        "stress", help="prompt entropy of every layer under randomness, repetition and length (per prompt), dip test"
    )
    _add_model_or_run(stress)
    stress.add_argument("--texts", default="wikitext", help="prompts to perturb: wikitext | task:<TaskName> | FILE")
    stress.add_argument("--tests", default="randomness,repetition,length", help="comma-separated stress tests")
    stress.add_argument(
        "--paper-sizes",
        action="store_true",
        help="the paper's sizes: 1000 prompts per level and per length (default: 16 and 10, about a minute of CPU for "
        "MiniLM-L6)",
    )
    stress.add_argument("--n-prompts", type=int, default=None, help="prompts per randomness/repetition level")
    stress.add_argument("--length-prompts", type=int, default=None, help="random prompts per length")
    stress.add_argument("--lengths", default=None, help="prompt lengths, e.g. 64,128 (default 64 ... 2048)")
    stress.add_argument("--alpha", type=float, default=1.0, help="Rényi order of the matrix entropies")
    stress.add_argument("--seed", type=int, default=0, help="seed of the prompt sample and the perturbations")
    stress.add_argument("--gzip", action="store_true", help="write stress.csv.gz instead of stress.csv")
    stress.add_argument("--data-dir", default=None, help=f"folder of local data: WikiText2/, tasks {DATA_DEFAULT}")
    _add_encode_options(stress)
    stress.add_argument("--output", default=None, help="run folder (default: runs/<model>)")
    stress.set_defaults(handler=handlers.stress)


def _add_vector_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--attention",
        choices=ATTENTIONS,
        default=ENCODE_DEFAULTS["attention"],
        help="decoder self-attention (default: the model's own; bidirectional for LLM2Vec adapters, else causal)",
    )
    parser.add_argument(
        "--normalize", action="store_true", help="L2-normalise each pooled vector (sentence-transformers' Normalize)"
    )


def _add_select(commands) -> None:
    from layer_mteb.metrics import DIRECTIONS

    select = commands.add_parser("select", help="pick layers by a metric and score the choice against the truth")
    select.add_argument("--run", required=True, help="run folder holding scores.csv and metrics.csv")
    select.add_argument(
        "--by",
        default=None,
        help=f"one metric ({', '.join(DIRECTIONS)}; default: every metric) or a selector of the paper study, "
        "e.g. dataset_entropy@own:from=0.25 (own texts: picks per task) or depth=0.8, or auto (the study's choice "
        "for the model's kind, printed with why), or agreement (the layer that agrees most with a trusted sentence "
        "encoder on each task's texts); writes selection.<by>.csv",
    )
    select.add_argument("--per-task", action="store_true", help="choose a layer per task, not once for the mean")
    add_metric_readout(select)
    select.add_argument(
        "--labels",
        type=_labels_budget,
        default=None,
        help="pick each task's layer by scoring every layer on K labelled test examples (or 'full'), from the "
        "run's cached vectors, instead of by a metric (default: off, pick by metrics)",
    )
    select.add_argument("--draws", type=int, default=10, help="seeded draws of K examples per task (with --labels)")
    select.add_argument(
        "--seed", type=int, default=0, help="seed of the draws (--labels) or of the text sample (--by agreement)"
    )
    select.add_argument(
        "--model", default=None, help="with --labels: how to load the run's model (default: its name in scores.csv)"
    )
    select.add_argument(
        "--eval-workers",
        type=int,
        default=None,
        help="with --labels: processes scoring layers at once (default: one per CPU core)",
    )
    select.add_argument(
        "--reference",
        default=None,
        help="with --by agreement: the trusted sentence encoder (packaged name or folder; default: mpnet-base when "
        "installed, else minilm-l6, never the model itself), or a lexical reference fitted on the sampled texts "
        "alone, when no other model may be used: tfidf, tfidf-lsa or bm25",
    )
    select.add_argument(
        "--agreement", choices=("mknn", "cka"), default="mknn", help="with --by agreement: mutual k-NN or linear CKA"
    )
    select.add_argument(
        "--outliers",
        choices=("none", "standardize", "clamp"),
        default="none",
        help="with --by agreement: rogue dimensions left, standardised, or clamped at the 0.95 quantile",
    )
    select.add_argument("--sample", type=int, default=256, help="with --by agreement: texts drawn per task (seeded)")
    select.add_argument("--neighbours", type=int, default=10, help="with --by agreement: k of mutual k-NN")
    select.add_argument(
        "--data-dir",
        default=None,
        help="with --labels: folder of local task data (default: the folder the run read, from its run.json, "
        f"else {DATA_DEFAULT.strip('()').removeprefix('default: ')})",
    )
    select.set_defaults(handler=handlers.select, interrupted=NOTHING_SAVED)


def _labels_budget(value: str) -> int | str:
    if value == "full":
        return value
    try:
        return int(value)
    except ValueError:
        raise argparse.ArgumentTypeError(f"--labels takes a number of examples or 'full', not {value!r}") from None


def _add_correlate(commands) -> None:
    correlate = commands.add_parser("correlate", help="correlate each metric with the score across layers")
    correlate.add_argument("--run", required=True, help="run folder holding scores.csv and metrics.csv")
    correlate.add_argument(
        "--method", choices=["dcor", "spearman", "kendall", "all"], default="all", help="association measure"
    )
    correlate.add_argument("--permutations", type=int, default=1000, help="shuffles for the p-values")
    correlate.add_argument("--seed", type=int, default=0, help="seed of the shuffles")
    add_metric_readout(correlate)
    correlate.set_defaults(handler=handlers.correlate, interrupted=NOTHING_SAVED)


def _add_import(commands) -> None:
    from layer_mteb.analysis.runs.release_layout import RELEASE_NORMALIZATIONS

    imp = commands.add_parser("import", help="read per-layer mteb result JSONs (mteb 1.x or 2.x) into a run folder")
    imp.add_argument("folder", help="folder of layer_<k>/<Task>.json (mteb 1.x) or an mteb 2.x results folder")
    imp.add_argument("--output", required=True, help="run folder to write scores.csv (and metrics.csv) into")
    imp.add_argument("--model", default=None, help="model name for the rows (default: from the files)")
    imp.add_argument("--n-layers", type=int, default=None, help="the model's number of layers (default: known/deepest)")
    imp.add_argument("--metrics", default=None, help="a long-format metrics table (official_layer_metrics.csv.gz)")
    imp.add_argument("--metrics-model", default=None, help="the model's name in that table (default: --model)")
    imp.add_argument(
        "--normalization",
        choices=RELEASE_NORMALIZATIONS,
        default="paper",
        help="metric normalisation (paper: maxEntropy for entropies and LiDAR, raw for the others, as its figures)",
    )
    imp.set_defaults(handler=handlers.import_results)


def _add_cost(commands) -> None:
    cost = commands.add_parser(
        "cost", help="seconds and FLOPs of the model cut at every layer, with a run's settings, into its cost.csv"
    )
    cost.add_argument("--run", required=True, help="run folder: its scores.csv gives model, revision and settings")
    cost.add_argument(
        "--model", default=None, help="how to load the run's model (default: its name in scores.csv; packaged found)"
    )
    cost.add_argument(
        "--texts",
        default=None,
        help="texts to time, as metrics --texts (default: the run's tasks' own texts, task:<Task> each)",
    )
    cost.add_argument("--n-texts", type=int, default=256, help="texts drawn (seeded) from --texts and timed per layer")
    cost.add_argument("--seed", type=int, default=0, help="seed of the text sample")
    cost.add_argument(
        "--batch-size", type=int, default=32, help="texts per forward pass: the run's (not recorded in scores.csv)"
    )
    cost.add_argument(
        "--max-batch-tokens", type=int, default=None, help="the run's padded-token cap per batch (default: no cap)"
    )
    cost.add_argument("--device", default=None, help="cpu | cuda | cuda:N (default: cuda if available)")
    cost.add_argument("--data-dir", default=None, help=f"folder of local task data {DATA_DEFAULT}")
    cost.set_defaults(handler=handlers.cost)
