"""Running a sweep: for each task, load its data once and fill the all-layer cache once, then score every layer."""

from __future__ import annotations

import gc
import json
import logging
import shutil
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from functools import cached_property, partial
from pathlib import Path
from typing import Any, NamedTuple

import pandas as pd
import torch
from mteb.cache import ResultCache

from layer_mteb.common.config import EncodeConfig
from layer_mteb.common.errors import UserError
from layer_mteb.common.files import cache_root, no_empty_folders_on_error, topmost_missing
from layer_mteb.common.instructions import Instructions, choose_instructions
from layer_mteb.common.progress import progress as progress_bar
from layer_mteb.common.prompts import Prompts, choose_prompts, model_folder
from layer_mteb.common.ranks import use_rank_device
from layer_mteb.common.run_folder import MTEB_FOLDER, RunFolder
from layer_mteb.common.scores import tidy_scores
from layer_mteb.common.settings import RunSettings
from layer_mteb.evaluation.encoder import LayerEncoder, resolve_settings
from layer_mteb.evaluation.evaluator_warnings import LayerWarnings, log_task_warnings
from layer_mteb.evaluation.mteb_call import has_stored_result, score_encoder, texts_mteb_encodes
from layer_mteb.evaluation.plan import merge_when_all_done, parse_layers, task_units
from layer_mteb.evaluation.request import RunRequest, check_prompts
from layer_mteb.evaluation.storage_plan import state_plan
from layer_mteb.evaluation.workers import ScoreLayer, affordable_workers, score_layers, time_record
from layer_mteb.metrics import METRICS_TABLE
from layer_mteb.metrics.runner import TaskTextMetrics
from layer_mteb.model.architectures import LoadedModel
from layer_mteb.model.attention import with_model_attention
from layer_mteb.model.loading import load_model
from layer_mteb.model.names import recorded_name
from layer_mteb.tasks.custom import declared_in
from layer_mteb.tasks.state import TaskRandomState, data_parts, hold_label_lists, load_data_once
from layer_mteb.vectors.memory import resolve_memory_limit
from layer_mteb.vectors.store import LayerCache, store_folder

logger = logging.getLogger(__name__)


def sweep(
    model: LoadedModel | str | Sequence[str], tasks: str | Sequence[object] = "paper32", **options: Any
) -> pd.DataFrame:
    """Score every layer of ``model`` on ``tasks`` with mteb's own evaluators; one forward pass per unique text.

    The Python API of ``layer-mteb run``: ``options`` are :class:`~layer_mteb.evaluation.request.RunRequest`'s
    fields, the command's options under the same names."""
    return run_request(RunRequest(model, tasks, **options))


def run_request(request: RunRequest) -> pd.DataFrame:
    """Score ``request``, as it is."""
    config = request.config.placed()  # torch may load now: ``auto`` and a launch's ``cuda`` name their GPU
    use_rank_device(config.device)  # under accelerate launch, ``cuda`` without an index is this process's GPU
    # before any model: a task without data fails first
    work = task_units(request.tasks, request.split, request.data_dir, skip_unavailable=request.skip_unavailable)
    units = [(m, r, unit) for m in request.models for r in request.revision for unit in work]
    units = units if request.shard is None else units[request.shard[0] :: request.shard[1]]
    record = _Record(request)
    in_memory = _ModelInMemory(record, config, units)
    with no_empty_folders_on_error(*record.made):  # an error before any result leaves no empty run folder
        tasks_bar = progress_bar(len(units), "tasks", "done", enabled=request.progress)
        for model_ref, model_revision, (task, data, fingerprint) in units:
            model = in_memory.get(model_ref, model_revision)
            # the unit's own choices (its data and the memory it leaves) are made here, and only read from now on
            settings = resolve_settings(
                model.loaded,
                model.config,
                data=data,
                data_fingerprint=fingerprint,
                prompts=model.prompts,
                instructions=model.instructions,
                settings_from=request.settings_from,
            )
            _sweep_task(model, task, settings, record)
            del model  # the next unit's model may be another: only ``in_memory`` holds this one, and lets it go
            tasks_bar.update()
        tasks_bar.close()
    record.finish()
    if request.launched and request.output is not None:
        return merge_when_all_done(request.output, request.shard)
    return tidy_scores(record.rows)


