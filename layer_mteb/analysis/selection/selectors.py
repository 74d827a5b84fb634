"""The label-free layer selectors and the one engine applying them: each :class:`Selector` is a name, the per-layer
signals it reads (:data:`~layer_mteb.metrics.SIGNALS`) and the function that picks a layer from their curves; this
module holds the metric selectors (:func:`metric_selectors`), :mod:`~.registry` every selector by name.
``select``, the report's leaderboard and the selector studies all pick with it and score with :func:`evaluate`.

A selector sees only metric curves and the model's depth, never scores (``oracle``, the hindsight baseline, is the
one exception). Ties follow :mod:`~.rules`: the deeper layer; "last" is layer ``n_layers``. Importing this module
loads no pandas, so the command line checks a ``--by`` name before anything heavy loads.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from functools import cache
from types import MappingProxyType
from typing import TYPE_CHECKING, Protocol, TypedDict

from layer_mteb.analysis.rules import extremum_layer, from_depth, last_score, nearest_layer
from layer_mteb.common.errors import UserError
from layer_mteb.common.run_folder import SELECTION_FILE
from layer_mteb.common.table import Table
from layer_mteb.metrics import DIRECTIONS, METRICS_FILE, SIGNALS, stored_in
from layer_mteb.metrics.texts import task_texts_label

if TYPE_CHECKING:
    import pandas as pd

    from layer_mteb.common.run_folder import RunFolder

#: Metrics whose extremum is a study candidate (the authors' six).
STUDY_METRICS = ("prompt_entropy", "dataset_entropy", "curvature", "infonce", "lidar", "dime")
WINDOWS = (0.0, 0.25, 0.5, 0.75)
DEPTHS = tuple(round(tenths / 10, 1) for tenths in range(1, 11))
SOURCES = ("own", "wikitext")
#: What ``select`` always reports beside the selector it is asked for.
BASELINES = ("last_layer", "middle_layer", "oracle")
#: What ``--by`` offers of the metric selectors, decided apart from the study grid (which scores every candidate):
#: the fixed depths and the authors' six metrics alone, each applied on every source the run measured it on. The
#: last and middle layer are not offered again: ``select`` reports them beside every pick, and ``--by`` takes them
#: as the depths that pick the same layer (:data:`BASELINE_DEPTHS`).
OFFERED_METRICS = ("prompt_entropy", "dataset_entropy", "curvature", "infonce", "lidar", "dime")
OFFERED = frozenset([*(f"depth={d:.1f}" for d in DEPTHS), *OFFERED_METRICS])
#: The baselines ``--by`` offers under a depth's name: the same layer (``depth=1.0`` is the last wherever the run
#: scored it)
BASELINE_DEPTHS = {"last_layer": "depth=1.0", "middle_layer": "depth=0.5"}


@dataclass(frozen=True)
class Needs:
    """The signals a selector reads on a run: ``reads`` (needed), ``uses`` (if stored), ``wants`` (it has the curves
    computed first where it can, through :meth:`Selector.compute_first`, though it picks without them)."""

    reads: frozenset[str] = frozenset()
    uses: frozenset[str] = frozenset()
    wants: bool = False


class CurveSource(Protocol):
    """What computes the ``agreement.csv`` curves a pick needs and the run lacks, with the sample it draws
    (:class:`layer_mteb.metrics.agreement.source.SignalSource` is the one a command hands the selection)."""

    n: int
    k: int
    seed: int
    no_reference: bool
    reference: str | None  # as given (a packaged name, hub id, folder or lexical name); None: the model's default
    stored_reference: str | None  # as agreement.csv names it

    def reference_for(self, model: str) -> str: ...

    def compute(self, folder: RunFolder, tasks: list[str], reference: str | None = None) -> None: ...


@dataclass(frozen=True)
class ModelData:
    """One model as a selector sees it: scores (layers × tasks; ``mean`` may be a column) and metric curves per
    (metric, texts); ``readout`` maps a text source to the readout its metrics were measured on. ``task_types``
    (task -> mteb task type) and ``pooling`` are facts known without labels that a selector may condition on;
    ``arithmetic``: how its metrics were computed (the paper's formulas or the authors' code)."""

    name: str
    n_layers: int
    scores: pd.DataFrame
    metrics: dict[tuple[str, str], pd.Series] = field(default_factory=dict)
    readout: dict[str, str] = field(default_factory=dict)
    task_types: dict[str, str] = field(default_factory=dict)
    pooling: str = "mean"
    arithmetic: str = "paper"

    def layers(self, task: str) -> pd.Index:
        return self.scores[task].dropna().index

    def curve(self, metric: str, source: str, task: str) -> pd.Series | None:
        values = self.metrics.get((metric, texts_of(source, task)))
        return None if values is None else values[values.index.isin(self.layers(task))]


def task_types(scores: pd.DataFrame) -> dict[str, str]:
    """task -> mteb task type, as a scores table records it (a policy rule may pick a depth per type)."""
    if "task_type" not in scores.columns:
        return {}
    return scores.dropna(subset=["task_type"]).groupby("task")["task_type"].first().astype(str).to_dict()


def pooling_of(scores: pd.DataFrame) -> str:
    """The pooling a scores table was read out with (``mean`` where it does not say): how ``auto`` tells a
    first-token model."""
    found = scores["pooling"].dropna() if "pooling" in scores.columns else ()
    return str(found.iloc[0]) if len(found) else "mean"


@dataclass(frozen=True)
class Selector:
    """One selector: ``name`` (what ``--by`` and the tables call it); a kind of selector is a subclass overriding the
    hooks below, the one interface (:meth:`choose` how it picks a task's layer, by default the extremum of the signal
    ``metric`` on ``source`` from relative depth ``from_depth``; ``depth`` tunes a fixed depth). ``form``: how
    ``--help`` and the did-you-mean write its family (default: the name); ``offered``: whether ``--by`` takes it.
    ``by_type``: (task type, selector name) pairs that pick instead on tasks of that type (the type is known without
    labels). A selector is a pure function of the loaded run; one that reads more than one signal, or decides per
    model what it applies (``auto``), says so by overriding :meth:`needs` and :meth:`for_model`."""

    name: str
    metric: str | None = None
    source: str | None = None
    from_depth: float = 0.0
    depth: float | None = None
    form: str = ""
    offered: bool = True
    by_type: tuple[tuple[str, str], ...] = ()
    #: whether ``select`` may compute curves of ``agreement.csv`` for it first, where the run lacks them: those of
    #: the selectors of the curves (:mod:`~.agreement` builds them), and ``auto``'s for a base model; ``select`` asks
    #: before anything loads (what Ctrl-C leaves)
    computes_curves: bool = False

    def pick(self, model: ModelData, task: str) -> int | None:
        instead = dict(self.by_type).get(model.task_types.get(task, ""))
        if instead is not None:
            return metric_selector_named(instead).pick(model, task)
        return None if model.layers(task).empty else self.choose(model, task)

    def choose(self, model: ModelData, task: str) -> int | None:
        """The metric's extremum (in its direction) on layers at relative depth ≥ ``from_depth``."""
        values = model.curve(str(self.metric), str(self.source), task)
        if values is None:
            return None
        values = values[from_depth(values.index, model.n_layers, self.from_depth)].dropna()
        return None if values.empty else extremum_layer(values, DIRECTIONS[str(self.metric)])

    def signals(self) -> frozenset[str]:  # the signals its picks read, on every task type
        names = [self.metric, *(metric_selector_named(name).metric for _, name in self.by_type)]
        return frozenset(name for name in names if name is not None)

    def reads_curves_alone(self) -> bool:
        """Whether it reads curves of ``agreement.csv`` and nothing of ``metrics.csv`` (the curves' selectors)."""
        signals = self.signals()
        return bool(signals) and all(SIGNALS[name].table != METRICS_FILE for name in signals)

    def needs(self, scores: pd.DataFrame) -> Needs:  # what it reads on a run of ``scores``
        return Needs(reads=self.signals())

    def for_model(self, model: ModelData) -> Selector:  # who picks for ``model`` (auto: its kind's rule)
        return self

    def compute_first(self, source: CurveSource, folder: RunFolder, tasks: list[str]) -> None:
        """The curves of ``tasks`` it reads, computed into the run's ``agreement.csv`` (auto: where a reference
        loads)."""
        source.compute(folder, tasks)

    def per_task(self) -> bool:
        """Whether it can pick only per task: it reads each task's own texts, or picks per task type."""
        return self.source == "own" or bool(self.by_type)

    def describe(self, folder: RunFolder, picks: pd.DataFrame, options: object) -> list[str]:
        return []  # what it read and why it picked so, per model (none: the table says it)


