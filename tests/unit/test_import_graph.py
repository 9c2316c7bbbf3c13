"""No import circles between the project's modules (auditlib, storage, flows).

The graph is read from the source with ``ast``, never by importing it. A module ``m`` depends on
``t`` when ``m`` holds

* ``import t`` (for ``import a.b.c`` the target is ``a.b.c``; its parent packages are loaded too,
  but a package's ``__init__`` re-exporting its own submodules is no circle, so they are not
  counted);
* ``from t import name``, or ``from p import t`` when ``p.t`` is a module (a submodule
  imported by name); relative imports are resolved against ``m``'s package.

Imports inside functions and methods count as well: they are deferred, not gone, and a circle
closed at call time fails just as one closed at import time (a partly initialised module, or a
layer that is no layer). They are marked ``deferred`` in the report. Imports under
``if TYPE_CHECKING:`` are left out: they never run.

A circle is a strongly connected component of more than one module; the test of a top package
fails when a circle touches one of its modules and prints a shortest cycle through it.
"""

from __future__ import annotations

import ast
import re
from collections import deque
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PACKAGES = ("auditlib", "storage", "flows")


@dataclass(frozen=True)
class Edge:
    source: str
    target: str
    line: int
    deferred: bool  # inside a function or method


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def project_modules() -> dict[str, Path]:
    """Dotted name -> file, for every module of the three top packages."""
    out: dict[str, Path] = {}
    for pkg in PACKAGES:
        for path in sorted((ROOT / pkg).rglob("*.py")):
            out[_module_name(path)] = path
    return out


def _is_type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def _imports(tree: ast.AST) -> list[tuple[ast.Import | ast.ImportFrom, bool]]:
    """Every import statement with whether it is inside a function; TYPE_CHECKING blocks skipped."""
    found: list[tuple[ast.Import | ast.ImportFrom, bool]] = []

    def visit(node: ast.AST, deferred: bool) -> None:
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            found.append((node, deferred))
            return
        if isinstance(node, ast.If) and _is_type_checking(node.test):
            for stmt in node.orelse:  # the `else:` branch does run
                visit(stmt, deferred)
            return
        inner = deferred or isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda))
        for child in ast.iter_child_nodes(node):
            visit(child, inner)

    visit(tree, False)
    return found


def _resolve(module: str, is_package: bool, level: int, name: str | None) -> str:
    """The absolute module named by ``from <level dots><name> import ...`` inside ``module``."""
    if level == 0:
        assert name is not None
        return name
    parts = module.split(".") if is_package else module.split(".")[:-1]
    if level > 1:
        parts = parts[: len(parts) - (level - 1)]
    return ".".join([*parts, name] if name else parts)


def import_edges(modules: dict[str, Path]) -> list[Edge]:
    edges: list[Edge] = []
    for mod, path in modules.items():
        tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
        is_package = path.name == "__init__.py"
        for node, deferred in _imports(tree):
            targets: list[str] = []
            if isinstance(node, ast.Import):
                targets = [alias.name for alias in node.names]
            else:
                base = _resolve(mod, is_package, node.level, node.module)
                for alias in node.names:
                    sub = f"{base}.{alias.name}"
                    targets.append(sub if sub in modules else base)
            for target in targets:
                if target in modules and target != mod:
                    edges.append(Edge(mod, target, node.lineno, deferred))
    return edges