class _Model(NamedTuple):
    """A model as its units run it: the layers scored, its encode settings and what goes before its texts: mteb's
    ``instructions`` for it (replacing its prompts, as in mteb; the folder's default prompt before a text that gets
    none), else its ``prompts``."""

    loaded: LoadedModel
    layer_ids: list[int]
    config: EncodeConfig
    prompts: Prompts | None
    instructions: Instructions | None


@dataclass
class _ModelInMemory:
    """One model in memory at a time, kept while the units are its own: two would not fit where one barely does.
    What its units share is decided once, as it loads (units come model by model)."""

    record: _Record
    config: EncodeConfig
    units: list[tuple[Any, Any, tuple[Any, str, str]]]
    _current: tuple[object, object, _Model] | None = None

    def get(self, ref: LoadedModel | str, revision: str | None) -> _Model:
        """The model of a unit, loaded unless it is the one held; the one held is dropped first, its memory handed
        back to the device (a model the caller passed stays theirs)."""
        if self._current is None or self._current[:2] != (ref, revision):
            self._current = None
            gc.collect()  # the model's modules refer to each other: only the collector frees them
            if torch.cuda.is_available() and torch.cuda.is_initialized():  # so the next model and the memory limit
                torch.cuda.empty_cache()  # see PyTorch's cached GPU memory free
            self._current = (ref, revision, self._load(ref, revision))
        return self._current[2]

    def _load(self, ref: LoadedModel | str, revision: str | None) -> _Model:
        """Load ``ref`` (its tokenizer made with the arguments of mteb's instructions for it), state the plan of its
        tasks, choose what goes before its texts, and check it against what the output folder holds."""
        request, config = self.record.request, self.config
        # the registry entry's instructions are known by the name a results table records, before the model loads
        # with their tokenizer
        name = ref.name if isinstance(ref, LoadedModel) else recorded_name(ref)[0]
        instructions = choose_instructions(request.instructions, name)
        tokenizer = instructions.tokenizer_arguments if instructions is not None else {}
        loaded = ref
        if isinstance(loaded, LoadedModel) and tokenizer:
            raise UserError(
                f"mteb's loader of {instructions.model} makes its tokenizer with {tokenizer}, which a model "
                "passed loaded was not: pass its name or folder instead, or instructions='none'"
            )
        if not isinstance(loaded, LoadedModel):
            at = "" if revision is None else f" at {revision}"
            logger.info("loading model %s%s on %s", ref, at, config.device)  # slow: said before it starts
            loaded = load_model(
                ref, config, revision=revision, trust_remote_code=request.trust_remote_code, tokenizer=tokenizer
            )
        if loaded.tokenizer.num_special_tokens_to_add() >= config.max_length:
            raise UserError(f"--max-length {config.max_length} leaves no room for this tokenizer's special tokens")
        layer_ids = parse_layers(request.layers, loaded.n_layers, loaded.name)
        # per task, the texts to encode and where their all-layer vectors will live, before any is encoded
        tasks = [task for model, at, (task, _, _) in self.units if (model, at) == (ref, revision)]
        limit = resolve_memory_limit(config.max_cache_memory, config.device)
        store = str(cache_root() / "vectors") if request.vector_cache else None
        state_plan(tasks, loaded.n_layers + 1, loaded.hidden_size, limit, config.device, store)
        prompts = choose_prompts(request.prompts, model_folder(loaded.model.name_or_path, loaded.revision), loaded.name)
        if instructions is not None:
            default = prompts.mapping.get(prompts.default_name, "") if prompts and prompts.default_name else ""
            instructions, prompts = replace(instructions, default_prompt=default), None
            # the length mteb's instruction loader sets replaces the folder's, as in mteb (where the settings are the
            # model's own)
            if instructions.max_length is not None and request.settings_from.startswith("model"):
                config = replace(config, max_length=instructions.max_length)
        if (held := request.held) is not None:  # what only loading tells: the revision, the model's attention
            held.check_loaded(loaded.name, loaded.revision, revision, with_model_attention(config, loaded).key())
            records = (None if one is None else one.record() for one in (prompts, instructions))
            check_prompts(held.output, self.record.folder.log(), loaded.name, *records)
        return _Model(loaded, layer_ids, config, prompts, instructions)


