"""The package's layout is its pipeline: no module imports another that (directly or through others) imports it back,
every module sits in one layer of the import-linter contract in pyproject.toml (whose one-way order ``lint-imports``
checks). The cycle check is shown to fail on a cycle planted in the real graph."""

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


def _package_graph() -> grimp.ImportGraph:
    return grimp.build_graph("layer_mteb")


def test_no_module_imports_itself_back():
    graph = _package_graph()
    assert len(graph.modules) >= 90, "the graph must hold the whole package, the root included"
    assert _cycles(graph) == []


def test_a_planted_cycle_in_the_real_package_is_found():
    """The same check on the real graph with one upward import added fails, naming the modules of the cycle."""
    graph = _package_graph()
    graph.add_import(importer="layer_mteb.common.errors", imported="layer_mteb.cli.main")
    cycles = _cycles(graph)
    assert len(cycles) == 1
    assert {"layer_mteb.common.errors", "layer_mteb.cli.main"} <= set(cycles[0])


def test_the_cycle_finder_finds_a_cycle():
    graph = grimp.ImportGraph()
    for module in ("pkg", "pkg.a", "pkg.b", "pkg.c"):
        graph.add_module(module)
    graph.add_import(importer="pkg.a", imported="pkg.b")
    graph.add_import(importer="pkg.b", imported="pkg.a")
    graph.add_import(importer="pkg.b", imported="pkg.c")
    assert _cycles(graph) == [["pkg.a", "pkg.b"]]


def test_every_module_is_under_the_layer_contract():
    """Each module belongs to one layer of the import-linter contract; the root package stands above them, and a
    package that only holds layers (``analysis``) imports nothing."""
    import tomllib
    from conftest import REPO

    contract = tomllib.loads((REPO / "pyproject.toml").read_text())["tool"]["importlinter"]["contracts"][0]
    layers = [name.strip() for layer in contract["layers"] for name in layer.split("|")]
    graph = _package_graph()
    holders = {lay.rsplit(".", 1)[0] for lay in layers} - {"layer_mteb"}
    outside = [
        module
        for module in sorted(graph.modules - holders - {"layer_mteb"})
        if not any(module == lay or module.startswith(lay + ".") for lay in layers)
    ]
    assert outside == []
    assert holders == {"layer_mteb.analysis"}
    assert graph.find_modules_directly_imported_by("layer_mteb.analysis") == set()


def test_no_public_name_is_also_a_submodule():
    """A lazily exported name that is also a submodule's name would be replaced by the module once it is imported."""
    import pkgutil

    import layer_mteb

    submodules = {info.name for info in pkgutil.iter_modules(layer_mteb.__path__)}
    assert set(layer_mteb._HOMES) & submodules == set()


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
    for path in sorted((REPO / "layer_mteb").rglob("*.py")):
        stage = str(path.parent.relative_to(REPO / "layer_mteb"))
        if path.name in {"__init__.py", "__main__.py"} or stage == ".":
            continue
        if not re.search(rf"`{re.escape(path.name)}`", rows.get(stage, "")):
            missing.append(f"{stage}/{path.name}")
    assert missing == []


def test_no_two_modules_share_a_name():
    """A module's file name says its job in the whole package: two ``select.py`` (a command and the selection engine)
    leave a reader and a traceback guessing which one is meant."""
    from collections import Counter

    from conftest import REPO

    names = Counter(path.name for path in (REPO / "layer_mteb").rglob("*.py"))
    assert {name for name, count in names.items() if count > 1} <= {"__init__.py"}


def test_functions_stay_short():
    """No function over 60 lines: a newcomer reads each in one sitting. Modules are sized by their job, not capped."""
    import ast

    from conftest import REPO

    long = []
    for path in sorted((REPO / "layer_mteb").rglob("*.py")):
        source = path.read_text()
        for node in ast.walk(ast.parse(source)):
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef) and node.end_lineno - node.lineno >= 60:
                long.append(f"{path.relative_to(REPO)}:{node.lineno} {node.name}: {node.end_lineno - node.lineno + 1}")
    assert long == []
