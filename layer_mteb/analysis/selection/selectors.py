"""The label-free layer selectors, one registry: each :class:`Selector` is a name, the table its pick reads and the
function that picks a layer from per-layer curves. ``select --by`` and ``export --by`` offer the registry's
:data:`offered <Selector.offered>` names, its did-you-mean and ``--help`` come from it, and ``select``, the report's
leaderboard and the selector studies all pick with it and score with :func:`evaluate`.

A selector sees only metric curves and the model's depth, never scores (``oracle``, the hindsight baseline, is the
one exception). Ties follow :mod:`~.rules`: the deeper layer; "last" is layer ``n_layers``. Importing this module
loads no pandas, so the command line checks a ``--by`` name before anything heavy loads.
"""

from __future__ import annotations

import difflib
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from functools import cache, partial
from types import MappingProxyType
from typing import TYPE_CHECKING, Literal, TypedDict

from layer_mteb.analysis.rules import extremum_layer, from_depth, last_score, nearest_layer
from layer_mteb.common.errors import UserError
from layer_mteb.metrics import DIRECTIONS
from layer_mteb.metrics.agreement.intrinsic_dimension import ID_METRIC, ID_SELECTORS, id_pick
from layer_mteb.metrics.texts import task_texts_label

if TYPE_CHECKING:
    import pandas as pd

#: What a selector's pick reads besides the model's depth: nothing (``depth``), the scores (``oracle``), the run's
#: ``metrics.csv`` or its stored agreement curves (``agreement.csv``, :mod:`~.agreement`).
Reads = Literal["depth", "scores", "metrics", "curves"]
AUTO = "auto"
AGREEMENT = "agreement"
#: Metrics whose extremum is a study candidate (the authors' six).
STUDY_METRICS = ("prompt_entropy", "dataset_entropy", "curvature", "infonce", "lidar", "dime")
WINDOWS = (0.0, 0.25, 0.5, 0.75)
DEPTHS = tuple(round(tenths / 10, 1) for tenths in range(1, 11))
SOURCES = ("own", "wikitext")
#: What ``select`` always reports beside the selector it is asked for.
BASELINES = ("last_layer", "middle_layer", "oracle")


@dataclass(frozen=True)
class ModelData:
    """One model as a selector sees it: scores (layers × tasks; ``mean`` may be a column) and metric curves per
    (metric, texts); ``readout`` maps a text source to the readout its metrics were measured on. ``task_types``
    (task -> mteb task type) and ``pooling`` are facts known without labels that a selector may condition on."""

    name: str
    n_layers: int
    scores: pd.DataFrame
    metrics: dict[tuple[str, str], pd.Series] = field(default_factory=dict)
    readout: dict[str, str] = field(default_factory=dict)
    task_types: dict[str, str] = field(default_factory=dict)
    pooling: str = "mean"

    def layers(self, task: str) -> pd.Index:
        return self.scores[task].dropna().index

    def curve(self, metric: str, source: str, task: str) -> pd.Series | None:
        values = self.metrics.get((metric, texts_of(source, task)))
        return None if values is None else values[values.index.isin(self.layers(task))]


Pick = Callable[["Selector", ModelData, str], "int | None"]


@dataclass(frozen=True)
class Selector:
    """One selector: ``name`` (what ``--by`` and the tables call it), what its pick ``reads``, and ``how`` it picks
    a task's layer (called with the selector itself, so ``metric``, ``source``, ``from_depth`` and ``depth`` tune
    it). ``form``: how ``--help`` and the did-you-mean write its family (default: the name); ``offered``: whether
    ``--by`` takes it (the intrinsic-dimension selectors are studied, not offered). ``by_type``: (task type,
    selector name) pairs that pick instead on tasks of that type (the type is known without labels)."""

    name: str
    how: Pick
    reads: Reads = "depth"
    metric: str | None = None
    source: str | None = None
    from_depth: float = 0.0
    depth: float | None = None
    form: str = ""
    offered: bool = True
    by_type: tuple[tuple[str, str], ...] = ()

    def pick(self, model: ModelData, task: str) -> int | None:
        instead = dict(self.by_type).get(model.task_types.get(task, ""))
        if instead is not None:
            return by_name(instead).pick(model, task)
        return None if model.layers(task).empty else self.how(self, model, task)


