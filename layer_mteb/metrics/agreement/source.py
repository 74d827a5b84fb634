"""The one source a command hands the selection to compute the curves a pick needs and the run lacks: the model to
load, the reference encoder and the sample. The selection decides what is missing and asks; the source loads the
model and the reference (:func:`~.compute.agreement_curves`) only then, so a pick that needs no curves loads
neither."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from layer_mteb.common.errors import UserError, first_line
from layer_mteb.metrics.agreement import DEFAULT_K
from layer_mteb.metrics.agreement.lexical import is_lexical
from layer_mteb.metrics.texts import DEFAULT_N, DEFAULT_SEED

if TYPE_CHECKING:
    from layer_mteb.common.run_folder import RunFolder


@dataclass(frozen=True)
class SignalSource:
    """``reference``: the trusted encoder (``None``: the default for the model, never the model itself); ``model``:
    how to load the run's model (``None``: its name in ``scores.csv``); ``n``, ``k``, ``seed``: the sample;
    ``no_reference``: compute only what a pick cannot do without."""

    reference: str | None = None
    model: str | None = None
    n: int = DEFAULT_N
    k: int = DEFAULT_K
    seed: int = DEFAULT_SEED
    no_reference: bool = False

    @property
    def stored_reference(self) -> str | None:
        """The reference as ``agreement.csv`` names it (a packaged reference by its hub id)."""
        if self.reference is None:
            return None
        from layer_mteb.metrics.agreement.reference import reference_name

        return reference_name(self.reference)

    def compute(self, folder: RunFolder, tasks: Sequence[str], wanted: Any = None) -> None:
        """The curves of ``tasks`` into the run's ``agreement.csv``. Asked by a pick that cannot do without them,
        a reference, model or text that does not load is one :class:`UserError` line; ``wanted`` by a selector that
        can (:class:`~layer_mteb.analysis.selection.selectors.Wanted`), they are computed only with a trained
        reference (a lexical one fails on unseen tasks), saying first what is encoded, and where nothing loads one
        line says what the selector does instead."""
        from layer_mteb.metrics.agreement.compute import agreement_curves

        sample = {"n": self.n, "k": self.k, "seed": self.seed, "model": self.model}
        if wanted is None:
            agreement_curves(folder, tasks, **sample, reference=self.reference)
            return
        if self.no_reference:
            return
        from layer_mteb.metrics.agreement.reference import check_reference, default_reference

        try:
            if self.reference is not None and is_lexical(self.reference):
                raise UserError(f"{self.reference} is a lexical reference, which {wanted.by} does not use")
            reference = default_reference(wanted.model) if self.reference is None else check_reference(self.reference)
            print(
                f"{wanted.by}: {wanted.model} {wanted.why} and its run has no agreement curves for {len(tasks)} "
                f"task(s): encoding up to {self.n} texts of each with the model's every layer and with {reference} "
                "(roughly 5 to 40 s a task for a 135M-parameter model on 2 CPU cores, more for bigger ones; "
                "--no-reference skips this)",
                flush=True,
            )
            agreement_curves(folder, tasks, **sample, reference=reference)
        except UserError as err:
            print(f"{wanted.by}: {wanted.model} {wanted.instead}: {first_line(err)}", flush=True)
