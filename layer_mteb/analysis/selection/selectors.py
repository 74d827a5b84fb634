"""The label-free layer selectors and the one engine that applies them: ``layer-mteb select`` (every ``--by``), the
report's leaderboard and the paper's selector study all pick with :class:`Selector` and score with :func:`evaluate`.

A selector sees only metric curves and the model's depth, never scores (``oracle``, the hindsight baseline, is the
one exception). Ties follow :mod:`~.rules`: the deeper layer; "last" is layer ``n_layers``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TypedDict

import pandas as pd

from layer_mteb.analysis.rules import extremum_layer, from_depth, last_score, nearest_layer
from layer_mteb.analysis.selection.selector_names import (
    DEPTHS,
    STUDY_METRICS,
    WINDOWS,
    unknown_selector_message,
)
from layer_mteb.common.errors import UserError
from layer_mteb.common.run_folder import ID_METRIC
from layer_mteb.metrics import DIRECTIONS
from layer_mteb.metrics.agreement.intrinsic_dimension import ID_RULES, id_pick
from layer_mteb.metrics.texts import task_texts_label


@dataclass(frozen=True)
class ModelData:
    """One model as a selector sees it: scores (layers × tasks; ``mean`` may be a column) and metric curves per
    (metric, texts); ``readout`` maps a text source to the readout its metrics were measured on. ``task_types``
    (task -> mteb task type) and ``pooling`` are facts known without labels that a rule may condition on."""

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


@dataclass(frozen=True)
class Selector:
    """A picker: a metric's extremum (in its direction) on layers at relative depth ≥ ``from_depth``, a fixed
    relative depth, or a baseline. ``name``: ``<metric>@<own|wikitext>[:from=<depth>]``, ``depth=<d>``,
    ``last_layer``, ``middle_layer``, ``oracle``, or a bare metric (``select``'s per-source rows). ``acts_as``: the
    selector whose picks a renamed one makes (``auto`` acting as the rule it applies); ``by_type``: (task type,
    selector name) pairs that pick instead on tasks of that type (a depth per task type: the type is known without
    labels)."""

    name: str
    metric: str | None = None
    source: str | None = None
    from_depth: float = 0.0
    depth: float | None = None
    acts_as: str = ""
    by_type: tuple[tuple[str, str], ...] = ()

    def pick(self, model: ModelData, task: str) -> int | None:
        instead = dict(self.by_type).get(model.task_types.get(task, ""))
        if instead is not None:
            return by_name(instead).pick(model, task)
        layers = model.layers(task)
        kind = self.acts_as or self.name
        if layers.empty:
            return None
        if kind == "last_layer":
            return model.n_layers if model.n_layers in layers else None
        if kind == "oracle":
            return extremum_layer(model.scores[task].dropna(), "max")
        if self.depth is not None or kind == "middle_layer":
            return nearest_layer(layers, (self.depth if self.depth is not None else 0.5) * model.n_layers)
        if kind in ID_RULES:
            return _id_rule_pick(kind, model, task)
        values = model.curve(str(self.metric), str(self.source), task)
        if values is None:
            return None
        values = values[from_depth(values.index, model.n_layers, self.from_depth)].dropna()
        return None if values.empty else extremum_layer(values, DIRECTIONS[str(self.metric)])


def _id_rule_pick(rule: str, model: ModelData, task: str) -> int | None:
    """A published intrinsic-dimension rule (:data:`ID_RULES`) on the task's TwoNN curve; it reads the whole curve
    0..L in order, so a run missing a layer has no pick."""
    values = model.curve(ID_METRIC, "own", task)
    if values is None or list(values.sort_index().index) != list(range(model.n_layers + 1)):
        return None
    return id_pick(values.sort_index().to_numpy(), rule)


def selectors(sources: tuple[str, ...] = ("own", "wikitext")) -> list[Selector]:
    """Every study candidate: last and middle layer, fixed depths, each metric on each source and depth window."""
    found = [Selector("last_layer"), Selector("middle_layer")]
    found += [Selector(f"depth={d:.1f}", depth=d) for d in DEPTHS]
    for metric in STUDY_METRICS:
        for source in sources:
            for start in WINDOWS:
                suffix = f":from={start:.2f}" if start else ""
                found.append(Selector(f"{metric}@{source}{suffix}", metric, source, start))
    return found


def by_name(name: str) -> Selector:
    """The selector called ``name`` (one clear error naming the forms otherwise)."""
    found = {s.name: s for s in [*selectors(), Selector("oracle"), *(Selector(r, ID_METRIC, "own") for r in ID_RULES)]}
    if name not in found:
        raise UserError(unknown_selector_message(name))
    return found[name]


def evaluate(models: list[ModelData], candidates: list[Selector], tasks: list[str] | None = None) -> pd.DataFrame:
    """One row per (model, task, selector) that can pick: the chosen layer and its score beside the last layer's
    and the best layer's (in the scores' own units), ``regret = best − chosen`` and ``gain = chosen − last``
    (NaN where the task has no last layer). ``tasks`` defaults to every column of each model's scores."""
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
