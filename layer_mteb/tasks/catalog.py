"""Which tasks to run: ``tasks.yaml`` and its suites, mteb task lookup with the paper's subsets and split, and
offline copies of task data read through the real mteb task class (its metadata, evaluator and main score kept)."""

from __future__ import annotations

import difflib
import logging
import os
import re
from collections.abc import Iterator, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

import yaml

from layer_mteb.common.errors import UserError, first_line
from layer_mteb.common.hub import hub_offline, offline_reason, online_advice
from layer_mteb.tasks.custom import task_class
from layer_mteb.tasks.local_data import load_local_data
from layer_mteb.tasks.task_file import TaskFile, TaskSpec, parse_custom
from layer_mteb.tasks.task_names import check_task_names, known_benchmarks, known_names, unknown_tasks_message

PACKAGED_TASK_FILE = Path(__file__).resolve().parents[1] / "tasks.yaml"
BUILTIN_SUITES = ("paper32", "paper32-fast", "offline")
DATA_DIR_ENV = "LAYER_MTEB_DATA"
# the project's shared task data, one level above a checkout (the README's ``../shared/data``)
SIBLING_DATA_DIR = Path(__file__).resolve().parents[2].parent / "shared" / "data"
#: the demo's tasks shipped in the package (with provenance and licence), read when nothing else has them
EMBEDDED_DATA_DIR = Path(__file__).resolve().parent / "demo_data"
_implicit: set[Path] = set()  # the folder beside the checkout, when it was taken because nothing named a folder
_announced: set[Path] = set()
logger = logging.getLogger(__name__)


def read_task_file(path: str | Path = PACKAGED_TASK_FILE) -> TaskFile:
    """Parse and validate a tasks.yaml; every schema problem is one line naming the file."""
    path = Path(path)
    raw = _load_yaml(path)
    listed = raw.get("tasks") if isinstance(raw, dict) else None
    if not isinstance(raw, dict) or not (listed or raw.get("custom")) or not isinstance(listed or {}, dict):
        raise UserError(
            f"{path}: expected a mapping with a non-empty 'tasks:' section of categories (or a 'custom:' list)"
        )
    split = str(raw.get("split", "test"))
    specs = [
        _parse_entry(where, str(category), entry)
        for category, entries in (listed or {}).items()
        for where, entry in _entries(path, entries, listed, f"category {category!r} must hold a list of tasks")
    ]
    names = {spec.name for spec in specs}  # each name given once in the whole file
    for where, entry in _entries(path, raw.get("custom") or [], raw, "'custom:' must hold a list of tasks"):
        custom = parse_custom(where, entry, path, split)
        if custom.name in names:
            raise UserError(f"{where}: two tasks are named {custom.name!r}; give each task its own name")
        names.add(custom.name)
        specs.append(TaskSpec(custom.name, custom.type, custom=custom))
    suites = raw.get("suites") or {}
    if not isinstance(suites, dict) or not all(isinstance(v, list) for v in suites.values()):
        raise UserError(f"{path}{_where(suites, raw)}: 'suites:' must map suite names to lists of task names")
    return TaskFile(split, tuple(specs), {k: tuple(v) for k, v in suites.items()})


def _entries(path: Path, entries: Any, within: Any, not_a_list: str) -> Iterator[tuple[str, Any]]:
    """(where, entry) for each entry of a list of tasks (a category's, ``custom:``), ``where`` naming the file, line
    and column for errors; ``entries`` not a list (in ``within``) is the one line ``not_a_list``."""
    if not isinstance(entries, list):
        raise UserError(f"{path}{_where(entries, within)}: {not_a_list}")
    return ((f"{path}{_where(entry, entries)}", entry) for entry in entries)


class _DuplicateKey(yaml.YAMLError):
    """A mapping key given twice (lines count from 1)."""


