"""The one source a command hands the selection to compute the curves a pick needs and the run lacks; it loads the
model and reference (:func:`~.compute.agreement_curves`) only when asked, so a pick that needs none loads neither."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from layer_mteb.metrics.agreement import DEFAULT_K
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

    def reference_for(self, model: str) -> str:
        """The reference to compute with for ``model``: the one given, checked, else the model's default (one
        :class:`UserError` line where none loads)."""
        from layer_mteb.metrics.agreement.reference import check_reference, default_reference

        return default_reference(model) if self.reference is None else check_reference(self.reference)

    def compute(self, folder: RunFolder, tasks: Sequence[str], reference: str | None = None) -> None:
        """The curves of ``tasks`` into ``agreement.csv``, with ``reference`` (default: the one given, else the
        model's); what does not load is one :class:`UserError` line. Who asks decides what a failure means
        (:meth:`~layer_mteb.analysis.selection.auto.AutoSelector.compute_first`: the depth rule instead)."""
        from layer_mteb.metrics.agreement.compute import agreement_curves

        sample = {"n": self.n, "k": self.k, "seed": self.seed, "model": self.model}
        agreement_curves(folder, tasks, **sample, reference=reference or self.reference)
