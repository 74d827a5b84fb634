"""``select --by agreement``: per task, the layer whose geometry agrees most with a trusted sentence encoder on the
task's own unlabelled texts (mutual k-NN, Huh et al. 2024; docs/agreement.md), and the published intrinsic-dimension
selectors on the TwoNN curve beside it. This module only reads ``agreement.csv``; the curves a pick needs and the run
lacks are computed first through the :class:`~.selectors.CurveSource` a command hands the selection, then enter the
one engine as per-layer signals, so the pick, the tie rule (deeper), regret and gain are every other selector's."""

from __future__ import annotations

from collections.abc import Collection, Mapping
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from types import MappingProxyType
from typing import TYPE_CHECKING

from layer_mteb.analysis.selection.selectors import CurveSource, ModelData, Needs, Selector
from layer_mteb.common.errors import UserError
from layer_mteb.common.run_folder import RunFolder
from layer_mteb.metrics import SIGNALS, Signal, stored_in
from layer_mteb.metrics.agreement import AGREEMENT_FILE, AGREEMENT_TABLE, DEFAULT_K, ID_METRIC
from layer_mteb.metrics.agreement.intrinsic_dimension import ID_SELECTORS, id_pick
from layer_mteb.metrics.agreement.lexical import LEXICAL_KINDS
from layer_mteb.metrics.texts import DEFAULT_N, DEFAULT_SEED, task_texts_label

if TYPE_CHECKING:
    import pandas as pd

AGREEMENT = "agreement"


@dataclass(frozen=True)
class AgreementOptions:
    """The curve a pick reads: each stored signal as :data:`~layer_mteb.metrics.SIGNALS` declares it (agreement:
    mutual k-NN untreated; the study's other measures: ``scripts/``), at the command line's reference, n, k and seed
    where the signal is keyed by them; the defaults were fixed before the study (docs/agreement.md) and kept by it."""

    # as agreement.csv names it (hub id, local/<folder> or lexical name); None: all-mpnet-base-v2's, else any trained
    reference: str | None = None
    n: int = DEFAULT_N
    k: int = DEFAULT_K
    seed: int = DEFAULT_SEED

    def __post_init__(self) -> None:
        if self.n < 2 * (self.k + 1) or self.k < 1:
            raise UserError(f"--sample {self.n} and --neighbours {self.k} need k >= 1 and n >= 2 (k + 1)")


def options_of(source: CurveSource | None) -> AgreementOptions:  # the curve ``source`` computes, else the defaults
    if source is None:
        return AgreementOptions()
    return AgreementOptions(source.stored_reference, source.n, source.k, source.seed)


def missing_curves(
    run: str | Path | RunFolder, options: AgreementOptions, signals: Collection[str] = (AGREEMENT,)
) -> list[str]:
    """The run's scored tasks lacking a curve of one of ``signals`` under ``options`` in ``agreement.csv`` (a curve
    added to the package after the run's were computed is missing too)."""
    folder = RunFolder.of(run)
    return _lacking(folder, read_curves(folder, options), signals)


def _lacking(folder: RunFolder, found: StoredCurves, signals: Collection[str]) -> list[str]:
    held = {key for curves in found.curves.values() for key in curves}
    return [t for t in _tasks(folder) if any((s, task_texts_label(t)) not in held for s in signals)]


@dataclass(frozen=True)
class StoredCurves:
    """Per model: (signal, texts) -> value per layer, and texts -> the readout measured on (the scores' own)."""

    curves: Mapping[str, dict[tuple[str, str], pd.Series]]
    readout: Mapping[str, dict[str, str]]


def stored_curves(
    folder: RunFolder | None, selector: Selector, needs: Needs, options: AgreementOptions, source: CurveSource | None
) -> StoredCurves | None:
    """The curves of ``agreement.csv`` that ``needs`` reads or uses, the missing computed first through ``source``
    as the selector has them computed (without one, a pick that reads them fails in one line naming the command);
    ``None`` where it reads none."""
    by = selector.name
    stored = set(stored_in(AGREEMENT_FILE))
    reads, uses = needs.reads & stored, needs.uses & stored
    if not reads and not uses:
        return None
    if folder is None:
        if reads:
            raise UserError(f"--by {by} needs a run folder: it reads the run's vectors of each task's texts")
        return None
    found = read_curves(folder, options)  # read once; again only after computing what it lacks
    if source is not None and (reads or needs.wants):
        missing = _lacking(folder, found, sorted(reads) or [AGREEMENT])
        if missing:
            selector.compute_first(source, folder, missing)
            found = read_curves(folder, options)
    if not reads and not folder.file(AGREEMENT_FILE).is_file():
        return None
    held = {signal for curves in found.curves.values() for signal, _ in curves}
    if reads and not found.curves:
        raise UserError(
            f"no agreement curves for these options in {folder.file(AGREEMENT_FILE)}: "
            f"`layer-mteb select --run {folder.path} --by agreement` computes them first"
        )
    if reads - held:  # curves the package measures since this run's were computed
        raise UserError(
            f"{folder.file(AGREEMENT_FILE)} has no {', '.join(sorted(reads - held))} curves for these options: "
            f"select_layers(run, by={by!r}, source=SignalSource(...)) computes them with the run's model"
        )
    return found