def circles(modules: dict[str, Path], edges: list[Edge]) -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan, iterative)."""
    graph: dict[str, set[str]] = {m: set() for m in modules}
    for e in edges:
        graph[e.source].add(e.target)
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    on_stack: set[str] = set()
    stack: list[str] = []
    out: list[list[str]] = []
    counter = 0
    for root in sorted(graph):
        if root in index:
            continue
        work: list[tuple[str, list[str]]] = [(root, sorted(graph[root]))]
        index[root] = low[root] = counter
        counter += 1
        stack.append(root)
        on_stack.add(root)
        while work:
            node, todo = work[-1]
            if todo:
                nxt = todo.pop()
                if nxt not in index:
                    index[nxt] = low[nxt] = counter
                    counter += 1
                    stack.append(nxt)
                    on_stack.add(nxt)
                    work.append((nxt, sorted(graph[nxt])))
                elif nxt in on_stack:
                    low[node] = min(low[node], index[nxt])
                continue
            work.pop()
            if work:
                parent = work[-1][0]
                low[parent] = min(low[parent], low[node])
            if low[node] == index[node]:
                comp: list[str] = []
                while True:
                    m = stack.pop()
                    on_stack.discard(m)
                    comp.append(m)
                    if m == node:
                        break
                if len(comp) > 1:
                    out.append(sorted(comp))
    return out


def shortest_cycle(start: str, members: set[str], edges: list[Edge]) -> list[Edge]:
    """A shortest cycle start -> ... -> start inside one component (breadth-first)."""
    out_edges: dict[str, list[Edge]] = {}
    for e in edges:
        if e.source in members and e.target in members:
            out_edges.setdefault(e.source, []).append(e)
    came: dict[str, Edge] = {}
    queue = deque([start])
    seen = {start}
    while queue:
        node = queue.popleft()
        for e in sorted(out_edges.get(node, []), key=lambda e: (e.target, e.line)):
            if e.target == start:
                path = [e]
                while path[0].source != start:
                    path.insert(0, came[path[0].source])
                return path
            if e.target not in seen:
                seen.add(e.target)
                came[e.target] = e
                queue.append(e.target)
    raise AssertionError(f"{start} is on no cycle of {sorted(members)}")


def describe(comp: list[str], edges: list[Edge]) -> str:
    cycle = shortest_cycle(comp[0], set(comp), edges)
    steps = "\n".join(
        f"    {e.source} -> {e.target}  (line {e.line}{', deferred' if e.deferred else ''})"
        for e in cycle
    )
    deferred = sum(e.deferred for e in edges if e.source in comp and e.target in comp)
    return (
        f"  circle of {len(comp)} modules: {', '.join(comp)}\n"
        f"  ({deferred} of its imports are deferred, inside functions); a shortest cycle:\n{steps}"
    )


def test_the_graph_is_read() -> None:
    """The reader finds known edges of each kind (module-level, deferred, relative, submodule)."""
    modules = project_modules()
    edges = import_edges(modules)
    pairs = {(e.source, e.target) for e in edges}
    assert {"auditlib", "storage", "flows"} <= set(modules)
    assert ("auditlib.mpl", "auditlib.mpl.hockey") in pairs  # the package re-exports
    assert ("flows.audit.tasks", "auditlib.mpl.audit") in pairs
    assert any(e.deferred for e in edges)  # imports inside functions are read
    # `from pkg import submodule` points at the submodule, not the package
    assert _resolve("auditlib.mpl.hockey", False, 1, None) == "auditlib.mpl"
    assert _resolve("auditlib.mpl", True, 2, "epl") == "auditlib.epl"
    # every module of the three packages appears in the graph
    assert len(modules) > 50


def test_circles_are_found() -> None:
    """The detector itself: a two-module circle through a deferred import is reported."""
    mods = {"a": Path("a.py"), "b": Path("b.py"), "c": Path("c.py")}
    edges = [Edge("a", "b", 1, False), Edge("b", "a", 9, True), Edge("b", "c", 2, False)]
    assert circles(mods, edges) == [["a", "b"]]
    assert [(e.source, e.target) for e in shortest_cycle("a", {"a", "b"}, edges)] == [
        ("a", "b"),
        ("b", "a"),
    ]
    assert circles(mods, edges[:1] + edges[2:]) == []


@pytest.mark.parametrize("package", PACKAGES)
def test_no_import_circles(package: str) -> None:
    modules = project_modules()
    edges = import_edges(modules)
    found = [c for c in circles(modules, edges) if any(m.split(".")[0] == package for m in c)]
    assert not found, f"import circles touching {package}:\n" + "\n".join(
        describe(c, edges) for c in found
    )


#: a test of which release kind a plan is: its kind's name compared, a kind's parameter slot
#: tested for None or truth, the geometric flag. The kinds are strategies (``flows.releases``);
#: the rest of ``flows`` asks ``plan.strategy`` instead.
_SLOTS = r"(?:release|topdown|production|table_hierarchy|flaxman|table|spine)"
RELEASE_KIND_TEST = re.compile(
    rf"plan\.{_SLOTS}\s*(?:is\b|==|!=|\bin\b)"
    rf"|\b(?:if|elif|and|or|not)\s+plan\.{_SLOTS}\s*(?::|\band\b|\bor\b|\belse\b|\))"
    r"|plan\.geometric\b"
    r"|\.release\s*(?:==|!=|in\s*\()"
)
#: the packages that may test the kind: the strategies themselves, and the report (a store's)
KIND_TESTS_ALLOWED = ("flows/releases/", "flows/report/")


def release_kind_tests(source: str) -> list[tuple[int, str]]:
    """(line number, line) of every release-kind test in ``source``."""
    return [
        (i, line.strip())
        for i, line in enumerate(source.splitlines(), start=1)
        if RELEASE_KIND_TEST.search(line)
    ]


def test_the_release_kind_test_is_found() -> None:
    """The pattern finds the tests the strategies replaced, and not the data a kind reads."""
    for line in (
        'if plan.release == "observed":',
        "elif plan.topdown is not None:",
        "if plan.production is None",
        'plan.release in ("sa3", "sa4")',
        "allocation_release = not plan.geometric",
        "if plan.spine:",
        "counts = plan.table.counts if plan.table is not None else ()",
    ):
        assert release_kind_tests(line), line
    for line in ("td = plan.topdown", "sch = schema(plan.topdown.schema)", "plan.strategy.kind"):
        assert not release_kind_tests(line), line


def test_only_the_strategies_test_the_release_kind() -> None:
    """No module of ``flows`` outside ``flows/releases`` (and the report) tests which release kind
    a plan is: the kinds are :class:`flows.releases.Release` strategies, asked instead."""
    found = []
    for path in sorted((ROOT / "flows").rglob("*.py")):
        rel = path.relative_to(ROOT).as_posix()
        if rel.startswith(KIND_TESTS_ALLOWED):
            continue
        found += [f"  {rel}:{i}: {line}" for i, line in release_kind_tests(path.read_text())]
    assert not found, "release-kind tests outside flows/releases:\n" + "\n".join(found)


#: the most lines a module outside ``benchmarks/`` and ``tests/`` may hold
MAX_LINES = 500


def long_modules(root: Path) -> dict[str, int]:
    """{path: lines} of every ``.py`` file under ``root`` outside benchmarks/, tests/ and hidden
    directories that holds more than :data:`MAX_LINES` lines."""
    out = {}
    for path in sorted(root.rglob("*.py")):
        rel = path.relative_to(root)
        if rel.parts[0] in ("benchmarks", "tests") or any(p.startswith(".") for p in rel.parts):
            continue
        n = len(path.read_text(encoding="utf-8").splitlines())
        if n > MAX_LINES:
            out[rel.as_posix()] = n
    return out


def test_a_long_module_is_found(tmp_path: Path) -> None:
    (tmp_path / "pkg").mkdir()
    (tmp_path / "pkg" / "long.py").write_text("x = 1\n" * (MAX_LINES + 1))
    (tmp_path / "pkg" / "short.py").write_text("x = 1\n" * MAX_LINES)
    (tmp_path / "tests").mkdir()
    (tmp_path / "tests" / "long_test.py").write_text("x = 1\n" * (MAX_LINES + 1))
    assert long_modules(tmp_path) == {"pkg/long.py": MAX_LINES + 1}


def test_no_module_outside_benchmarks_and_tests_exceeds_500_lines() -> None:
    """Modules small enough to read: none over 500 lines."""
    over = long_modules(ROOT)
    assert not over, f"modules over {MAX_LINES} lines (split them): {over}"
