"""Which names are mteb tasks and benchmarks, per the installed mteb's registry (not the project's catalog).

Importing mteb takes seconds, so ``mteb_tasks.txt`` (written by ``scripts/mteb_task_names.py``, headed by its mteb
version) ships the names: with that version installed a typo fails in milliseconds; with another, mteb is asked.
"""

from __future__ import annotations

import difflib
import logging
import warnings
from collections.abc import Iterable
from functools import cache
from importlib import metadata
from pathlib import Path

from layer_mteb.common.errors import UserError

NAMES_FILE = Path(__file__).with_name("mteb_tasks.txt")
HEADER = "# task names of mteb "
#: every name ``mteb.get_benchmark`` accepts (benchmark names and their aliases), written and read the same way
BENCHMARKS_FILE = Path(__file__).with_name("mteb_benchmarks.txt")
BENCHMARKS_HEADER = "# benchmark names of mteb "


def installed_mteb() -> str | None:
    """The installed mteb's version, read from its package metadata (no import)."""
    try:
        return metadata.version("mteb")
    except metadata.PackageNotFoundError:
        return None


@cache
def shipped_names() -> frozenset[str] | None:
    """The shipped task names when they were read from the installed mteb version, else None."""
    return _shipped(NAMES_FILE, HEADER)


def _shipped(path: Path, header: str) -> frozenset[str] | None:
    try:
        first, *names = path.read_text(encoding="utf-8").splitlines()
    except (OSError, ValueError):
        return None
    return frozenset(names) if first == f"{header}{installed_mteb()}" else None


def mteb_benchmark_names() -> list[str]:
    """Every name ``mteb.get_benchmark`` accepts (each benchmark's name and aliases), asked of mteb itself."""
    import mteb

    return sorted({name for bench in mteb.get_benchmarks() for name in (bench.name, *(bench.aliases or ()))})


@cache
def known_benchmarks() -> frozenset[str]:
    """The benchmark names mteb knows: the shipped list when it matches the installed mteb, else mteb's own."""
    shipped = _shipped(BENCHMARKS_FILE, BENCHMARKS_HEADER)
    return shipped if shipped is not None else frozenset(mteb_benchmark_names())


def mteb_task_names() -> list[str]:
    """Every name ``mteb.get_task`` accepts (superseded, private and beta tasks too), asked of mteb itself."""
    import mteb

    quiet = logging.getLogger("mteb")
    level = quiet.level
    quiet.setLevel(logging.ERROR)  # mteb logs a line for every beta task it builds
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            tasks = mteb.get_tasks(exclude_superseded=False, exclude_private=False, exclude_beta=False)
    finally:
        quiet.setLevel(level)
    return sorted({task.metadata.name for task in tasks})


def known_names() -> frozenset[str]:
    """The names mteb knows: the shipped list when it matches the installed mteb, else mteb's own."""
    shipped = shipped_names()
    return shipped if shipped is not None else frozenset(mteb_task_names())


def check_task_names(names: Iterable[str]) -> None:
    """One error naming every unknown task of ``names``, each with its close matches."""
    wanted = list(dict.fromkeys(names))
    known = known_names() if wanted else frozenset()  # no names: mteb is not imported
    unknown = [name for name in wanted if name not in known]
    if unknown:
        raise UserError(unknown_tasks_message(unknown, known, known_benchmarks()))


def unknown_tasks_message(unknown: list[str], known: Iterable[str], benchmarks: Iterable[str] = ()) -> str:
    """``unknown mteb task 'X' (did you mean Y?)``, several in one line; a name closer to a benchmark is offered
    it (``did you mean the benchmark MTEB(eng, v2)?``)."""
    choices, benches = sorted(known), sorted(benchmarks)
    parts = []
    for name in unknown:
        close = difflib.get_close_matches(name, choices, n=3)
        bench = difflib.get_close_matches(name, benches, n=1)
        if bench and (not close or _closeness(name, bench[0]) > _closeness(name, close[0])):
            parts.append(f"{name!r} (did you mean the benchmark {bench[0]}?)")
        else:
            parts.append(f"{name!r} (did you mean {', '.join(close)}?)" if close else repr(name))
    if len(parts) == 1:
        return f"unknown mteb task {parts[0]}"
    return f"{len(parts)} unknown mteb tasks: {', '.join(parts)}"


def _closeness(a: str, b: str) -> float:
    return difflib.SequenceMatcher(None, a, b).ratio()
