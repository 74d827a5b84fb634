"""``layer-mteb select``: pick layers of a run by a label-free selector (a metric, a depth, ``auto``, agreement
with a sentence encoder) or by K labelled examples, and score the choice against the truth.

``--by agreement`` on a run without the asked curves runs the curves' stage first
(:func:`~layer_mteb.metrics.agreement.compute.agreement_curves`), then hands the stored curves to the selection;
``--by auto`` does the same for a base language model where a reference encoder loads (:func:`curves_for`): the
depth rule it otherwise applies lost 5.67 points on tasks the study never saw, agreement 0.35 (docs/studies.md).
``export --by`` computes the curves with the same function."""

from __future__ import annotations

import argparse
from dataclasses import dataclass
from typing import TYPE_CHECKING

from layer_mteb.analysis.selection.selectors import AGREEMENT, AUTO, by_help, check_selector, reads_curves
from layer_mteb.cli.console import CURVES_SAVED, NOTHING_SAVED
from layer_mteb.cli.options import (
    DATA_DEFAULT,
    add_metric_readout,
    add_no_reference,
    add_renamed,
    check_runs,
    settings_of,
)

if TYPE_CHECKING:
    from layer_mteb.analysis.selection.agreement import AgreementOptions
    from layer_mteb.common.run_folder import RunFolder

NAME = "select"
HELP = "pick layers by a metric and score the choice against the truth"
INTERRUPTED = NOTHING_SAVED


def add_options(select: argparse.ArgumentParser) -> None:
    select.add_argument("--run", required=True, help="run folder holding scores.csv and metrics.csv")
    select.add_argument(
        "--by",
        default=None,
        help=f"the selector (default: every metric): {by_help()}; one on each task's own texts (@own, agreement, "
        "auto) picks per task; writes selection.<by>.csv",
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
        "--agreement-with",
        default=None,
        help="with --by agreement: the trusted sentence encoder (packaged name, folder or hub id; default: mpnet-base "
        "when installed, else minilm-l6, else all-mpnet-base-v2 from the hub, never the model itself), or a lexical "
        "reference fitted on the sampled texts alone, when no other model may be used: tfidf, tfidf-lsa or bm25",
    )
    add_renamed(select, "--reference", "--agreement-with")
    add_no_reference(select)
    select.add_argument("--sample", type=int, default=256, help="with --by agreement: texts drawn per task (seeded)")
    select.add_argument("--neighbours", type=int, default=10, help="with --by agreement: k of mutual k-NN")
    select.add_argument(
        "--data-dir",
        default=None,
        help="with --labels: folder of local task data (default: the folder the run read, from its run.json, "
        f"else {DATA_DEFAULT.strip('()').removeprefix('default: ')})",
    )


def _labels_budget(value: str) -> int | str:
    if value == "full":
        return value
    try:
        return int(value)
    except ValueError:
        raise argparse.ArgumentTypeError(f"--labels takes a number of examples or 'full', not {value!r}") from None


@dataclass(frozen=True)
class Settings:
    run: str
    by: str | None
    per_task: bool
    metric_readout: str
    labels: int | str | None
    draws: int
    seed: int
    model: str | None
    eval_workers: int | None
    agreement_with: str | None
    sample: int
    neighbours: int
    data_dir: str | None
    no_reference: bool

    @property
    def interrupted(self) -> str:
        """Each task's agreement curves are written as it finishes; a rerun reads them back. Any other pick writes
        its file at the end."""
        return CURVES_SAVED if self.labels is None and reads_curves(self.by) else NOTHING_SAVED


def check(args: argparse.Namespace) -> Settings:
    check_runs([args.run])
    if args.by is not None:
        check_selector(args.by)  # a mistyped --by in a fraction of a second, with the nearest names
    return settings_of(Settings, args)


