"""How many of the package's files one command passes through, and how often it comes back to a file already left.

The measure of how far a reader must jump to follow a command's arguments through the code. It runs one
``layer-mteb`` command in this process under a profile hook that watches only the package's own functions (module
bodies, i.e. imports, are not followed): the sequence of files that the innermost package function is in, with
consecutive repeats folded. *Files* is the number of distinct files in that sequence; *comes back* counts each step
from one file into another that already stood earlier in the sequence, each such (from, to) step once however often
a loop repeats it (a return to a caller's file counts, as a reader jumps back there too). *By calls* counts only the
steps made by a call (a function in one file calling into a file already left), the jumps a reader makes while
reading downwards; returns to a caller are left out.

usage: python scripts/trace_files.py select --run results/smollm2-135m [--show]
"""

from __future__ import annotations

import sys
from pathlib import Path
from types import FrameType

PACKAGE = str(Path(__file__).resolve().parents[1] / "layer_mteb")


def _innermost(frame: FrameType | None) -> str | None:
    """The file of the innermost package function on the stack from ``frame`` up, module bodies skipped."""
    while frame is not None:
        code = frame.f_code
        if code.co_filename.startswith(PACKAGE) and code.co_name != "<module>":
            return code.co_filename
        frame = frame.f_back
    return None


def trace(argv: list[str]) -> list[tuple[str, str]]:
    """The folded sequence of (package file, "call" or "return") that ``layer-mteb argv`` passes through."""
    from layer_mteb.cli import main

    sequence: list[tuple[str, str]] = []

    def hook(frame: FrameType, event: str, _arg: object) -> None:
        if event == "call":
            where = _innermost(frame)
        elif event == "return":
            where = _innermost(frame.f_back)
        else:
            return
        if where is not None and (not sequence or sequence[-1][0] != where):
            sequence.append((where, event))

    sys.setprofile(hook)
    try:
        main(argv)
    except SystemExit:
        pass
    finally:
        sys.setprofile(None)
    return [(str(Path(f).relative_to(Path(PACKAGE).parent)), event) for f, event in sequence]


def main_() -> None:
    args = sys.argv[1:]
    show = "--show" in args
    args = [a for a in args if a != "--show"]
    sequence = trace(args)
    seen: set[str] = set()
    back_steps: set[tuple[str, str]] = set()
    back_calls: set[tuple[str, str]] = set()
    names = [name for name, _ in sequence]
    for before, (name, event) in zip(["<cli>", *names[:-1]], sequence, strict=True):
        if name in seen:
            back_steps.add((before, name))
            if event == "call":
                back_calls.add((before, name))
        seen.add(name)
    if show:
        print("\n".join(f"{event:6} {name}" for name, event in sequence))
    print(
        f"layer-mteb {' '.join(args)}: {len(seen)} files, comes back {len(back_steps)} times "
        f"({len(back_calls)} by calls)",
        file=sys.stderr,
    )


if __name__ == "__main__":
    main_()
