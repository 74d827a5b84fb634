"""A run request, resolved once: which models and revisions, which tasks (and the task file's split), which data
folder, which layers, where results go and which shard of the work this process takes.

``layer-mteb run`` builds it in its up-front checks (before torch, transformers or mteb load) and the Python API
(:func:`~layer_mteb.evaluation.sweep.sweep`) builds the same one; the sweep then only reads it. Every name is
resolved and every choice checked here, so a mistyped task, layer list or output fails before any model loads, and
no later step resolves the same fact again.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from layer_mteb.common.config import EncodeConfig
from layer_mteb.common.errors import UserError
from layer_mteb.evaluation.plan import check_layers, check_writable, distributed_shard
from layer_mteb.evaluation.workers import check_eval_workers
from layer_mteb.model.names import model_kind
from layer_mteb.tasks.catalog import TaskSpec, data_dir_from_env, select_tasks
from layer_mteb.tasks.custom_files import check_custom_files


@dataclass(frozen=True)
class RunRequest:
    """What a sweep runs, every fact resolved: ``tasks`` are task-file specs (split ``split``) or, when the caller
    gave mteb task objects, those objects; ``launched`` says the shard came from ``accelerate launch``."""

    models: tuple[Any, ...]
    revisions: tuple[str | None, ...]
    tasks: tuple[TaskSpec, ...] | tuple[Any, ...]
    split: str
    data_dir: Path | None
    layers: str | tuple[int, ...]
    output: Path | None
    shard: tuple[int, int] | None
    launched: bool
    eval_workers: int
    task_metrics: bool = False
    skip_unavailable: bool = False
    trust_remote_code: bool = False
    config: EncodeConfig | None = None  # None: the default settings on the default device, made when a model loads

    @property
    def given_tasks(self) -> bool:
        """Whether the caller handed mteb task objects (scored as they are) instead of names."""
        return bool(self.tasks) and not isinstance(self.tasks[0], TaskSpec)


def resolve_run(
    model: Any,
    tasks: str | Sequence[str] | Sequence[Any] = "paper32",
    *,
    layers: str | Sequence[int] = "all",
    data_dir: str | Path | None = None,
    output: str | Path | None = None,
    revision: str | Sequence[str] | None = None,
    shard: tuple[int, int] | None = None,
    eval_workers: int | None = None,
    task_metrics: bool = False,
    skip_unavailable: bool = False,
    trust_remote_code: bool = False,
    config: EncodeConfig | None = None,
) -> RunRequest:
    """The checked request for ``model`` (a name, a loaded model, or several names) on ``tasks`` (a ``--tasks``
    selection, task names, or mteb task objects); every mistake is one :class:`UserError`, before any model loads."""
    models = tuple([model] if not isinstance(model, list | tuple) else model)
    for name in models:
        if isinstance(name, str):
            model_kind(name)
    launched = distributed_shard() if shard is None else None  # under accelerate launch: this process's shard
    output_path = Path(output) if output is not None else None
    if output_path is not None:
        check_writable(output_path)
    if task_metrics and (shard is not None or launched is not None or output_path is None):
        raise UserError(
            "--task-metrics needs --output and one process; with shards, merge, then run "
            "`layer-mteb metrics --run RUN --texts task:TASK`"
        )
    if isinstance(layers, str):
        check_layers(layers)
    folder = data_dir_from_env(data_dir)
    split, specs = _tasks(tasks, folder)
    return RunRequest(
        models=models,
        revisions=tuple([revision] if revision is None or isinstance(revision, str) else revision),
        tasks=specs,
        split=split,
        data_dir=folder,
        layers=layers if isinstance(layers, str) else tuple(layers),
        output=output_path,
        shard=shard or launched,
        launched=launched is not None,
        eval_workers=check_eval_workers(eval_workers),
        task_metrics=task_metrics,
        skip_unavailable=skip_unavailable,
        trust_remote_code=trust_remote_code,
        config=config,
    )


def _tasks(tasks: str | Sequence[Any], folder: Path | None) -> tuple[str, tuple[Any, ...]]:
    """(split, specs) of a selection or of task names, every custom task's files read and checked; mteb task
    objects pass as they are (their own split)."""
    if not isinstance(tasks, str) and not all(isinstance(t, str) for t in tasks):
        return "test", tuple(tasks)
    task_file, specs = select_tasks(tasks if isinstance(tasks, str) else ",".join(tasks), folder)
    check_custom_files(spec.custom for spec in specs if spec.custom is not None)  # every file read, none written
    return task_file.split, tuple(specs)
