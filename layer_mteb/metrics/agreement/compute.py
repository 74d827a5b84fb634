"""Agreement and intrinsic-dimension curves of a scored run, per task, from a seeded sample of the task's own texts.

:func:`agreement_curves` is the whole step: the run folder's ``scores.csv`` says which model, revision and encode
settings made the scores; ``n`` texts of the task's evaluation splits are drawn (labels never read); every layer's
pooled vectors of them come from the run's vector store (:func:`~layer_mteb.vectors.store.store_folder`), or from
one forward pass of the sample that is then added to it; the reference encodes the same texts; and the curves go
to ``agreement.csv`` (:data:`~layer_mteb.metrics.agreement.AGREEMENT_TABLE`).

Samples nest: the sample of ``n`` texts for a seed is the first ``n`` of one seeded permutation of the task's
unique texts, so a study draws its largest sample once and reads every smaller one off it.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Sequence
from contextlib import suppress
from dataclasses import dataclass, field
from importlib import metadata
from itertools import product
from pathlib import Path

import numpy as np
import pandas as pd
import torch

from layer_mteb.common.config import EncodeConfig
from layer_mteb.common.errors import UserError
from layer_mteb.common.run_folder import RunFolder
from layer_mteb.common.scores import ScoredSetting
from layer_mteb.common.settings import RunSettings
from layer_mteb.common.table import layer_columns
from layer_mteb.metrics import SIGNALS
from layer_mteb.metrics.agreement import AGREEMENT_TABLE, ID_METRIC, NO_REFERENCE, tidy_agreement
from layer_mteb.metrics.agreement.intrinsic_dimension import id_curve
from layer_mteb.metrics.agreement.lexical import LexicalReference, is_lexical, parse_lexical
from layer_mteb.metrics.agreement.measures import (
    AGREEMENT_METRICS,
    DEFAULT_K,
    OUTLIERS,
    agreement_curve,
    neighbour_sets,
    shared_neighbours,
    treat_outliers,
)
from layer_mteb.metrics.agreement.reference import Reference, default_reference, is_same_model, load_reference
from layer_mteb.metrics.texts import DEFAULT_N, DEFAULT_SEED, sample_texts
from layer_mteb.model.architectures import LoadedModel
from layer_mteb.model.loading import load_model
from layer_mteb.model.names import PACKAGED_MODELS, packaged_revision
from layer_mteb.vectors.store import LayerCache, store_folder

logger = logging.getLogger(__name__)


def model_source(run: ScoredSetting) -> str:
    """What to load for ``run``: the packaged model with its hub id and revision, else the hub id itself."""
    for name, packaged in PACKAGED_MODELS.items():
        with suppress(metadata.PackageNotFoundError):  # not installed: the hub id is loaded instead
            if packaged.hub_id == run.model and run.revision == packaged_revision(name):
                return name
    if run.model.startswith("local/"):
        raise UserError(f"the run scored a local model ({run.model}): pass its folder as model=PATH")
    return run.model


def layer_vectors(model: LoadedModel, config: EncodeConfig, task: str, texts: Sequence[str]) -> torch.Tensor:
    """[L+1, n, D] pooled vectors of ``texts``, read from the run's vector store of ``task``; texts it lacks are
    encoded in one forward pass and added to it."""
    cache = LayerCache(model, config, store_folder(model, RunSettings(encode=config), task))
    missing = len([t for t in texts if t not in cache.index])
    vectors = cache.vectors(texts).cpu()
    if missing:
        logger.info(
            "%s: %d of %d sampled texts were not in the vector store; encoded and stored", task, missing, len(texts)
        )
        cache.save()
    return vectors


@dataclass
class TaskSample:
    """One seeded sample of a task: its texts, every layer's vectors and each reference's vectors of them;
    ``all_texts``: the texts are all the task has, fewer than were asked for."""

    task: str
    seed: int
    texts: list[str]
    layers: torch.Tensor
    references: dict[str, tuple[str, np.ndarray]] = field(default_factory=dict)  # name -> (revision, [N, D'])
    all_texts: bool = False


def curve_rows(
    model: LoadedModel,
    config: EncodeConfig,
    sample: TaskSample,
    *,
    sizes: Iterable[int] = (DEFAULT_N,),
    ks: Iterable[int] = (DEFAULT_K,),
    metrics: Iterable[str] = AGREEMENT_METRICS,
    outliers: Iterable[str] = OUTLIERS,
    with_id: bool = True,
) -> list[dict]:
    """``agreement.csv`` rows of every (reference, metric, outlier, n, k) asked for, each on the first ``n`` texts
    of the sample (k only varies mutual k-NN); plus the ID curve at every ``n``."""
    rows: list[dict] = []
    ks = list(ks)
    for n in sorted({min(size, len(sample.texts)) for size in sizes}):
        layers = sample.layers[:, :n]
        layer_sets: dict[tuple[str, int], torch.Tensor] = {}  # the layers' neighbours, once for every reference
        for (reference, (revision, vectors)), metric, outlier in product(sample.references.items(), metrics, outliers):
            for k in ks if metric == "mknn" else [0]:
                if metric == "mknn":
                    if (outlier, k) not in layer_sets:
                        layer_sets[outlier, k] = neighbour_sets(treat_outliers(layers, outlier), k)  # type: ignore[arg-type]
                    theirs = neighbour_sets(treat_outliers(vectors[:n], outlier), k)  # type: ignore[arg-type]
                    values = shared_neighbours(layer_sets[outlier, k], theirs, k).numpy()
                else:
                    values = agreement_curve(layers, vectors[:n], metric, outlier, k)  # type: ignore[arg-type]
                rows += _rows(model, config, sample, (reference, revision, metric, outlier, n, k), values)
        if with_id:  # the ID reads no reference and no neighbourhood
            key = (NO_REFERENCE, NO_REFERENCE, ID_METRIC, "none", n, 0)
            rows += _rows(model, config, sample, key, id_curve(layers))
    return rows


def _rows(model: LoadedModel, config: EncodeConfig, sample: TaskSample, key: tuple, values: np.ndarray) -> list:
    fixed = dict(zip(("reference", "reference_revision", "metric", "outlier", "n", "k"), key, strict=True))
    fixed |= {"task": sample.task, "seed": sample.seed, **config.key()}
    fixed["all_texts"] = sample.all_texts and fixed["n"] == len(sample.texts)
    return [{**layer_columns(model, layer), **fixed, "value": float(v)} for layer, v in enumerate(values)]


def neighbourhoods(k: int) -> list[int]:
    """The neighbourhood sizes the curves are computed at: ``k`` (the pick's) and each one a signal of
    ``agreement.csv`` fixes (:data:`~layer_mteb.metrics.SIGNALS`), so every stored signal is computed with the rest."""
    fixed = {signal.key.get("k", 0) for signal in SIGNALS.values() if signal.needs == "reference"}
    return sorted({k, *fixed} - {0})


def references_for(
    model: str, reference: str | Sequence[str] | None, device: str = "cpu", seed: int = DEFAULT_SEED
) -> list[Reference | LexicalReference]:
    """The references to use for ``model``: those named (one that is the model itself is an error; a lexical one,
    ``tfidf``, ``tfidf-lsa`` or ``bm25``, is fitted on each sample with ``seed``), else the default
    (:func:`~.reference.default_reference`)."""
    names = (
        [default_reference(model)] if reference is None else [reference] if isinstance(reference, str) else reference
    )
    same = [name for name in names if not is_lexical(name) and is_same_model(name, model)]
    if same:
        raise UserError(f"--agreement-with {same[0]} is the model under test; agreement with itself says nothing")
    return [
        LexicalReference(parse_lexical(name), seed) if is_lexical(name) else load_reference(name, device)
        for name in names
    ]


def agreement_curves(
    run: str | Path | RunFolder,
    tasks: str | Sequence[str],
    *,
    n: int = DEFAULT_N,
    seed: int = DEFAULT_SEED,
    k: int = DEFAULT_K,
    reference: str | Sequence[str] | None = None,
    model: str | None = None,
    data_dir: str | Path | None = None,
    write: bool = True,
) -> pd.DataFrame:
    """Per-layer agreement (mutual k-NN and CKA, every outlier treatment) with the reference, and the TwoNN ID, of
    ``n`` texts of each task drawn with ``seed`` (model and reference loaded once for all tasks); merged into the
    run's ``agreement.csv`` task by task unless ``write`` is false, through the command's own :class:`RunFolder`
    where it passes one (so the selection that reads the curves next sees them). ``model`` overrides what is loaded
    (a folder, for a run of a local model)."""
    tasks = [tasks] if isinstance(tasks, str) else list(tasks)
    if not tasks:
        raise UserError("agreement needs at least one task")
    folder = RunFolder.of(run)
    scored = folder.setting()
    source = model or model_source(scored)
    loaded = load_model(source, scored.config, revision=None if source in PACKAGED_MODELS else scored.revision)
    references = references_for(scored.model, reference, scored.config.device, seed)
    frames = []
    recorded = folder.recorded_tasks()  # a custom task's texts are found through its task file
    data_dir = data_dir or recorded.data_dir
    for task in tasks:
        texts = sample_texts(recorded.tasks_value(task), n, seed, data_dir)
        # the references first: a sample a lexical one cannot fit fails before the model's vectors are stored
        encoded = {ref.name: (ref.revision, ref.encode(texts, ref.store(task))) for ref in references}
        vectors = layer_vectors(loaded, scored.config, task, texts)
        sample = TaskSample(task, seed, texts, vectors, encoded, all_texts=len(texts) < n)
        frames.append(tidy_agreement(curve_rows(loaded, scored.config, sample, sizes=[n], ks=neighbourhoods(k))))
        if write:
            folder.update(AGREEMENT_TABLE, frames[-1])
    return tidy_agreement(pd.concat(frames, ignore_index=True))
