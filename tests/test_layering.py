"""Import direction between the layers, read from the source with :mod:`ast`.

The layers, lowest first: ``algorithms`` (pure mathematics) -> ``judges`` -> ``service``
-> ``service.cli`` (the command line). A module may import from its own layer and the
layers below, never above; and no two of our modules may import each other, directly or
through others (an import cycle), counting imports inside functions and under
``if TYPE_CHECKING:`` too.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
PACKAGES = ("algorithms", "judges", "service")

# Import cycles that exist on purpose until another branch removes them, as sorted module tuples.
KNOWN_CYCLES: set[tuple[str, ...]] = set()


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(REPO).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _modules() -> dict[str, Path]:
    out: dict[str, Path] = {}
    for pkg in PACKAGES:
        for path in sorted((REPO / pkg).rglob("*.py")):
            out[_module_name(path)] = path
    return out


MODULES = _modules()


def _resolve(name: str) -> str | None:
    """The longest prefix of ``name`` that is one of our modules (None for third-party names)."""
    parts = name.split(".")
    while parts:
        candidate = ".".join(parts)
        if candidate in MODULES:
            return candidate
        parts.pop()
    return None


def imports_of(module: str) -> set[str]:
    """Our modules that ``module`` imports anywhere in its source (top level or inside functions)."""
    path = MODULES[module]
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    found: set[str] = set()
    # Imports under ``if TYPE_CHECKING:`` count too: a type-only import is still a dependency a reader
    # follows, and a cycle through one is a cycle in the design.
    for node in ast.walk(tree):
        names: list[str] = []
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")
                if node.level > 1:
                    anchor = anchor[: len(anchor) - (node.level - 1)]
                base = ".".join([*anchor, base] if base else anchor)
            # ``from pkg import sub`` imports the module pkg.sub when there is one
            names = [f"{base}.{alias.name}" if f"{base}.{alias.name}" in MODULES else base for alias in node.names]
        for name in names:
            target = _resolve(name)
            if target is not None and target != module:
                found.add(target)
                found.update(_outer_packages(module, target))
    return found


def _outer_packages(module: str, target: str) -> set[str]:
    """The packages whose ``__init__`` Python runs to import ``target`` from ``module``: every
    enclosing package of ``target`` that is not one of ``module``'s own (those ran already). So
    ``service.cycle.plan`` importing ``service.campaigns.draws`` depends on the package face
    ``service.campaigns`` too: a cycle through a package ``__init__`` is a cycle."""
    own = {".".join(module.split(".")[:k]) for k in range(1, module.count(".") + 2)}
    parts = target.split(".")
    outer = {".".join(parts[:k]) for k in range(1, len(parts))}
    return {p for p in outer if p in MODULES and p not in own}


GRAPH = {m: imports_of(m) for m in MODULES}


def _layer(module: str) -> int:
    if module.startswith("algorithms"):
        return 0
    if module.startswith("judges"):
        return 1
    if module == "service.cli" or module.startswith("service.cli."):
        return 3
    return 2


def upward_imports(graph: dict[str, set[str]]) -> list[str]:
    return sorted(f"{m} -> {t}" for m, targets in graph.items() for t in targets if _layer(t) > _layer(m))


def cycles(graph: dict[str, set[str]]) -> list[tuple[str, ...]]:
    """Strongly connected components with more than one module (Tarjan), each as a sorted tuple."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    out: list[tuple[str, ...]] = []
    counter = 0

    def visit(v: str) -> None:
        nonlocal counter
        index[v] = low[v] = counter
        counter += 1
        stack.append(v)
        on_stack.add(v)
        for w in sorted(graph.get(v, ())):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(tuple(sorted(comp)))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return sorted(out)


def test_the_walk_sees_our_packages_and_their_imports():
    # guards the checks below against passing because the walk found nothing
    assert {"algorithms.policies", "judges.llm", "service.app", "service.cli"} <= set(MODULES)
    assert "algorithms.policies" in GRAPH["algorithms.simulator"]
    assert "service.cli.args" in GRAPH["service.cli.research"]
    # importing a module of another package runs that package's __init__: the edge is counted
    assert {"service.campaigns.draws", "service.campaigns"} <= GRAPH["service.cycle.plan"]
    assert "service.cycle" not in GRAPH["service.cycle.plan"]  # its own package ran already


def test_no_upward_import():
    assert upward_imports(GRAPH) == []


def test_no_import_cycle_between_our_modules():
    assert [c for c in cycles(GRAPH) if c not in KNOWN_CYCLES] == []


@pytest.mark.parametrize(
    "graph, expected",
    [
        ({"algorithms.a": {"service.x"}, "service.x": set()}, ["algorithms.a -> service.x"]),
        ({"judges.llm": {"service.clients"}, "service.clients": set()}, ["judges.llm -> service.clients"]),
        ({"service.app": {"service.cli"}, "service.cli": {"service.app"}}, ["service.app -> service.cli"]),
        ({"service.cli": {"service.app", "judges.llm", "algorithms.a"}}, []),
    ],
)
def test_upward_import_detector(graph, expected):
    assert upward_imports(graph) == expected


def test_cycle_detector():
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}, "e": {"e2"}, "e2": set()}
    assert cycles(graph) == [("a", "b", "c")]
