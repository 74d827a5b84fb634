"""The one reader of per-layer mteb result JSONs (a run's ``mteb/`` folder, the authors' mteb 1.x
``layer_<k>/<Task>.json``), each file read by mteb's own ``TaskResult.from_disk``.

A run stores each layer as an mteb *experiment* (``experiment_kwargs`` in ``model_meta.json`` holds the layer).
mteb's ``ResultCache`` skips experiments unless asked and ``BenchmarkResults.to_dataframe()`` averages them into one
number that is no layer's score; this reader keeps every layer apart.
"""

from __future__ import annotations

import json
import re
from collections.abc import Collection, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pandas as pd

from layer_mteb.common.errors import UserError
from layer_mteb.common.run_folder import MTEB_FOLDER
from layer_mteb.common.scores import main_scores

if TYPE_CHECKING:
    from mteb.results import TaskResult

#: The authors' layer folders and labels: ``layer_<k>``, and ``layer_<L>_last``, a copy of the last layer.
AUTHORS_LAYER = re.compile(r"^layer_(\d+)(_last)?$")
_MODEL_META = "model_meta.json"
_NOT_RESULTS = {_MODEL_META, "run_settings.json"}


@dataclass(frozen=True)
class LayerResult:
    """One layer's mteb result file: its ``TaskResult`` and the ``model_meta.json`` beside it (``{}`` if none)."""

    path: Path
    layer: int
    meta: dict[str, Any]
    result: TaskResult

    @property
    def experiment(self) -> dict[str, Any]:
        """The experiment's settings (the layer among them), as the run gave them to mteb; empty when not a run's."""
        return dict(self.meta.get("experiment_kwargs") or {})

    def score_rows(self, splits: Collection[str] | None = None, subsets: Collection[str] | None = None) -> list[dict]:
        """:func:`~layer_mteb.common.scores.main_scores` of the file's result."""
        return main_scores(self.result, splits, subsets)


def layer_results(folder: str | Path) -> Iterator[LayerResult]:
    """Every mteb result JSON below ``folder`` that belongs to a layer, in path order with the authors'
    ``layer_<L>_last`` copies after every other file; the layer comes from ``model_meta.json``'s experiment (a run's)
    or from a ``layer_<k>`` folder (the authors'). A result of the plain model, with neither, is skipped."""
    from mteb.results import TaskResult

    paths = sorted(Path(folder).rglob("*.json"), key=lambda p: (p.parent.name.endswith("_last"), str(p)))
    metas: dict[Path, dict[str, Any]] = {}
    for path in paths:
        if path.name in _NOT_RESULTS:
            continue
        if path.parent not in metas:
            meta_file = path.parent / _MODEL_META
            metas[path.parent] = json.loads(meta_file.read_text()) if meta_file.is_file() else {}
        meta = metas[path.parent]
        layer = _layer_of(path, meta)
        if layer is not None:
            yield LayerResult(path, layer, meta, TaskResult.from_disk(path))


def _layer_of(path: Path, meta: dict[str, Any]) -> int | None:
    kwargs = meta.get("experiment_kwargs") or {}
    if "layer" in kwargs:
        return int(kwargs["layer"])
    for part in reversed(path.relative_to(path.anchor).parts[:-1]):
        match = AUTHORS_LAYER.match(part)
        if match:
            return int(match.group(1))
    return None


def mteb_layer_scores(folder: str | Path) -> pd.DataFrame:
    """A run's ``mteb/`` results, one row per layer, task, split and subset with its settings, as ``scores.csv``."""
    folder = Path(folder) / MTEB_FOLDER
    if not folder.is_dir():
        raise UserError(f"{folder} does not exist: a run folder written by `layer-mteb run` has its mteb results there")
    rows = [
        {"model": found.meta.get("name"), "revision": found.meta.get("revision"), **found.experiment, **row}
        for found in layer_results(folder)
        if "layer" in found.experiment  # a run's layer, not an authors' folder copied in
        for row in found.score_rows()
    ]
    if not rows:
        raise UserError(f"{folder} holds no per-layer mteb results")
    frame = pd.DataFrame(rows)
    return frame.sort_values(["model", "revision", "task", "subset", "layer"], kind="stable").reset_index(drop=True)
