"""Write ``layer_mteb/tasks/mteb_tasks.txt``: every task name the installed mteb accepts, headed by its version.

The command line checks ``--tasks`` against this list without importing mteb; with another mteb version installed
it asks mteb instead, so rerun this after upgrading mteb (``tests/test_task_names.py`` fails until then).
Usage: python scripts/mteb_task_names.py
"""

from __future__ import annotations

from layer_mteb.tasks.task_names import HEADER, NAMES_FILE, installed_mteb, mteb_task_names


def main() -> None:
    names = mteb_task_names()
    NAMES_FILE.write_text("\n".join([f"{HEADER}{installed_mteb()}", *names]) + "\n", encoding="utf-8")
    print(f"wrote {len(names)} task names of mteb {installed_mteb()} to {NAMES_FILE}")


if __name__ == "__main__":
    main()