class _StrictLoader(yaml.SafeLoader):
    """PyYAML's safe loader where a key given twice is an error (the plain loader silently keeps the last)."""

    def construct_mapping(self, node: yaml.MappingNode, deep: bool = False) -> dict[Any, Any]:
        seen: dict[Any, int] = {}
        for key_node, _ in node.value:
            if key_node.tag == "tag:yaml.org,2002:merge":
                continue  # `<<: *base` merges; keys written beside it override the merged ones, as YAML says
            key = self.construct_object(key_node, deep=True)
            line = key_node.start_mark.line + 1
            try:
                if key in seen:
                    raise _DuplicateKey(f"duplicate key {key!r} at line {line} (first at line {seen[key]})")
                seen[key] = line
            except TypeError:
                continue  # an unhashable key: PyYAML's own error names it below
        return super().construct_mapping(node, deep=deep)


class _Mapping(dict):
    """A YAML mapping that remembers where it starts, so a schema error can say where."""

    mark: yaml.Mark | None = None


class _Sequence(list):
    """A YAML sequence that remembers where it starts."""

    mark: yaml.Mark | None = None


def _located(loader: _StrictLoader, node: yaml.Node) -> Iterator[_Mapping | _Sequence]:
    """PyYAML's own construction of a mapping or sequence, into a container that keeps the node's start."""
    data = _Mapping() if isinstance(node, yaml.MappingNode) else _Sequence()
    data.mark = node.start_mark
    yield data  # first, as PyYAML's own constructor does, so that anchors can refer to it
    if isinstance(data, list):
        data.extend(loader.construct_sequence(node))
    else:
        data.update(loader.construct_mapping(node))


_StrictLoader.add_constructor("tag:yaml.org,2002:map", _located)
_StrictLoader.add_constructor("tag:yaml.org,2002:seq", _located)


def _where(*values: Any) -> str:
    """``, line L, column C`` where the first of ``values`` that came with a position starts in its file."""
    return _at(next((v.mark for v in values if getattr(v, "mark", None) is not None), None), ",")


def _load_yaml(path: Path) -> Any:
    """The file's YAML, read strictly; unreadable files, syntax errors and duplicate keys are one line each."""
    try:
        return yaml.load(path.read_text(), Loader=_StrictLoader)  # a SafeLoader: no arbitrary objects
    except _DuplicateKey as err:
        raise UserError(f"{path}: {err}; keep one of them") from None
    except yaml.MarkedYAMLError as err:
        context = err.context and f"{err.context}{_at(err.context_mark, ' started at')}"
        problem = err.problem and f"{err.problem}{_at(err.problem_mark)}"
        raise UserError(
            f"cannot read task file {str(path)!r}: {': '.join(p for p in (context, problem) if p)}"
        ) from None
    except (OSError, yaml.YAMLError) as err:
        raise UserError(f"cannot read task file {str(path)!r}: {first_line(err)}") from None


def _at(mark: yaml.Mark | None, what: str = " at") -> str:
    """``what`` and `` line L, column C`` (both from 1) of a YAML position, or nothing."""
    return f"{what} line {mark.line + 1}, column {mark.column + 1}" if mark is not None else ""


def _parse_entry(where: str, category: str, entry: Any) -> TaskSpec:
    """One task of a category; ``where`` names the file and the entry's line and column for errors."""
    if isinstance(entry, str):
        entry = {"name": entry}
    if not isinstance(entry, dict) or not isinstance(entry.get("name"), str):
        raise UserError(f"{where}: every task under {category!r} needs a 'name:' (got {entry!r})")
    if unknown := set(entry) - {"name", "subsets", "fast", "local"}:
        raise UserError(f"{where}: task {entry['name']!r} has unknown keys {sorted(unknown)}")
    local = dict(entry.get("local") or {})
    partial = local.pop("partial", None)
    files = {split: tuple(names if isinstance(names, list) else [names]) for split, names in local.items()}
    subsets = entry.get("subsets")
    return TaskSpec(entry["name"], category, tuple(subsets) if subsets else None, entry.get("fast"), files, partial)


#: how an option's help says where :func:`data_dir_from_env` looks when ``--data-dir`` is not given
DATA_DEFAULT = "(default: $LAYER_MTEB_DATA, else ../shared/data beside the checkout when it exists)"


