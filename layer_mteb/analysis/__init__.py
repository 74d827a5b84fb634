"""Run folders read, layers selected, metrics correlated, the report drawn. The choices of its options are named
here, in a module that imports nothing, so that the command line declares them without loading pandas."""

from __future__ import annotations

from typing import Literal, get_args

#: ``auto``: the paper's protocol (metrics of the raw residual stream choosing among the scored readout) for every
#: text source that has raw metrics, else metrics of the scored readout itself.
METRIC_READOUTS = ("auto", "raw", "final_norm", "same")

#: metric normalisations of imported results (``paper``: as the paper's figures show them)
Normalization = Literal["paper", "raw", "maxEntropy", "logN", "logD", "logNlogD"]
NORMALIZATIONS: tuple[str, ...] = get_args(Normalization)
