"""The names ``select --by`` and ``export --by`` accept, known without pandas, torch or mteb: the command line checks a
mistyped selector against them before anything heavy loads, and suggests the nearest names as it does for tasks."""

from __future__ import annotations

import difflib

from layer_mteb.common.errors import UserError
from layer_mteb.metrics import DIRECTIONS
from layer_mteb.metrics.agreement.intrinsic_dimension import ID_RULES

#: Metrics whose extremum is a study candidate (the authors' six).
STUDY_METRICS = ("prompt_entropy", "dataset_entropy", "curvature", "infonce", "lidar", "dime")
WINDOWS = (0.0, 0.25, 0.5, 0.75)
DEPTHS = tuple(round(tenths / 10, 1) for tenths in range(1, 11))
#: What ``layer-mteb select`` always reports beside the metric picks.
BASELINES = ("last_layer", "middle_layer", "oracle")
SOURCES = ("own", "wikitext")
AUTO = "auto"


def study_names(sources: tuple[str, ...] = SOURCES) -> list[str]:
    """Every study candidate's name, in the study's order: last and middle layer, fixed depths, each metric on each
    source and depth window."""
    names = ["last_layer", "middle_layer", *(f"depth={d:.1f}" for d in DEPTHS)]
    for metric in STUDY_METRICS:
        for source in sources:
            names += [f"{metric}@{source}{f':from={start:.2f}' if start else ''}" for start in WINDOWS]
    return names


def known_selectors() -> list[str]:
    """Every name ``--by`` takes: a metric, ``auto``, a study candidate, ``oracle`` or an intrinsic-dimension rule."""
    return list(dict.fromkeys([*DIRECTIONS, AUTO, *study_names(), "oracle", *ID_RULES]))


def unknown_selector_message(name: str) -> str:
    """One line: the nearest known names, then the forms ``--by`` takes."""
    close = difflib.get_close_matches(name, known_selectors(), n=3)
    hint = f" (did you mean {', '.join(close)}?)" if close else ""
    return (
        f"unknown metric or selector {name!r}{hint}: use a metric ({', '.join(DIRECTIONS)}), or "
        f"<metric>@<own|wikitext>[:from=0.25|0.50|0.75], depth=0.1…1.0, last_layer, middle_layer, oracle, "
        f"{', '.join(ID_RULES)} (intrinsic dimension), or auto (the study's choice per kind of model; "
        "docs/selection.md)"
    )


def check_selector(name: str) -> None:
    """A ``--by`` name that is none of :func:`known_selectors` is one :class:`UserError` with a suggestion."""
    if name not in known_selectors():
        raise UserError(unknown_selector_message(name))
