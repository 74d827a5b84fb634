"""The scheduler: for each task, load its data once and fill the all-layer cache once, then score every layer."""

from __future__ import annotations

import logging
import warnings
from collections.abc import Sequence
from pathlib import Path

import mteb
import pandas as pd
from mteb.cache import ResultCache
from tqdm.auto import tqdm

from layer_mteb._io import text_hash
from layer_mteb.cache import LayerCache
from layer_mteb.config import EncodeConfig, default_device
from layer_mteb.encoder import LayerEncoder, resolve_layer
from layer_mteb.errors import UserError
from layer_mteb.models import LoadedModel, cache_root, load_model
from layer_mteb.results import score_rows, to_frame, write_scores
from layer_mteb.tasks import TaskSpec, data_dir_from_env, load_task, select_tasks

logger = logging.getLogger(__name__)


def sweep(
    model: LoadedModel | str,
    tasks: str | Sequence[str] | Sequence[object] = "paper32",
    *,
    layers: str | Sequence[int] = "all",
    config: EncodeConfig | None = None,
    data_dir: str | Path | None = None,
    output: str | Path | None = None,
    vector_cache: bool = True,
    overwrite: bool = False,
    revision: str | None = None,
    trust_remote_code: bool = False,
    progress: bool = True,
) -> pd.DataFrame:
    """Score ``layers`` of ``model`` on ``tasks`` with mteb's own evaluators; one forward pass per unique text.

    ``tasks`` is a ``--tasks`` selection (tasks.yaml[:suite], suite name, comma-separated names), a list of task
    names, or a list of mteb task objects. With ``output``, writes ``scores.csv`` as each (task, layer) finishes and
    mteb's result JSONs under ``output/mteb``; finished units are read back instead of recomputed.
    """
    config = config or EncodeConfig(device=default_device())
    data_path = data_dir_from_env(data_dir)
    work = _task_units(tasks, data_path)  # before the model: a mistyped task should not wait for a model load
    if not isinstance(model, LoadedModel):
        model = load_model(model, config, revision=revision, trust_remote_code=trust_remote_code)
    loaded = model
    layer_ids = parse_layers(layers, loaded.n_layers)
    output_path = Path(output) if output is not None else None
    results_cache = ResultCache(output_path / "mteb") if output_path is not None else None
    rows: list[dict] = []
    for task, data in tqdm(work, desc="tasks", disable=not progress):
        task.load_data()  # once; mteb.evaluate keeps data it did not load itself
        store = _vector_store(loaded, config, task) if vector_cache else None
        cache = LayerCache(loaded, config, store, progress=progress)
        for layer in tqdm(layer_ids, desc=f"{task.metadata.name} layers", disable=not progress, leave=False):
            encoder = LayerEncoder(loaded, layer, cache=cache)
            n_before = len(cache)
            with warnings.catch_warnings():
                warnings.filterwarnings("ignore", message=".*is superseded by.*")
                result = mteb.evaluate(
                    encoder,
                    task,
                    cache=results_cache,
                    overwrite_strategy="always" if overwrite else "only-missing",
                    show_progress_bar=False,
                )
            if store is not None and len(cache) > n_before:
                cache.save()
            rows += score_rows(result.task_results[0], task=task, encoder=encoder, data=data)
            if output_path is not None:
                write_scores(to_frame(rows), output_path)
        task.unload_data()
    return to_frame(rows)


def parse_layers(layers: str | Sequence[int], n_layers: int) -> list[int]:
    """``all`` | ``0,3,-1`` | ``0:12`` | ``0:25:2`` (Python slice, end exclusive) -> sorted hidden-state indices."""
    if isinstance(layers, str):
        text = layers.strip()
        if text == "all":
            return list(range(n_layers + 1))
        try:
            if ":" in text:
                picked = list(range(n_layers + 1))[slice(*(int(p) if p else None for p in text.split(":")))]
            else:
                picked = [int(p) for p in text.split(",") if p.strip()]
        except ValueError:
            raise UserError(f"--layers {layers!r} is not 'all', a list like 0,3,-1 or a slice like 0:12") from None
        if ":" in text and not picked:
            raise UserError(f"--layers {layers!r} selects no layer of 0..{n_layers}")
        layers = picked
    if not layers:
        raise UserError("--layers is empty")
    return sorted({resolve_layer(int(layer), n_layers) for layer in layers})


def _task_units(tasks, data_dir: Path | None) -> list[tuple[object, str]]:
    """-> [(mteb task, data origin)], with a clear error for tasks that have no data to run on."""
    if isinstance(tasks, str):
        task_file, specs = select_tasks(tasks, data_dir)
        split = task_file.split
    elif all(isinstance(t, str) for t in tasks):
        task_file, specs = select_tasks(",".join(tasks), data_dir)
        split = task_file.split
    else:
        return [(task, "given") for task in tasks]
    return [(load_task(spec, split, data_dir), _origin(spec, data_dir)) for spec in specs]


def _origin(spec: TaskSpec, data_dir: Path | None) -> str:
    if data_dir is not None and (data_dir / spec.name).is_dir():
        return "local-partial" if spec.partial else "local"
    return "hub"


def _vector_store(model: LoadedModel, config: EncodeConfig, task) -> Path:
    """Where a task's pooled vectors are kept. Rows are looked up by exact text, so changed data can never be
    served stale vectors; the key only has to separate models, revisions and encode settings."""
    settings = text_hash(model.revision, sorted(config.key().items()))
    return cache_root() / "vectors" / model.name.replace("/", "__") / settings / task.metadata.name