def data_dir_from_env(data_dir: str | Path | None) -> Path | None:
    """``--data-dir``, else ``$LAYER_MTEB_DATA``, else ``../shared/data`` beside the checkout when it exists (named
    once when first read: :func:`note_data_read`), else None (the hub)."""
    chosen = data_dir or os.environ.get(DATA_DIR_ENV)
    if not chosen:
        if not SIBLING_DATA_DIR.is_dir():
            return None
        _implicit.add(SIBLING_DATA_DIR)
        return SIBLING_DATA_DIR
    path = Path(chosen).expanduser()
    if not path.is_dir():
        raise UserError(f"data folder {str(path)!r} does not exist")
    return path


def select_tasks(tasks: str, data_dir: Path | None = None) -> tuple[TaskFile, list[TaskSpec]]:
    """Resolve ``--tasks``: ``FILE.yaml[:SUITE or :TASK]``, or comma-separated suite, mteb task and benchmark names;
    every unknown name is reported in one error, and a custom task named like an mteb task is refused."""
    task_file, specs = _select(tasks, data_dir)
    check_task_names(spec.name for spec in specs if spec.custom is None)
    # results, caches and reports key tasks by name (mteb's names are read only where a custom task is asked)
    custom = [spec.custom for spec in specs if spec.custom is not None]
    taken = [task for task in custom if task.name in known_names()] if custom else []
    if taken:
        raise UserError(f"{taken[0].where} has the name of an mteb task; rename it (e.g. {taken[0].name}Custom)")
    return task_file, specs


def file_task(tasks: str) -> str | None:
    """The task part of a ``FILE.yaml:TASK`` value (how a custom task is named outside ``run``), else None."""
    file_part, _, task = tasks.partition(":")
    return (task.strip() or None) if file_part.endswith((".yaml", ".yml")) else None


def _select(tasks: str, data_dir: Path | None) -> tuple[TaskFile, list[TaskSpec]]:
    file_part, _, suite = tasks.partition(":")
    if file_part.endswith((".yaml", ".yml")):
        task_file = read_task_file(file_part)
        return task_file, _suite(task_file, suite or "paper32", data_dir)
    task_file = read_task_file()
    suites = [*BUILTIN_SUITES, *task_file.suites]
    if tasks in suites:
        return task_file, _suite(task_file, tasks, data_dir)
    names = tasks_parts(tasks)
    if not names:
        raise UserError("--tasks is empty: give a tasks.yaml, a suite name, task names or a benchmark name")
    near = difflib.get_close_matches(names[0], suites, n=1) if len(names) == 1 else []
    if near and names[0] not in known_names() and task_file.spec(names[0]).custom is None:
        raise UserError(f"unknown suite or mteb task {names[0]!r} (did you mean the suite {near[0]}?)")
    specs: list[TaskSpec] = []
    for name in names:
        if name in suites:
            specs += _suite(task_file, name, data_dir)
        elif name not in known_names() and name in known_benchmarks() and task_file.spec(name).custom is None:
            specs += benchmark_specs(name, task_file)
        else:
            specs.append(task_file.spec(name))
    first: dict[str, TaskSpec] = {}  # a task named twice (by a benchmark and by name) runs once, as first named
    for spec in specs:
        first.setdefault(spec.name, spec)
    return task_file, list(first.values())


def tasks_parts(tasks: str) -> list[str]:
    """The names of a ``--tasks`` value, split at commas outside parentheses (``MTEB(eng, v2),STS12``: two)."""
    if tasks.strip() in known_benchmarks():
        return [tasks.strip()]
    # a comma is inside parentheses when the next parenthesis after it closes (benchmark names nest none)
    return [part.strip() for part in re.split(r",(?![^(]*\))", tasks) if part.strip()]


def benchmark_specs(name: str, task_file: TaskFile) -> list[TaskSpec]:
    """The tasks of mteb's benchmark ``name`` with its splits and subsets (``STS22.v2``: ``en`` only in
    ``MTEB(eng, v2)``); the task file's offline copy is used where it holds exactly those."""
    import mteb

    bench = mteb.get_benchmark(name)
    specs = []
    for task in bench.tasks:
        listed = task_file.spec(task.metadata.name)
        subsets = tuple(task.hf_subsets) if task.metadata.is_multilingual else None
        splits = tuple(task.eval_splits)
        specs.append(
            replace(
                listed,
                category=task.metadata.type,
                subsets=subsets,
                fast=None,
                splits=splits,
                benchmark=bench.name,
                local_copy=subsets == listed.subsets and splits == (task_file.split,),
            )
        )
    return specs


