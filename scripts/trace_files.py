"""How many of the package's files one command passes through, and how often it comes back to a file already left.

The measure of how far a reader must jump to follow a command's arguments through the code. It runs one
``layer-mteb`` command in this process under a profile hook that watches only the package's own functions: the
sequence of files that the innermost package function is in, with consecutive repeats folded. *Files* is the number
of distinct files in that sequence; *comes back* counts each step from one file into another that already stood
earlier in the sequence, each such (from, to) step once however often a loop repeats it (a return to a caller's file
counts, as a reader jumps back there too). *By calls* counts only the steps made by a call (a function in one file
calling into a file already left), the jumps a reader makes while reading downwards; returns to a caller are left out.

What a reader does not jump to is not followed (``--all`` follows it, as this script did before): module and class
bodies (they run on import, not as a step of the command), and lambdas, generator expressions and comprehensions
(read where they are written: a callback such as ``atomic_write(path, lambda tmp: ...)`` or a logging filter runs
inside another file's function, yet the reader read it at the call that handed it over).

usage: python scripts/trace_files.py select --run results/smollm2-135m [--show] [--all]
(the package traced is the one Python imports: set PYTHONPATH to trace another checkout)
"""

from __future__ import annotations

import inspect
import sys
from pathlib import Path
from types import CodeType, FrameType

#: code that runs inside another function without a reader going there (see the module docstring)
WRITTEN_IN_PLACE = ("<lambda>", "<genexpr>", "<listcomp>", "<dictcomp>", "<setcomp>")


def _followed(code: CodeType, package: str, every: bool) -> bool:
    if not code.co_filename.startswith(package) or code.co_name == "<module>":
        return False
    if every:
        return True
    is_function = bool(code.co_flags & inspect.CO_NEWLOCALS)  # module and class bodies run in their namespace
    return is_function and code.co_name not in WRITTEN_IN_PLACE


def _innermost(frame: FrameType | None, package: str, every: bool) -> str | None:
    """The file of the innermost followed package function on the stack from ``frame`` up."""
    while frame is not None:
        if _followed(frame.f_code, package, every):
            return frame.f_code.co_filename
        frame = frame.f_back
    return None


def trace(argv: list[str], every: bool = False) -> list[tuple[str, str]]:
    """The folded sequence of (package file, "call" or "return") that ``layer-mteb argv`` passes through."""
    import layer_mteb
    from layer_mteb.cli import main

    package = str(Path(layer_mteb.__file__).parent)
    sequence: list[tuple[str, str]] = []

    def hook(frame: FrameType, event: str, _arg: object) -> None:
        if event == "call":
            where = _innermost(frame, package, every)
        elif event == "return":
            where = _innermost(frame.f_back, package, every)
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
    return [(str(Path(f).relative_to(Path(package).parent)), event) for f, event in sequence]


def main_() -> None:
    args = sys.argv[1:]
    show, every = "--show" in args, "--all" in args
    args = [a for a in args if a not in ("--show", "--all")]
    sequence = trace(args, every)
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
        f"({len(back_calls)} by calls)" + (" [--all]" if every else ""),
        file=sys.stderr,
    )


if __name__ == "__main__":
    main_()
