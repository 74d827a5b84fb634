"""``select --by agreement``: per task, the layer whose geometry agrees most with a trusted sentence encoder on the
task's own unlabelled texts (mutual k-nearest neighbours, Huh et al. 2024; docs/agreement.md).

This module only reads: the curves are the run's ``agreement.csv``, computed beforehand by their own stage
(:func:`layer_mteb.metrics.agreement.compute.agreement_curves`; the commands call it first for the tasks
:func:`missing_curves` names). The curves enter the one selection engine as metric curves (``agreement``, higher is
better; the TwoNN curve for the intrinsic-dimension selectors), so the pick, the tie rule (deeper) and regret and
gain are those of every other selector.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from pathlib import Path

import pandas as pd

from layer_mteb.analysis.selection.auto import AUTO, kind_of, load_policy, pooling_of
from layer_mteb.analysis.selection.curves import as_folder
from layer_mteb.analysis.selection.selectors import AGREEMENT
from layer_mteb.common.config import SETTINGS_COLUMNS
from layer_mteb.common.errors import UserError
from layer_mteb.common.run_folder import AGREEMENT_FILE, LAYER_COLUMNS, METRIC_COLUMNS, NO_REFERENCE, RunFolder
from layer_mteb.metrics.agreement.intrinsic_dimension import ID_METRIC
from layer_mteb.metrics.agreement.lexical import is_lexical
from layer_mteb.metrics.agreement.measures import AGREEMENT_METRICS, DEFAULT_K, OUTLIERS
from layer_mteb.metrics.texts import DEFAULT_N, DEFAULT_SEED, sample_texts, task_texts_label

#: what ``auto`` says of a base model without agreement curves: the lexical reference was studied for it, and not
#: adopted (docs/agreement.md, "Without another model": worse than the depth prior on SmolLM2)
LEXICAL_NOT_ADOPTED = (
    "; a lexical reference (--agreement-with tfidf-lsa, no other model) was studied for auto and not adopted: it "
    "loses to this rule on SmolLM2 (docs/agreement.md)"
)


@dataclass(frozen=True)
class AgreementOptions:
    """The curve a pick reads; the defaults were fixed before the study (docs/agreement.md) and kept by it. The
    command line sets ``reference``, ``n``, ``k`` and ``seed``; ``metric`` (linear CKA) and ``outlier`` are the
    study's knobs, set from Python."""

    # the reference as agreement.csv names it (a hub id, local/<folder> or a lexical name: the CLI turns
    # --agreement-with into it with metrics.agreement.reference.reference_name); None: all-mpnet-base-v2's curves,
    # else any trained one
    reference: str | None = None
    metric: str = "mknn"
    outlier: str = "none"
    n: int = DEFAULT_N
    k: int = DEFAULT_K
    seed: int = DEFAULT_SEED

    def __post_init__(self) -> None:
        if self.metric not in (*AGREEMENT_METRICS, ID_METRIC):
            raise UserError(f"the agreement metric must be one of {', '.join(AGREEMENT_METRICS)}; got {self.metric!r}")
        if self.outlier not in OUTLIERS:
            raise UserError(f"the outlier treatment must be one of {', '.join(OUTLIERS)}; got {self.outlier!r}")
        if self.n < 2 * (self.k + 1) or self.k < 1:
            raise UserError(f"--sample {self.n} and --neighbours {self.k} need k >= 1 and n >= 2 (k + 1)")


def missing_curves(run: str | Path | RunFolder, options: AgreementOptions) -> list[str]:
    """The run's scored tasks whose curve under ``options`` is not in ``agreement.csv`` yet (what the curves' stage
    must compute before a pick reads them)."""
    folder = as_folder(run)
    table = folder.agreement(missing_ok=True)
    return [task for task in _tasks(folder) if _curve_rows(table, folder, options, task).empty]