def _suite(task_file: TaskFile, suite: str, data_dir: Path | None) -> list[TaskSpec]:
    if suite == "paper32":
        return list(task_file.tasks)
    if suite == "paper32-fast":
        return [TaskSpec(t.fast, t.category, t.subsets) if t.fast else t for t in task_file.tasks]
    if suite == "offline":  # custom tasks are local by definition
        if data_dir is None and not any(t.custom for t in task_file.tasks):
            raise UserError(f"the 'offline' suite needs a data folder: --data-dir DIR or ${DATA_DIR_ENV}")
        present = [t for t in task_file.tasks if t.custom or (data_dir is not None and (data_dir / t.name).is_dir())]
        if not present:
            raise UserError(f"no task of the task file has a folder in {data_dir}")
        return present
    if suite not in task_file.suites:
        if any(t.name == suite for t in task_file.tasks):  # FILE.yaml:TASK, one task of the file
            return [task_file.spec(suite)]
        suites = [*BUILTIN_SUITES, *task_file.suites]
        near = difflib.get_close_matches(suite, [*suites, *(t.name for t in task_file.tasks)], n=1)
        hint = f" (did you mean {near[0]}?)" if near else ""
        raise UserError(f"unknown suite {suite!r}{hint}; known suites: {', '.join(suites)} (or a task of the file)")
    return [task_file.spec(name) for name in task_file.suites[suite]]


def note_data_read(folder: Path) -> None:
    """Name the data folder nothing named (the one beside the checkout) in one WARNING when first read."""
    if folder in _implicit and folder not in _announced:
        _announced.add(folder)
        hint = f"--data-dir or ${DATA_DIR_ENV} to choose another"
        logger.warning("data folder: %s (beside the checkout; %s)", folder, hint)


def load_task(spec: TaskSpec, split: str = "test", data_dir: Path | None = None):
    """The mteb task for ``spec`` on ``split`` (a benchmark's: its own) and the paper's or benchmark's subsets.

    Local or embedded data (:func:`task_data`) and a custom task's files come loaded, so mteb neither loads nor
    unloads them.
    """
    origin, folder = task_data(spec, data_dir)
    if origin.startswith("local"):
        note_data_read(data_dir)
    if spec.custom is not None:  # read now, as local data is: a bad file fails before any model loads
        task = task_class(spec.custom)()
        task.load_data()
        return task
    import mteb

    splits = list(spec.splits or [split])
    try:
        task = mteb.get_task(spec.name, eval_splits=splits, hf_subsets=list(spec.subsets) if spec.subsets else None)
    except KeyError:
        raise UserError(unknown_tasks_message([spec.name], known_names())) from None
    if folder is not None:
        load_local_data(task, folder, spec)
    return task


def task_data(spec: TaskSpec, data_dir: Path | None) -> tuple[str, Path | None]:
    """(origin, folder) of ``spec``'s data, the one precedence every command follows: the data folder's copy
    (``local``, or ``local-partial`` where ``tasks.yaml`` says it differs from mteb's), else the hub (``hub``), else,
    offline, the packaged copy (``embedded``); a custom task reads its own files (``custom``)."""
    if spec.custom is not None:
        return "custom", None
    if not spec.local_copy:  # a benchmark asks other subsets or splits than a local copy holds
        return "hub", None
    if data_dir is not None and (data_dir / spec.name).is_dir():
        return ("local-partial" if spec.partial else "local"), data_dir / spec.name
    embedded = EMBEDDED_DATA_DIR / spec.name
    if hub_offline() and embedded.is_dir():
        return "embedded", embedded
    return "hub", None


