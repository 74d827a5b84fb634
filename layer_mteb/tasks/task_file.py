"""What a task file (``tasks.yaml`` or a user's) says: its tasks (``TaskSpec``), split and suites (``TaskFile``), and
its ``custom:`` tasks (type, files, columns), each schema mistake one line naming the file and entry."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from layer_mteb.common.errors import UserError
from layer_mteb.tasks.task_types import RETRIEVAL_PARTS, ROWS, TASK_TYPES, TaskType

#: the task types a custom task may have (mteb's ``TaskMetadata.type`` spelling): those whose row says how
CUSTOM_TYPES = tuple(name for name, kind in TASK_TYPES.items() if kind.custom is not None)
#: every evaluator setting some custom type may change (each type's own: its row's ``custom.settings``)
_ALL_SETTINGS = {key for kind in TASK_TYPES.values() if kind.custom is not None for key in kind.custom.settings}
KEYS = {"name", "type", "files", "columns", "description", "language", *_ALL_SETTINGS}


@dataclass(frozen=True)
class CustomTask:
    """One declared task: ``files`` maps a split (or, for retrieval, ``corpus``/``queries``/``qrels``) to its file;
    ``columns`` maps each file kind (``rows`` for split files) to {role: column}; ``source`` is the task file."""

    name: str
    type: str
    files: dict[str, Path]
    columns: dict[str, dict[str, str | None]]
    source: Path
    split: str = "test"
    description: str = ""
    language: str = "eng-Latn"
    settings: dict[str, int | float] = field(default_factory=dict)

    @property
    def type_row(self) -> TaskType:
        """The row of its type in :data:`~layer_mteb.tasks.task_types.TASK_TYPES`."""
        return TASK_TYPES[self.type]

    @property
    def retrieval(self) -> bool:
        return self.type_row.searched

    def file_kind(self, key: str) -> str:
        """Which ``columns`` entry a file of ``files`` is read with."""
        return key if self.retrieval else ROWS

    @property
    def where(self) -> str:
        return f"{self.source}: custom task {self.name!r}"


@dataclass(frozen=True)
class TaskSpec:
    """One task as ``tasks.yaml`` lists it (``custom``: a task mteb does not know; ``benchmark``: its own splits)."""

    name: str
    category: str = ""
    subsets: tuple[str, ...] | None = None
    fast: str | None = None
    local_files: dict[str, tuple[str, ...]] = field(default_factory=dict)
    partial: str | None = None
    custom: CustomTask | None = None
    splits: tuple[str, ...] | None = None
    benchmark: str | None = None
    #: whether a local copy may serve it: not where a benchmark asks other subsets or splits than the file's entry
    local_copy: bool = True


@dataclass(frozen=True)
class TaskFile:
    """A task file's evaluation split, tasks and suites."""

    split: str
    tasks: tuple[TaskSpec, ...]
    suites: dict[str, tuple[str, ...]]

    def spec(self, name: str) -> TaskSpec:
        """The file's entry for ``name``, or a bare one."""
        return next((t for t in self.tasks if t.name == name), TaskSpec(name))


def parse_custom(where: str, entry: Any, source: Path, split: str) -> CustomTask:
    """One entry of ``custom:`` (``where``: its position; file paths are relative to ``source``'s folder)."""
    if not isinstance(entry, dict) or not isinstance(entry.get("name"), str) or not entry["name"].strip():
        raise UserError(f"{where}: every custom task needs a 'name:' (got {entry!r})")
    name = entry["name"]
    if unknown := set(entry) - KEYS:
        raise UserError(f"{where}: custom task {name!r} has unknown keys {sorted(unknown)}; known: {sorted(KEYS)}")
    kind = entry.get("type")
    if kind not in CUSTOM_TYPES:
        raise UserError(f"{where}: custom task {name!r} needs 'type:' one of {', '.join(CUSTOM_TYPES)} (got {kind!r})")
    return CustomTask(
        name=name,
        type=kind,
        files=_files(where, name, kind, entry.get("files"), source.parent, split),
        columns=_columns(where, name, kind, entry.get("columns")),
        source=source,
        split=split,
        description=_text(where, name, entry, "description", f"{kind} task {name} declared in {source.name}"),
        language=_text(where, name, entry, "language", "eng-Latn"),
        settings=_settings(where, name, kind, entry),
    )


def _files(where: str, name: str, kind: str, files: Any, folder: Path, split: str) -> dict[str, Path]:
    """``files:`` as {split or part: path}, paths resolved against the task file's folder."""
    if not isinstance(files, dict) or not files or not all(isinstance(v, str) and v for v in files.values()):
        raise UserError(f"{where}: custom task {name!r} needs 'files:' mapping each split to one file path")
    if TASK_TYPES[kind].searched:
        if set(files) != set(RETRIEVAL_PARTS):
            raise UserError(
                f"{where}: {kind} task {name!r} needs 'files:' with exactly corpus, queries and qrels "
                f"(the {split!r} split's), got {sorted(files)}"
            )
    elif split not in files:
        raise UserError(f"{where}: custom task {name!r} has no file for the evaluation split {split!r}")
    elif TASK_TYPES[kind].fits_on_train and "train" not in files:
        raise UserError(
            f"{where}: {kind} task {name!r} has no 'train' file: mteb fits its classifier on a train "
            "split; add one under 'files:'"
        )
    return {str(key): folder / value for key, value in files.items()}


def _columns(where: str, name: str, kind: str, given: Any) -> dict[str, dict[str, str | None]]:
    """The defaults of the type with the names ``columns:`` gives (flat for split files, per file for retrieval)."""
    searched = TASK_TYPES[kind].searched
    defaults = TASK_TYPES[kind].file_roles
    given = given or {}
    if not isinstance(given, dict):
        raise UserError(f"{where}: 'columns:' of custom task {name!r} must map roles to column names")
    nested = given if searched else {ROWS: given}
    columns: dict[str, dict[str, str | None]] = {}
    for part, roles in defaults.items():
        chosen = nested.get(part) or {}
        unknown = set(chosen) - set(roles) if isinstance(chosen, dict) else None
        if unknown is None or unknown or not all(isinstance(v, str) and v for v in chosen.values()):
            label = f"columns of {part!r}" if searched else "columns"
            raise UserError(
                f"{where}: {label} of custom task {name!r} must map roles {sorted(roles)} to column names "
                f"(got {chosen!r})"
            )
        columns[part] = {**roles, **chosen}
    extra = set(nested) - set(defaults)
    if extra:
        raise UserError(f"{where}: 'columns:' of {kind} task {name!r} has unknown parts {sorted(extra)}")
    return columns


def _text(where: str, name: str, entry: dict, key: str, default: str) -> str:
    value = entry.get(key, default)
    if not isinstance(value, str) or not value.strip():
        raise UserError(f"{where}: '{key}:' of custom task {name!r} must be a non-empty string")
    return value


def _settings(where: str, name: str, kind: str, entry: dict) -> dict[str, int | float]:
    allowed = TASK_TYPES[kind].custom.settings
    settings: dict[str, int | float] = {}
    for key in set(entry) & _ALL_SETTINGS:
        value = entry[key]
        if key not in allowed:
            raise UserError(f"{where}: '{key}:' does not apply to {kind} task {name!r}")
        if isinstance(value, bool) or not isinstance(value, allowed[key] | int) or (allowed[key] is int and value < 1):
            kind = "whole number of at least 1" if allowed[key] is int else "number"
            raise UserError(f"{where}: '{key}:' of custom task {name!r} must be a {kind} (got {value!r})")
        settings[key] = allowed[key](value)
    return settings
