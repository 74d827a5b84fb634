"""How many lines of code the package holds, its docstrings and comments left out.

The measure the package's size is judged by: a line counts when it holds a token of code. Docstrings (the first
string of a module, class or function, found with ``ast``) and comments (found with ``tokenize``) are documentation,
not code, so writing them never costs against the size; blank lines count for nothing either.

usage: python scripts/count_lines.py [FOLDER ...]   (default: layer_mteb; one line per folder, then the total)
"""

from __future__ import annotations

import ast
import io
import sys
import tokenize
from pathlib import Path

#: tokens that are not code: layout and comments
NOT_CODE = {
    tokenize.COMMENT,
    tokenize.NL,
    tokenize.NEWLINE,
    tokenize.INDENT,
    tokenize.DEDENT,
    tokenize.ENCODING,
    tokenize.ENDMARKER,
}


def docstring_lines(tree: ast.Module) -> set[int]:
    """The lines of every module, class and function docstring."""
    lines: set[int] = set()
    for node in ast.walk(tree):
        if not isinstance(node, ast.Module | ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef):
            continue
        first = node.body[0] if node.body else None
        if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant) and isinstance(first.value.value, str):
            lines.update(range(first.lineno, first.end_lineno + 1))
    return lines


def code_lines(source: str) -> int:
    """Lines of ``source`` holding a code token outside its docstrings."""
    tokens = tokenize.generate_tokens(io.StringIO(source).readline)
    holding = {line for t in tokens if t.type not in NOT_CODE for line in range(t.start[0], t.end[0] + 1)}
    return len(holding - docstring_lines(ast.parse(source)))


def count(folder: Path) -> int:
    return sum(code_lines(path.read_text(encoding="utf-8")) for path in sorted(folder.rglob("*.py")))


def main(argv: list[str]) -> None:
    folders = [Path(arg) for arg in argv] or [Path("layer_mteb")]
    counts = {folder: count(folder) for folder in folders}
    for folder, lines in counts.items():
        print(f"{lines:7d}  {folder}")
    if len(counts) > 1:
        print(f"{sum(counts.values()):7d}  total")


if __name__ == "__main__":
    main(sys.argv[1:])