@dataclass
class _Record:
    """What the sweep of ``request`` has produced, written as it grows: scores after every unit, the log after every
    task."""

    request: RunRequest
    rows: list[dict] = field(default_factory=list)
    log: list[dict] = field(default_factory=list)

    @cached_property
    def results(self) -> ResultCache | None:
        """mteb's result cache under ``output/mteb``, made on first use (it creates its folder)."""
        return ResultCache(self.output / MTEB_FOLDER) if self.output is not None else None

    def __post_init__(self) -> None:
        self.output = self.request.output
        # each write re-reads the folder under its lock and adds or replaces this run's rows; the others stay
        self.folder = RunFolder(self.output, self.request.shard) if self.output is not None else None
        # the folders this sweep may create, known before it creates any
        self.made = [self.output / MTEB_FOLDER, topmost_missing(self.output)] if self.output is not None else []

    def unit_done(self, rows: list[dict]) -> None:
        """Add a unit's rows and rewrite this run's scores, so an interrupted sweep keeps every finished unit."""
        self.rows += rows
        if self.folder is not None:
            self.folder.update_scores(self.rows)

    def task_done(self, entry: dict) -> None:
        """Add a task's ``run.json`` entry and merge the log into the folder's (other runs' entries stay)."""
        self.log.append(entry)
        if self.folder is not None:
            self.folder.update_log(partial(merged_log, new=self.log))

    def finish(self) -> None:
        self.unit_done([])  # an empty shard still leaves its (empty) table for the merge
        if self.folder is not None and self.rows:
            RunFolder(self.output).warn_stale_side_files()