def _last(_: Selector, model: ModelData, task: str) -> int | None:
    return model.n_layers if model.n_layers in model.layers(task) else None


def _at_depth(selector: Selector, model: ModelData, task: str) -> int:
    return nearest_layer(model.layers(task), (selector.depth or 0.0) * model.n_layers)


def _best_score(_: Selector, model: ModelData, task: str) -> int:
    return extremum_layer(model.scores[task].dropna(), "max")


def _extremum(selector: Selector, model: ModelData, task: str) -> int | None:
    """The metric's extremum (in its direction) on layers at relative depth ≥ ``from_depth``."""
    values = model.curve(str(selector.metric), str(selector.source), task)
    if values is None:
        return None
    values = values[from_depth(values.index, model.n_layers, selector.from_depth)].dropna()
    return None if values.empty else extremum_layer(values, DIRECTIONS[str(selector.metric)])


def _id_curve(name: str, _: Selector, model: ModelData, task: str) -> int | None:
    """A published intrinsic-dimension selector on the task's TwoNN curve; it reads the whole curve 0..L in order,
    so a run missing a layer has no pick."""
    values = model.curve(ID_METRIC, "own", task)
    if values is None or list(values.sort_index().index) != list(range(model.n_layers + 1)):
        return None
    return id_pick(values.sort_index().to_numpy(), name)


def metric_selector(metric: str, source: str | None = None, start: float = 0.0) -> Selector:
    """A metric's extremum on one text source (``own``: each task's texts) from relative depth ``start``; without a
    source, the bare metric ``--by`` takes, which ``select`` applies on every source the run measured it on."""
    name = metric if source is None else f"{metric}@{source}{f':from={start:.2f}' if start else ''}"
    form = "a metric" if source is None else "<metric>@<own|wikitext>[:from=0.25|0.50|0.75]"
    return Selector(name, _extremum, "metrics", metric, source, start, form=form)


def selectors(sources: tuple[str, ...] = SOURCES) -> list[Selector]:
    """Every study candidate: last and middle layer, fixed depths, each metric on each source and depth window."""
    found = [Selector("last_layer", _last), Selector("middle_layer", _at_depth, depth=0.5)]
    found += [Selector(f"depth={d:.1f}", _at_depth, depth=d, form="depth=0.1…1.0") for d in DEPTHS]
    found += [metric_selector(m, s, start) for m in STUDY_METRICS for s in sources for start in WINDOWS]
    return found


@cache
def registry() -> Mapping[str, Selector]:
    """Every selector by name: the study candidates, each metric alone, the hindsight ``oracle``, agreement with a
    reference encoder and the intrinsic-dimension selectors (read off ``agreement.csv``, not offered). Built once:
    every lookup (one per pick, where a policy rule picks per task type) reads the same read-only mapping."""
    curves = {AGREEMENT, ID_METRIC}
    found = [
        *selectors(),
        *(metric_selector(metric) for metric in DIRECTIONS if metric not in curves),
        Selector("oracle", _best_score, "scores", form="oracle (the best layer in hindsight)"),
        Selector(AGREEMENT, _extremum, "curves", AGREEMENT, "own", form="agreement (with a sentence encoder)"),
        *(Selector(name, partial(_id_curve, name), "curves", ID_METRIC, "own", offered=False) for name in ID_SELECTORS),
    ]
    return MappingProxyType({selector.name: selector for selector in found})


def by_name(name: str) -> Selector:
    """The selector called ``name``, offered or not (one clear error naming the forms otherwise)."""
    found = registry().get(name)
    if found is None:
        raise UserError(unknown_selector_message(name))
    return found


def offered_names() -> list[str]:
    """Every name ``--by`` takes: the offered selectors and ``auto``."""
    return [*(name for name, selector in registry().items() if selector.offered), AUTO]