def agreement_metrics(run: str | Path | RunFolder, options: AgreementOptions) -> pd.DataFrame:
    """The run's stored agreement curves under ``options`` as ``metrics.csv`` rows (metric ``agreement``, texts
    ``task:<Task>``, the scores' settings), one curve per scored task that has one (:func:`missing_curves` names
    those that have none), and the TwoNN curves beside them."""
    folder = as_folder(run)
    tasks, table = _tasks(folder), folder.agreement(missing_ok=True)
    rows = pd.concat([_curve_rows(table, folder, options, task) for task in tasks], ignore_index=True)
    id_options = dataclasses.replace(options, metric=ID_METRIC, outlier="none")
    id_rows = [_curve_rows(table, folder, id_options, task) for task in tasks]
    rows = pd.concat([rows.assign(metric=AGREEMENT), *id_rows], ignore_index=True)
    return pd.DataFrame(
        {
            **{column: rows[column] for column in LAYER_COLUMNS if column in rows},
            "texts": rows["task"].map(task_texts_label),
            "task": rows["task"],
            "metric": rows["metric"],
            "value": rows["value"],
            "n": rows["n"],
            **{column: rows[column] for column in SETTINGS_COLUMNS if column in rows},
        },
        columns=METRIC_COLUMNS,
    )


def _tasks(folder: RunFolder) -> list[str]:
    """The run's scored tasks (a folder without ``scores.csv`` is the error that says how to make one)."""
    return sorted(set(folder.scores()["task"].astype(str)))


def _curve_rows(table: pd.DataFrame, folder: RunFolder, options: AgreementOptions, task: str) -> pd.DataFrame:
    """``task``'s curve in the run's ``table`` under ``options``: the reference asked (any stored one when none is),
    at sample size ``n`` (or at the task's whole size when it has fewer texts), empty when there is none."""
    rows = table[
        (table["task"] == task)
        & (table["metric"] == options.metric)
        & (table["outlier"] == options.outlier)
        & (table["seed"] == options.seed)
        & (table["k"] == (options.k if options.metric == "mknn" else 0))
    ]
    if options.metric == ID_METRIC:  # the intrinsic dimension reads no reference
        rows = rows[rows["reference"] == NO_REFERENCE]
    elif options.reference:
        rows = rows[rows["reference"] == options.reference]
    else:
        rows = _first_reference(rows)
    exact = rows[rows["n"] == options.n]
    if not exact.empty or rows.empty or rows["n"].max() > options.n:
        return exact
    # a task of fewer texts than n is stored at its whole size: accept that size only if it is the sample's
    return rows[rows["n"] == _sample_size(folder, task, options)]


def _first_reference(rows: pd.DataFrame) -> pd.DataFrame:
    """The default reference's rows: all-mpnet-base-v2's where stored, else the first stored trained reference's
    (a lexical reference is read only when named, or by ``auto`` where no trained one is stored)."""
    stored = sorted(
        {name for name in rows["reference"].astype(str) if not is_lexical(name)},
        key=lambda name: ("mpnet" not in name, name),
    )
    return rows[rows["reference"] == stored[0]] if stored else rows.iloc[:0]


def _sample_size(folder: RunFolder, task: str, options: AgreementOptions) -> int:
    """How many texts the seeded sample of ``task`` holds: ``n``, or all of them when the task has fewer."""
    recorded = folder.recorded_tasks()
    texts = sample_texts(recorded.selection(task), options.n, options.seed, recorded.data_dir)
    return len(texts)


def describe_agreement(folder: RunFolder, picks: pd.DataFrame, by: str, options: AgreementOptions) -> list[str]:
    """One line per model: what ``--by agreement`` read (reference, its revision, metric, n, k, seed), or which
    policy rule ``--by auto`` applied and why (agreement for a base model whose run has its curves, else the
    shipped policy)."""
    scores, lines = folder.scores(), []
    for model in picks["model"].astype(str).unique():
        part = scores[scores["model"] == model]
        pooling = pooling_of(part)
        picked = picks[(picks["model"] == model) & (picks["selector"] == by)]
        if by == AUTO and not (picked["texts"].astype(str).str.startswith("task:")).any():
            line = load_policy().describe(model, pooling)
            if kind_of(model, pooling) == "base":
                line += "; no agreement curves in this run (`select --by agreement` computes them; auto then uses them)"
                line += LEXICAL_NOT_ADOPTED
            lines.append(line)
            continue
        stored = folder.agreement(missing_ok=True)
        first = _curve_rows(stored, folder, options, str(part["task"].iloc[0]))
        reference = f"{first['reference'].iloc[0]} ({first['reference_revision'].iloc[0]})" if len(first) else "?"
        what = f"{options.metric}, outliers {options.outlier}, n={options.n}, k={options.k}, seed {options.seed}"
        why = "base language model: the layer of most agreement" if by == AUTO else "the layer of most agreement"
        lines.append(f"{by}: {model}: {why} with {reference} on each task's own texts ({what}); {AGREEMENT_FILE}")
    return lines