def _sweep_task(model: _Model, task, settings: RunSettings, record: _Record) -> None:
    """One task of one model: load its data once, fill the all-layer cache once, score every layer."""
    request = record.request
    loaded, layer_ids = model.loaded, model.layer_ids
    store = store_folder(loaded, settings, task.metadata.name) if request.vector_cache else None
    start = time.perf_counter()
    # once; mteb.evaluate keeps data it did not load itself (an aggregate's data is its subtasks')
    loaded_here = [part for part in data_parts(task) if load_data_once(part)]
    load_seconds = time.perf_counter() - start
    for part in data_parts(task):
        hold_label_lists(part)  # mteb reads classification labels row by row: lists, not lazy columns
    random_state = TaskRandomState.of(task)  # every layer starts from it: no score depends on the layers before
    metrics = TaskTextMetrics(loaded) if request.task_metrics else None
    observe = metrics.observe if metrics is not None else None
    # blocks past the deepest requested layer are never run (their vectors would go unused); the task metrics
    # describe every layer, so with them the forward runs in full
    depth = loaded.n_layers if metrics is not None else max(layer_ids)
    if request.overwrite and store is not None:
        shutil.rmtree(store, ignore_errors=True)  # recomputed vectors must not sit beside the ones they replace
    cache = LayerCache(loaded, settings.encode, store, progress=request.progress, observe=observe, depth=depth)
    entry = _log_entry(loaded, task, settings, request.eval_workers, texts_loaded=len(cache))
    if getattr(task, "is_aggregate", False):  # its subtasks' rows sit beside its own in scores.csv
        entry["subtasks"] = [part.metadata.name for part in data_parts(task)]
    if (benchmark := request.benchmark_of(task.metadata.name)) is not None:
        entry["benchmark"] = benchmark  # the benchmark's splits and subsets are the ones this task ran
    if str(settings.data).startswith("local") and request.data_dir is not None:  # later commands find it again
        entry["data_dir"] = str(request.data_dir.resolve())

    def score(layer: int) -> list[dict]:
        random_state.restore(task)  # in a worker too: every layer starts from the task state a lone run sees
        encoder = LayerEncoder(cache, layer, settings=settings)
        return score_encoder(encoder, task, record.results, request.overwrite, settings.data)

    evaluation = _score_layers(score, task, cache, settings, layer_ids, record, entry)
    if cache.n_truncated:
        logger.warning(
            "%s: %d texts were longer than %d tokens and were truncated",
            task.metadata.name,
            cache.n_truncated,
            settings.encode.max_length,
        )
    entry["texts_truncated"] = cache.n_truncated
    if metrics is not None and record.output is not None:
        with cache.times.phase("task_metrics"):
            _write_task_metrics(metrics, cache, task, settings, record.output, request.progress)
    phases = {"load_data": load_seconds, **cache.times.seconds, **evaluation}
    entry.update(time_record(phases, time.perf_counter() - start, request.eval_workers, entry["texts_encoded"]))
    random_state.restore(task)  # the task object is left as the sweep found it
    for part in loaded_here:  # as mteb.evaluate does: data the task came with (a local folder) stays
        part.unload_data()
    record.task_done(entry)


def _log_entry(loaded: LoadedModel, task, settings: RunSettings, eval_workers: int, texts_loaded: int) -> dict:
    """A task's ``run.json`` entry as it starts (what ran, with which settings); the counts grow as it goes."""
    source = declared_in(task)  # a custom task: where to find its declaration again
    return {
        "model": loaded.name,
        "revision": loaded.revision,
        "task": task.metadata.name,
        **settings.record(eval_workers, task.metadata),
        **({"task_file": str(source)} if source is not None else {}),
        "texts_loaded": texts_loaded,
        "texts_encoded": 0,
        "units_evaluated": 0,
        "units_reused": 0,
    }


#: What ``computed`` keeps of the run that computed a unit's scores
COMPUTED_FIELDS = (
    "units_evaluated",
    "texts_encoded",
    "eval_workers_used",
    "seconds",
    "forward_texts_per_second",
    "overhead_ratio",
    "peak_rss_bytes",
)


def merged_log(kept: list[dict], new: list[dict]) -> list[dict]:
    """``run.json``'s entries ``kept`` with ``new`` replacing those of the same unit; a new entry that only reused
    stored results keeps the computing run's record under ``computed``, so a resume erases no timing."""
    earlier = {_unit(entry): entry for entry in kept}
    new = [_with_computed(entry, earlier.get(_unit(entry))) for entry in new]
    redone = {_unit(entry) for entry in new}
    return [entry for entry in kept if _unit(entry) not in redone] + new


def _unit(entry: Mapping[str, Any]) -> tuple[object, ...]:
    """What an entry is the record of: (model, revision, task, settings)."""
    settings = json.dumps(entry.get("settings"), sort_keys=True)
    return entry.get("model"), entry.get("revision"), entry.get("task"), settings


def _with_computed(entry: dict, before: dict | None) -> dict:
    """``entry``, with the computing run's record from ``before`` when ``entry`` evaluated and encoded nothing."""
    if before is None or entry.get("units_evaluated") or entry.get("texts_encoded"):
        return entry
    if "computed" in before:
        return {**entry, "computed": before["computed"]}
    if before.get("units_evaluated"):
        return {**entry, "computed": {name: before[name] for name in COMPUTED_FIELDS if name in before}}
    return entry