def execute(settings: Settings) -> None:
    if settings.labels is not None:
        _select_by_labels(settings)
        return
    from layer_mteb.analysis.selection.agreement import describe_agreement
    from layer_mteb.analysis.selection.picks import best_lines, run_leaderboard, select_layers
    from layer_mteb.analysis.selection.tradeoff import cheapest_lines
    from layer_mteb.cli.console import print_leaderboard
    from layer_mteb.common.run_folder import AGREEMENT_FILE, RunFolder, selection_file

    folder, by = RunFolder(settings.run), settings.by  # the one folder every reader below is handed
    sampled = {"n": settings.sample, "k": settings.neighbours, "seed": settings.seed}
    options = curves_for(folder, by, settings.agreement_with, settings.model, settings.no_reference, **sampled)
    picks = select_layers(
        folder, by=by, per_task=settings.per_task, metric_readout=settings.metric_readout, agreement=options
    )
    if by in (AUTO, AGREEMENT):  # which selector picked for each model, and why
        for line in describe_agreement(folder, picks, by, options):
            print(line)
    board, note = run_leaderboard(folder, picks, by)
    lines = [*best_lines(folder, picks), *([note] if note else [])]
    print_leaderboard(board, folder.file(selection_file(by)), "\n".join(lines))
    for line in cheapest_lines(folder):
        print(line)
    if reads_curves(by):  # the curves it measured (or read back) are kept for the next pick
        print(f"agreement curves: {folder.file(AGREEMENT_FILE)}")


def curves_for(
    folder: RunFolder,
    by: str | None,
    reference: str | None = None,
    model: str | None = None,
    no_reference: bool = False,
    **sampled: int,
) -> AgreementOptions:
    """The curves ``by`` reads, computed by their own stage for the tasks whose curve the run's ``agreement.csv``
    lacks (one model and one reference load for them all), and the options the pick then reads them with.

    ``--by agreement`` fails with one line where the reference, the model or a text does not load. ``--by auto``
    computes them only for a run of one base language model and never with a lexical reference (which fails on
    unseen tasks), saying first what it encodes; where nothing loads, one line says so and the policy's depth rule
    applies (``no_reference``: never computes). An embedding or [CLS] model needs none."""
    from layer_mteb.analysis.selection.agreement import AgreementOptions, missing_curves
    from layer_mteb.analysis.selection.auto import kind_of, pooling_of

    stored = None
    if reference is not None:  # agreement.csv names a packaged reference by its hub id
        from layer_mteb.metrics.agreement.reference import reference_name

        stored = reference_name(reference)
    options = AgreementOptions(reference=stored, **sampled)
    base = None  # the model --by auto computes curves for: a run's one base language model
    if by == AUTO and not no_reference:
        scores = folder.scores()
        names = scores["model"].astype(str).unique()
        base = names[0] if len(names) == 1 and kind_of(names[0], pooling_of(scores)) == "base" else None
    missing = missing_curves(folder, options) if base or reads_curves(by) else []
    if not missing:
        return options
    from layer_mteb.metrics.agreement.compute import agreement_curves

    if base is None:
        agreement_curves(folder, missing, **sampled, reference=reference, model=model)
        return options
    from layer_mteb.common.errors import UserError, first_line
    from layer_mteb.metrics.agreement.lexical import is_lexical
    from layer_mteb.metrics.agreement.reference import check_reference, default_reference

    try:
        if reference is not None and is_lexical(reference):
            raise UserError(f"{reference} is a lexical reference, which auto does not use")
        reference = default_reference(base) if reference is None else check_reference(reference)
        print(
            f"auto: {base} is a base language model and its run has no agreement curves for {len(missing)} "
            f"task(s): encoding up to {options.n} texts of each with the model's every layer and with {reference} "
            "(roughly 5 to 40 s a task for a 135M-parameter model on 2 CPU cores, more for bigger ones; "
            "--no-reference skips this)",
            flush=True,
        )
        agreement_curves(folder, missing, **sampled, reference=reference, model=model)
    except UserError as err:
        fallback = f"auto: {base} gets the depth rule for base models instead of agreement"
        print(f"{fallback}: {first_line(err)}", flush=True)
    return options


def _select_by_labels(settings: Settings) -> None:
    from layer_mteb.analysis.labels.budget import select_with_labels
    from layer_mteb.common.run_folder import RunFolder, labels_file

    picks = select_with_labels(
        settings.run,
        settings.labels,
        draws=settings.draws,
        seed=settings.seed,
        model=settings.model,
        workers=settings.eval_workers,
        data_dir=settings.data_dir,
    )
    path = RunFolder(settings.run).write_table(labels_file(settings.labels), picks, float_format="%.6f")
    shown = ["task", "chosen_layer", "chosen_score", "best_layer", "regret", "gain", "mean_regret", "regret_std"]
    print(picks[[*shown, "picks", "seconds"]].round(4).to_string(index=False))
    means = picks[["regret", "gain", "mean_regret"]].mean().round(4)
    summary = ", ".join(f"{k} {v}" for k, v in means.items())
    print(f"\nK={settings.labels}, {settings.draws} draws, {len(picks)} tasks: {summary}")
    print(f"wrote {path}")
