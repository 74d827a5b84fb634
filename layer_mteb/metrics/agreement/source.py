"""The one source a command hands the selection to compute the curves a pick needs and the run lacks; it loads the
model and reference (:func:`~.compute.agreement_curves`) only when asked, so a pick that needs none loads neither."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from layer_mteb.common.errors import UserError, first_line
from layer_mteb.metrics.agreement import DEFAULT_K
from layer_mteb.metrics.agreement.lexical import is_lexical
from layer_mteb.metrics.texts import DEFAULT_N, DEFAULT_SEED

if TYPE_CHECKING:
    from layer_mteb.common.run_folder import RunFolder


@dataclass(frozen=True)
class SignalSource:
    """``reference`` (``None``: the default for the model), how to load the run's ``model`` (``None``: its name), the
    sample; ``no_reference``: compute only what a pick cannot do without."""

    reference: str | None = None
    model: str | None = None
    n: int = DEFAULT_N
    k: int = DEFAULT_K
    seed: int = DEFAULT_SEED
    no_reference: bool = False
    stored_reference: str | None = field(init=False, default=None)  # as agreement.csv names it (a hub id)

    def __post_init__(self) -> None:
        if self.reference is not None:
            from layer_mteb.metrics.agreement.reference import reference_name

            object.__setattr__(self, "stored_reference", reference_name(self.reference))

    def compute(self, folder: RunFolder, tasks: Sequence[str], wanted: Any = None) -> None:
        """The curves of ``tasks`` into ``agreement.csv``: where a pick needs them, what does not load is one
        :class:`UserError` line; ``wanted`` (:class:`~layer_mteb.analysis.selection.selectors.Wanted`), only with a
        trained reference (a lexical one fails on unseen tasks), said first, and one line where nothing loads."""
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