def _score_layers(
    score: ScoreLayer, task, cache: LayerCache, settings: RunSettings, layers: list[int], record: _Record, entry: dict
) -> dict[str, float]:
    """Every layer of one task, rows recorded and the cache saved as they come, ``entry`` counting what was encoded,
    evaluated and reused; returns the seconds of the evaluators, of reading stored results and of the loop."""
    request = record.request

    def stored(layer: int) -> bool:
        return has_stored_result(record.results, task, LayerEncoder(cache, layer, settings=settings))

    def count_encoded() -> None:  # the cache is saved whenever it grew, so an interrupted sweep keeps its vectors
        if cache.path is not None and len(cache) > entry["texts_loaded"] + entry["texts_encoded"]:
            cache.save()
        entry["texts_encoded"] = len(cache) - entry["texts_loaded"]

    reused = {layer: not request.overwrite and stored(layer) for layer in layers}
    # one length-sorted pass over every text the evaluator will encode, before mteb's first encode call
    known = texts_mteb_encodes(task, settings.prompt_for) if not all(reused.values()) else None
    if known is not None:
        cache.fill(known)
        count_encoded()
    # texts not known ahead fill the cache while the first layer is scored here; then workers find them all
    first = [] if known is not None else layers[:1]
    rest = layers[len(first) :]

    def scored():
        yield from score_layers(score, first, 1, request.verbose)
        workers = entry["eval_workers_used"] = _workers(request.eval_workers, len(rest), cache)
        yield from score_layers(score, rest, workers, request.verbose)

    bar = progress_bar(len(layers), f"task {task.metadata.name}", "layers scored", enabled=request.progress)
    start, encoding = time.perf_counter(), cache.encoding_seconds()
    spent = {"evaluators": 0.0, "results_read": 0.0}  # a reused layer's time is mteb reading its stored result
    raised: dict[int, LayerWarnings] = {}
    for layer, rows, seconds, raised[layer] in scored():
        # a lazily filled cache runs the forward inside the first layer's evaluation: that time is the forward's
        now = cache.encoding_seconds()
        spent["results_read" if reused[layer] else "evaluators"] += seconds - (now - encoding)
        encoding = now
        count_encoded()
        entry["units_reused" if reused[layer] else "units_evaluated"] += 1
        record.unit_done(rows)
        bar.update()
    bar.close()
    entry["evaluator_warnings"] = log_task_warnings(task.metadata.name, raised, request.verbose)
    return {**spent, "evaluation_wall": time.perf_counter() - start}


def _workers(requested: int, n_layers: int, cache: LayerCache) -> int:
    """Evaluation workers for ``n_layers`` layers: as many as asked and host memory affords with the vectors in it."""
    if min(requested, n_layers) <= 1:
        return 1
    cache.to_host()
    return affordable_workers(requested, n_layers, cache)


def _write_task_metrics(metrics, cache: LayerCache, task, settings: RunSettings, output: Path, progress: bool) -> None:
    """The task's own-text metrics over every text its evaluator encodes; texts the forward did not stream through
    (from a stored cache) get a pass of their own, so a warm cache writes the same rows."""
    if not len(cache):
        cache.fill(texts_mteb_encodes(task, settings.prompt_for) or [])  # observed through the cache's observer
    if not len(cache):
        logger.warning("%s: no task metrics (its texts are not known before mteb encodes them)", task.metadata.name)
        return
    texts = list(cache.index)
    if metrics.n_observed != len(texts):
        logger.info("%s: task metrics: a forward pass over %d cached texts", task.metadata.name, len(texts))
        metrics.observe_again(texts, settings.encode, progress=progress)
    # one layer at a time: the whole [L+1, N, D] stack would undo the memory limit
    frame = metrics.rows(task.metadata.name, cache.by_layer(texts), settings.encode)
    if not frame.empty:
        RunFolder(output).update(METRICS_TABLE, frame)