def unavailable_message(names: Sequence[str], data_dir: Path | None, n_others: int = 0) -> str:
    """The one line for tasks neither the data folder nor the hub can give, naming the fixes (and
    ``--skip-unavailable`` when other tasks would run)."""
    where = f"in {data_dir}" if data_dir is not None else "(no --data-dir / $LAYER_MTEB_DATA)"
    others = f", or --skip-unavailable to run the other {n_others}" if n_others else ""
    return (
        f"{offline_reason()} and {len(names)} task(s) have no local copy {where}: {', '.join(names)}; "
        "give a data folder holding a folder per task (--data-dir DIR or $LAYER_MTEB_DATA), "
        f"or {online_advice()} (the package ships the data of the demo suite only){others}"
    )


def check_available(specs: Sequence[TaskSpec], data_dir: Path | None) -> None:
    """Every task of ``specs`` has data to load: a copy (local, shipped, a custom task's files) or the hub answering;
    else one :class:`UserError` naming them all, before anything asks the hub (which would retry, then fail)."""
    from_hub = [spec.name for spec in specs if task_data(spec, data_dir)[0] == "hub"]
    if from_hub and hub_offline():
        raise UserError(unavailable_message(from_hub, data_dir))


def load_task_data(task) -> None:
    """Load a task's data where :func:`load_task` left it to mteb (the hub's); the hub failing is one
    :class:`UserError` saying where else the data can come from."""
    if task.data_loaded:
        return
    try:
        task.load_data()
    except (OSError, ConnectionError, ValueError) as err:
        name = task.metadata.name
        shipped = " or HF_HUB_OFFLINE=1 for the copy the package ships" if (EMBEDDED_DATA_DIR / name).is_dir() else ""
        raise UserError(
            f"cannot load task {name!r} from the hub ({first_line(err)}); pass --data-dir DIR holding {name}/{shipped}"
        ) from None


def embedded_tasks() -> list[str]:
    """The tasks whose data ships in the package (:data:`EMBEDDED_DATA_DIR`), sorted."""
    return sorted(folder.name for folder in EMBEDDED_DATA_DIR.iterdir() if folder.is_dir())


def task_type(name: str) -> str | None:
    """mteb's type of task ``name`` (``STS``, ...), or ``None`` for a name mteb dropped; any other failure propagates,
    as the type decides the ``auto`` policy's rules."""
    task = _known_task(name)
    return None if task is None else task.metadata.type


def subtask_names(name: str) -> list[str]:
    """The subtasks of mteb aggregate task ``name`` (``CQADupstackRetrieval``: 12 forums); else empty."""
    task = _known_task(name)
    if task is None or not getattr(task, "is_aggregate", False):
        return []
    return [part.metadata.name for part in task.metadata.tasks]


def _known_task(name: str):
    """mteb's task called ``name``, ``None`` only for a name mteb does not know (:func:`task_type`)."""
    import mteb

    try:
        return mteb.get_task(name)
    except KeyError:
        if name in known_names():  # a known task failing to build is not an unknown name
            raise
        return None


def load_named_task(name: str, data_dir: str | Path | None = None):
    """The one mteb task ``name`` names (an mteb task, or ``FILE.yaml:TASK`` for a task a file declares), as
    ``layer-mteb run`` loads it; a suite, or a task with no copy while the hub is offline, is refused."""
    folder = data_dir_from_env(data_dir)
    if file_task(name) is None:
        task_file = read_task_file()
        spec = task_file.spec(name)
        task = load_task(spec, task_file.split, folder)  # an unknown name is named as such first
        check_available([spec], folder)
        return task
    task_file, specs = select_tasks(name, folder)
    if len(specs) != 1 or specs[0].name != file_task(name):
        raise UserError(f"{name!r} names a suite; name one task of the file: FILE.yaml:TASK")
    return load_task(specs[0], task_file.split, folder)


def load_tasks(tasks: str, data_dir: str | Path | None = None) -> list:
    """The mteb tasks of a ``--tasks`` value as ``layer-mteb run`` scores them, ready for ``mteb.evaluate``; with the
    hub unreachable, a task without a copy is one :class:`UserError` now, not mteb's traceback in the evaluation."""
    folder = data_dir_from_env(data_dir)
    task_file, specs = select_tasks(tasks, folder)
    check_available(specs, folder)
    return [load_task(spec, task_file.split, folder) for spec in specs]
