"""The choices of the analysis commands' options, in a module that imports nothing, so that the command line declares
them without loading pandas."""

from __future__ import annotations

from typing import Literal, get_args

#: ``auto``: the paper's protocol (metrics of the raw residual stream choosing among the scored readout) for every
#: text source that has raw metrics, else metrics of the scored readout itself.
METRIC_READOUTS = ("auto", "raw", "final_norm", "same")

#: how imported (released) metric values are normalised (``paper``: as the paper's figures show them); not the
#: entropy normalisations of :mod:`layer_mteb.metrics.entropy`
ReleaseNormalization = Literal["paper", "raw", "maxEntropy", "logN", "logD", "logNlogD"]
RELEASE_NORMALIZATIONS: tuple[str, ...] = get_args(ReleaseNormalization)
