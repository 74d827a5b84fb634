"""The package's layout is its pipeline: no module imports another that (directly or through others) imports it back.
The one-way order of the stages themselves is the import-linter contract in pyproject.toml (``lint-imports``)."""

from __future__ import annotations

import grimp


def _cycles(graph: grimp.ImportGraph) -> list[list[str]]:
    """Strongly connected groups of more than one module (Tarjan's algorithm, iteratively)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(root: str) -> None:
        work = [(root, iter(sorted(graph.find_modules_directly_imported_by(root))))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = len(index)
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(graph.find_modules_directly_imported_by(child)))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                group = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    group.append(member)
                    if member == node:
                        break
                if len(group) > 1:
                    found.append(sorted(group))

    for module in sorted(graph.modules):
        if module not in index:
            visit(module)
    return found


def test_no_module_imports_itself_back():
    graph = grimp.build_graph("layer_mteb")
    # the package root names its public API lazily (PEP 562) and imports its stages only for type checkers
    graph.remove_module("layer_mteb")
    assert _cycles(graph) == []


def test_the_cycle_finder_finds_a_cycle():
    graph = grimp.ImportGraph()
    for module in ("pkg", "pkg.a", "pkg.b", "pkg.c"):
        graph.add_module(module)
    graph.add_import(importer="pkg.a", imported="pkg.b")
    graph.add_import(importer="pkg.b", imported="pkg.a")
    graph.add_import(importer="pkg.b", imported="pkg.c")
    assert _cycles(graph) == [["pkg.a", "pkg.b"]]


def test_the_module_map_names_every_module():
    """docs/design.md's module map lists every module of every stage, in that stage's rows."""
    import re

    from conftest import REPO

    rows: dict[str, str] = {}
    stage = ""
    for line in (REPO / "docs" / "design.md").read_text().splitlines():
        cells = [cell.strip() for cell in line.strip().strip("|").split("|")]
        if len(cells) != 3 or not line.startswith("|"):
            continue
        stage = cells[0].strip("`/") or stage
        rows[stage] = rows.get(stage, "") + cells[1]
    missing = []
    for path in sorted((REPO / "layer_mteb").glob("*/*.py")):
        if path.name in {"__init__.py", "__main__.py"}:
            continue
        if not re.search(rf"`{re.escape(path.name)}`", rows.get(path.parent.name, "")):
            missing.append(f"{path.parent.name}/{path.name}")
    assert missing == []
