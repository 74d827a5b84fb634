"""What ``tasks.yaml`` says about a task and a task file: plain records, read by the catalog, the local-data reader
and the custom-task builder alike."""

from __future__ import annotations

from dataclasses import dataclass, field

from layer_mteb.tasks.custom_schema import CustomTask


@dataclass(frozen=True)
class TaskSpec:
    """One task as ``tasks.yaml`` lists it; ``custom`` is the declaration of a task mteb does not know."""

    name: str
    category: str = ""
    subsets: tuple[str, ...] | None = None
    fast: str | None = None
    local_files: dict[str, tuple[str, ...]] = field(default_factory=dict)
    partial: str | None = None
    custom: CustomTask | None = None


@dataclass(frozen=True)
class TaskFile:
    split: str
    tasks: tuple[TaskSpec, ...]
    suites: dict[str, tuple[str, ...]]

    def spec(self, name: str) -> TaskSpec:
        return next((t for t in self.tasks if t.name == name), TaskSpec(name))
