"""Write ``layer_mteb/tasks/mteb_tasks.txt`` and ``mteb_benchmarks.txt``: every task name and every benchmark name
(aliases too) the installed mteb accepts, each file headed by its version.

The command line checks ``--tasks`` against this list without importing mteb; with another mteb version installed
it asks mteb instead, so rerun this after upgrading mteb (``tests/test_task_names.py`` fails until then).
Usage: python scripts/mteb_task_names.py
"""

from __future__ import annotations

from layer_mteb.tasks.task_names import (
    BENCHMARKS_FILE,
    BENCHMARKS_HEADER,
    HEADER,
    NAMES_FILE,
    installed_mteb,
    mteb_benchmark_names,
    mteb_task_names,
)


def main() -> None:
    for path, header, names in (
        (NAMES_FILE, HEADER, mteb_task_names()),
        (BENCHMARKS_FILE, BENCHMARKS_HEADER, mteb_benchmark_names()),
    ):
        path.write_text("\n".join([f"{header}{installed_mteb()}", *names]) + "\n", encoding="utf-8")
        print(f"wrote {len(names)} names of mteb {installed_mteb()} to {path}")


if __name__ == "__main__":
    main()