def read_curves(run: str | Path | RunFolder, options: AgreementOptions) -> StoredCurves:
    """Every signal ``agreement.csv`` stores (:data:`~layer_mteb.metrics.SIGNALS`: agreement, the TwoNN curve, ...)
    under ``options``, texts ``task:<Task>``, per scored task that has it (:func:`missing_curves`: those without);
    from the table alone (no task is loaded)."""
    folder = RunFolder.of(run)
    tasks, table = _tasks(folder), folder.read(AGREEMENT_TABLE, missing_ok=True)
    curves: dict[str, dict[tuple[str, str], pd.Series]] = {}
    readout: dict[str, dict[str, str]] = {}
    for task in tasks:
        texts = task_texts_label(task)
        for signal in stored_in(AGREEMENT_FILE):
            rows = _curve_rows(table, SIGNALS[signal], options, task)
            for model, part in rows.groupby("model", sort=False):
                curves.setdefault(str(model), {})[signal, texts] = part.groupby("layer")["value"].mean().dropna()
                if "readout" in part:
                    readout.setdefault(str(model), {})[texts] = str(part["readout"].iloc[-1])
    return StoredCurves(curves, readout)


def _tasks(folder: RunFolder) -> list[str]:
    """The run's scored tasks (a folder without ``scores.csv`` is the error that says how to make one)."""
    return sorted(set(folder.scores()["task"].astype(str)))


def _curve_rows(table: pd.DataFrame, signal: Signal, options: AgreementOptions, task: str) -> pd.DataFrame:
    """``task``'s curve of ``signal`` in the run's ``table``, as the signal declares it: rows of its stored name and
    fixed key, at the options' value of each parameter it is keyed by (the reference asked, any stored one when none
    is), at sample size ``n`` or where the sample held all the task's texts, fewer; empty when there is none."""
    rows = table[(table["task"] == task) & (table["metric"] == signal.metric)]
    for column, value in signal.key.items():
        rows = rows[rows[column] == value]
    for column in sorted(set(signal.parameters) - {"reference", "n"}):
        rows = rows[rows[column] == getattr(options, column)]
    if "reference" in signal.parameters:
        rows = rows[rows["reference"] == options.reference] if options.reference else _first_reference(rows)
    return rows[(rows["n"] == options.n) | (rows["all_texts"] & (rows["n"] < options.n))]


def _first_reference(rows: pd.DataFrame) -> pd.DataFrame:
    """The default reference's rows: all-mpnet-base-v2's where stored, else the first stored trained reference's
    (a lexical reference is read only when named, or by ``auto`` where no trained one is stored)."""
    names = rows["reference"].astype(str)
    trained = names[~names.str.split(":").str[0].isin(LEXICAL_KINDS)]  # stored lexical names are their kind's
    stored = sorted(set(trained), key=lambda name: ("mpnet" not in name, name))
    return rows[rows["reference"] == stored[0]] if stored else rows.iloc[:0]


def agreement_line(
    folder: RunFolder, model: str, by: str, why: str, options: AgreementOptions, curve: str = AGREEMENT
) -> str:
    """What a pick by a reference-needing ``curve`` read for ``model``: the reference, its revision, measure, n, k
    (where it has neighbours) and seed."""
    scores, signal = folder.scores(), SIGNALS[curve]
    task = str(scores.loc[scores["model"] == model, "task"].iloc[0])
    first = _curve_rows(folder.read(AGREEMENT_TABLE, missing_ok=True), signal, options, task)
    reference = f"{first['reference'].iloc[0]} ({first['reference_revision'].iloc[0]})" if len(first) else "?"
    k = signal.key.get("k", options.k)
    what = f"{signal.metric}, outliers none, n={options.n}{f', k={k}' if k else ''}, seed {options.seed}"
    return f"{by}: {model}: {why} with {reference} on each task's own texts ({what}); {AGREEMENT_FILE}"


@dataclass(frozen=True)
class AgreementSelector(Selector):
    """``--by agreement``: the layer of most agreement, each task on its own texts; says what it read."""

    computes_curves: bool = True

    def describe(self, folder: RunFolder, picks: pd.DataFrame, options: object) -> list[str]:
        models = picks["model"].astype(str).unique()
        why = "the layer of most agreement"
        return [agreement_line(folder, m, self.name, why, options, str(self.metric)) for m in models]


class IdSelector(Selector):
    def choose(self, model: ModelData, task: str) -> int | None:
        """The published intrinsic-dimension rule it is named after, on the task's whole TwoNN curve 0..L (a
        missing layer: no pick)."""
        values = model.curve(ID_METRIC, "own", task)
        if values is None or list(values.sort_index().index) != list(range(model.n_layers + 1)):
            return None
        return id_pick(values.sort_index().to_numpy(), self.name)


@cache
def curve_selectors() -> Mapping[str, Selector]:
    """Agreement with a reference encoder; the ID selectors and any other stored curve's extremum (studied)."""
    other = [name for name in stored_in(AGREEMENT_FILE) if name not in (AGREEMENT, ID_METRIC)]
    stored = {"offered": False, "computes_curves": True}
    found = [
        AgreementSelector(AGREEMENT, AGREEMENT, "own", form="agreement (with a sentence encoder)"),
        *(IdSelector(name, ID_METRIC, "own", **stored) for name in ID_SELECTORS),
        *(Selector(name, name, "own", **stored) for name in other),
    ]
    return MappingProxyType({selector.name: selector for selector in found})