class LastLayer(Selector):
    def choose(self, model: ModelData, task: str) -> int | None:
        return model.n_layers if model.n_layers in model.layers(task) else None


class AtDepth(Selector):
    def choose(self, model: ModelData, task: str) -> int:
        return nearest_layer(model.layers(task), (self.depth or 0.0) * model.n_layers)


class BestScore(Selector):
    def choose(self, model: ModelData, task: str) -> int:
        return extremum_layer(model.scores[task].dropna(), "max")


def metric_selector(metric: str, source: str | None = None, start: float = 0.0) -> Selector:
    """A metric's extremum on one text source (``own``: each task's texts) from relative depth ``start``; without a
    source, the bare metric, which ``select`` applies on every source the run measured it on (``--by`` offers the
    authors' six; the rest are the studies', applied from Python)."""
    name = metric if source is None else f"{metric}@{source}{f':from={start:.2f}' if start else ''}"
    return Selector(name, metric, source, start, form="a metric", offered=name in OFFERED)


def selectors(sources: tuple[str, ...] = SOURCES) -> list[Selector]:
    """Every study candidate: last and middle layer, fixed depths, each metric on each source and depth window."""
    found = [LastLayer("last_layer", offered=False), AtDepth("middle_layer", depth=0.5, offered=False)]
    found += [AtDepth(f"depth={d:.1f}", depth=d, form="depth=0.1…1.0") for d in DEPTHS]  # each offered
    found += [metric_selector(m, s, start) for m in STUDY_METRICS for s in sources for start in WINDOWS]
    return found