def by_help() -> str:
    """What ``--by`` takes, one phrase per family of the registry."""
    forms = dict.fromkeys((s.form or s.name) for s in registry().values() if s.offered)
    metrics = ", ".join(name for name, s in registry().items() if s.form == "a metric")
    forms = {(f"a metric ({metrics})" if form == "a metric" else form): None for form in forms}
    return ", ".join([*forms, "or auto (the study's choice per kind of model; docs/selection.md)"])


def unknown_selector_message(name: str) -> str:
    """One line: why ``name`` is refused, the nearest offered names, then the forms ``--by`` takes."""
    known = registry().get(name)
    if known is not None:  # a studied selector, applied from Python only
        return (
            f"--by {name} is a studied selector that loses to agreement (docs/agreement.md), not offered on the "
            f"command line; layer_mteb.select_layers(run, by={name!r}) applies it"
        )
    close = difflib.get_close_matches(name, offered_names(), n=3)
    hint = f" (did you mean {', '.join(close)}?)" if close else ""
    return f"unknown metric or selector {name!r}{hint}: use {by_help()}"


def reads_curves(by: object) -> bool:
    """Whether ``by`` names one selector that reads the run's stored agreement curves (``auto`` reads them only
    where the run has them)."""
    return isinstance(by, str) and by != AUTO and by_name(by).reads == "curves"


def check_selector(name: str) -> None:
    """A ``--by`` name that is not offered is one :class:`UserError` with a suggestion."""
    if name not in offered_names():
        raise UserError(unknown_selector_message(name))


class SelectionRow(TypedDict):
    """One row of ``selection.csv``: a selector's pick for a task (or ``mean``) and how it scores."""

    model: str
    task: str
    selector: str
    direction: str
    texts: str
    metric_readout: str
    chosen_layer: int
    chosen_relative_depth: float
    chosen_score: float
    last_layer: int
    last_score: float
    best_layer: int
    best_score: float
    regret: float
    gain: float


SELECTION_COLUMNS = list(SelectionRow.__annotations__)


def texts_of(source: str | None, task: str) -> str:
    """The text source a selector reads for ``task``: ``own`` is the task's own texts, anything else is itself."""
    return task_texts_label(task) if source == "own" else str(source or "-")


def evaluate(models: list[ModelData], candidates: list[Selector], tasks: list[str] | None = None) -> pd.DataFrame:
    """One row per (model, task, selector) that can pick: the chosen layer and its score beside the last layer's
    and the best layer's (in the scores' own units), ``regret = best − chosen`` and ``gain = chosen − last``
    (NaN where the task has no last layer). ``tasks`` defaults to every column of each model's scores."""
    import pandas as pd  # the registry above loads without it

    rows = []
    for model in models:
        for task in tasks if tasks is not None else list(model.scores.columns):
            if task not in model.scores.columns or model.scores[task].dropna().empty:
                continue
            score = model.scores[task].dropna()
            best_layer = extremum_layer(score, "max")
            base = {"model": model.name, "task": task, "last_layer": model.n_layers}
            base |= {"last_score": last_score(score, model.n_layers), "best_layer": best_layer}
            base["best_score"] = float(score[best_layer])
            for selector in candidates:
                layer = selector.pick(model, task)
                if layer is None:
                    continue
                texts = texts_of(selector.source, task)
                rows.append(
                    {
                        **base,
                        "selector": selector.name,
                        "direction": DIRECTIONS.get(str(selector.metric), "-"),
                        "texts": texts,
                        "metric_readout": model.readout.get(texts, "-"),
                        "chosen_layer": layer,
                        "chosen_relative_depth": layer / model.n_layers if model.n_layers else 1.0,
                        "chosen_score": float(score[layer]),
                    }
                )
    frame = pd.DataFrame(rows, columns=SELECTION_COLUMNS)
    return frame.assign(
        regret=frame["best_score"] - frame["chosen_score"], gain=frame["chosen_score"] - frame["last_score"]
    )
