"""What ``tasks.yaml`` says about a task and a task file: plain records, read by the catalog and the local-data
reader alike."""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(frozen=True)
class TaskSpec:
    """One task as ``tasks.yaml`` lists it."""

    name: str
    category: str = ""
    subsets: tuple[str, ...] | None = None
    fast: str | None = None
    local_files: dict[str, tuple[str, ...]] = field(default_factory=dict)
    partial: str | None = None


@dataclass(frozen=True)
class TaskFile:
    split: str
    tasks: tuple[TaskSpec, ...]
    suites: dict[str, tuple[str, ...]]

    def spec(self, name: str) -> TaskSpec:
        return next((t for t in self.tasks if t.name == name), TaskSpec(name))