@cache
def metric_selectors() -> Mapping[str, Selector]:
    """The metric selectors by name, built once: the study candidates, each metric alone and the hindsight ``oracle``
    (the curves' are :mod:`~.agreement`'s, ``auto`` :mod:`~.auto`'s; all of them: :func:`~.registry.registry`)."""
    found = [
        *selectors(),
        *(metric_selector(name) for name in stored_in(METRICS_FILE)),
        BestScore("oracle", offered=False),  # the best layer in hindsight: a baseline, not a choice
    ]
    return MappingProxyType({selector.name: selector for selector in found})


def metric_selector_named(name: str) -> Selector:  # the metric selector a rule or a per-type pick names
    found = metric_selectors().get(name)
    if found is None:
        raise UserError(f"unknown metric selector {name!r}")
    return found


class SelectionRow(TypedDict):
    """One row of ``selection.csv``: a selector's pick for a task (or ``mean``) and how it scores."""

    model: str
    task: str
    selector: str
    direction: str
    texts: str
    metric_readout: str
    arithmetic: str
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
PICKS_TABLE = Table(
    ["model", "selector", "task"],
    "run `layer-mteb select --run {folder}`",
    key=("model", "selector", "texts", "task"),
    file=SELECTION_FILE,
)


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
        chosen = [candidate.for_model(model) for candidate in candidates]  # auto: the rule for the model's kind
        for task in tasks if tasks is not None else list(model.scores.columns):
            if task not in model.scores.columns or model.scores[task].dropna().empty:
                continue
            score = model.scores[task].dropna()
            best_layer = extremum_layer(score, "max")
            base = {"model": model.name, "task": task, "last_layer": model.n_layers}
            base |= {"last_score": last_score(score, model.n_layers), "best_layer": best_layer}
            base["best_score"] = float(score[best_layer])
            for selector in chosen:
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
                        "arithmetic": model.arithmetic if texts in model.readout else "-",
                        "chosen_layer": layer,
                        "chosen_relative_depth": layer / model.n_layers if model.n_layers else 1.0,
                        "chosen_score": float(score[layer]),
                    }
                )
    frame = pd.DataFrame(rows, columns=SELECTION_COLUMNS)
    return frame.assign(
        regret=frame["best_score"] - frame["chosen_score"], gain=frame["chosen_score"] - frame["last_score"]
    )
