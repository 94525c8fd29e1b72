"""The shape of ``service/``, read from the source with :mod:`ast`: no module over 700
lines and no function over 100 lines, so that each one can be read in one sitting; no call in
``service/`` passes more than four values by position to a function of ``service/`` (the rest are
keyword-only parameters, named at the call).

Import cycles (counting imports inside functions and under ``TYPE_CHECKING``) are
checked by tests/test_layering.py for every package, ``service`` included.
"""

from __future__ import annotations

import ast
from pathlib import Path

SERVICE = Path(__file__).resolve().parents[1] / "service"
MAX_MODULE_LINES = 700
MAX_FUNCTION_LINES = 100


def _sources() -> list[Path]:
    return sorted(SERVICE.rglob("*.py"))


def long_modules(paths: list[Path], limit: int = MAX_MODULE_LINES) -> list[str]:
    """``path: N lines`` for every module over ``limit`` lines."""
    out = []
    for path in paths:
        n = len(path.read_text(encoding="utf-8").splitlines())
        if n > limit:
            out.append(
                f"{path.name if not path.is_relative_to(SERVICE) else path.relative_to(SERVICE.parent)}: {n} lines"
            )
    return out


def long_functions(source: str, name: str, limit: int = MAX_FUNCTION_LINES) -> list[str]:
    """``name:line qualname: N lines`` for every function (methods and nested ones too) over ``limit``
    lines, counted from its first decorator to its last line."""
    out = []

    def visit(node: ast.AST, prefix: str) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef)):
                qual = f"{prefix}{child.name}"
                first = min([child.lineno, *(d.lineno for d in child.decorator_list)])
                n = child.end_lineno - first + 1
                if n > limit:
                    out.append(f"{name}:{child.lineno} {qual}: {n} lines")
                visit(child, qual + ".")
            elif isinstance(child, ast.ClassDef):
                visit(child, f"{prefix}{child.name}.")
            else:
                visit(child, prefix)

    visit(ast.parse(source, filename=name), "")
    return out


def test_no_module_of_service_is_over_700_lines():
    assert long_modules(_sources()) == []


def test_no_function_of_service_is_over_100_lines():
    found = []
    for path in _sources():
        found += long_functions(path.read_text(encoding="utf-8"), str(path.relative_to(SERVICE.parent)))
    assert found == []


def test_the_checks_find_what_they_look_for(tmp_path):
    """The two checks fail where they should: a 101-line method inside a class, a 701-line module."""
    body = "\n".join(f"        x{n} = {n}" for n in range(99))
    source = f"class K:\n    @staticmethod\n    def long():\n{body}\n        return 0\n\n    def short():\n        return 1\n"
    assert long_functions(source, "m.py") == ["m.py:3 K.long: 102 lines"]
    assert long_functions(source, "m.py", limit=102) == []
    module = tmp_path / "big.py"
    module.write_text("x = 1\n" * 701, encoding="utf-8")
    assert long_modules([module]) == ["big.py: 701 lines"]
    module.write_text("x = 1\n" * 700, encoding="utf-8")
    assert long_modules([module]) == []


MAX_POSITIONAL = 4
#: Third-party functions that call their first argument with the values after it.
FORWARDERS = ("to_thread.run_sync",)


def _module_of(path: Path) -> str:
    parts = list(path.relative_to(SERVICE.parent).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _definitions(tree: ast.Module) -> tuple[dict[str, bool], dict[str, bool]]:
    """A module's functions (at any depth, outside class bodies) and its methods, each name mapped to
    whether it takes values of its own (not a ``*args`` forwarder such as ``in_thread(fn, *args)``)."""
    functions: dict[str, bool] = {}
    methods: dict[str, bool] = {}

    def visit(node: ast.AST, in_class: bool) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef)):
                (methods if in_class else functions)[child.name] = child.args.vararg is None
                visit(child, False)
            else:
                visit(child, isinstance(child, ast.ClassDef) or in_class)

    visit(tree, False)
    return functions, methods


def _imports(tree: ast.Module, module: str, is_package: bool) -> tuple[dict[str, str], dict[str, tuple[str, str]]]:
    """Names bound to modules (``import a.b as m``, ``from a import b`` where ``a.b`` may be a module)
    and names bound to an imported name (``from a.b import f``: ``f`` -> (``a.b``, ``f``))."""
    modules: dict[str, str] = {}
    names: dict[str, tuple[str, str]] = {}
    package = module if is_package else module.rpartition(".")[0]
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                modules[alias.asname or alias.name.partition(".")[0]] = (
                    alias.name if alias.asname else alias.name.partition(".")[0]
                )
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parts = package.split(".")
                parts = parts[: len(parts) - node.level + 1]
                base = ".".join([*parts, base] if base else parts)
            for alias in node.names:
                names[alias.asname or alias.name] = (base, alias.name)
    return modules, names


def positional_calls(sources: dict[str, tuple[str, bool]], checked: set[str] | None = None) -> list[str]:
    """``module:line name: N positional`` for every call, in the modules ``checked`` (all by default), that
    passes more than :data:`MAX_POSITIONAL` values by position to a function or method defined in
    ``sources`` (module name -> (source, is a package)).

    A call is matched to its definition by name: ``f(...)`` to a function of its own module or one it
    imports, ``m.f(...)`` to a function of the module ``m`` names, and ``x.f(...)`` on any other object to
    a method ``f`` of any class in ``sources``. Calls to names from elsewhere (``anyio.to_thread.run_sync``)
    are not ours and are left alone. A forwarder that takes ``*args`` (ours, such as ``in_thread(fn, *args)``,
    or anyio's ``to_thread.run_sync``) passes its values on to its first argument: they count as a call of
    that function."""
    trees = {m: ast.parse(src, filename=m) for m, (src, _) in sources.items()}
    functions: dict[str, dict[str, bool]] = {}
    methods: dict[str, bool] = {}
    for m, tree in trees.items():
        functions[m], own = _definitions(tree)
        for name, takes in own.items():
            methods[name] = methods.get(name, False) or takes
    found = []
    for m, tree in trees.items():
        if checked is not None and m not in checked:
            continue
        modules, names = _imports(tree, m, sources[m][1])

        def ours(func: ast.expr) -> bool | None:
            """Whether ``func`` is a function of ours taking its own values (False: a forwarder; None: not ours)."""
            if isinstance(func, ast.Name):
                if func.id in functions[m]:
                    return functions[m][func.id]
                if func.id in names:
                    base, name = names[func.id]
                    return functions.get(base, {}).get(name)
                return None
            if not isinstance(func, ast.Attribute):
                return None
            root = func.value
            while isinstance(root, ast.Attribute):
                root = root.value
            if isinstance(func.value, ast.Name) and func.value.id in modules:
                return functions.get(modules[func.value.id], {}).get(func.attr)
            if isinstance(func.value, ast.Name) and func.value.id in names:
                target = ".".join(names[func.value.id])
                return functions[target].get(func.attr) if target in functions else methods.get(func.attr)
            if isinstance(root, ast.Name) and root.id in modules:
                return None
            return methods.get(func.attr)

        for node in ast.walk(tree):
            if not isinstance(node, ast.Call):
                continue
            func, args, kind = node.func, node.args, ours(node.func)
            if ast.unparse(func).endswith(FORWARDERS):
                kind = False
            if kind is False and args:  # a forwarder: the values go to its first argument
                func, args, kind = args[0], args[1:], ours(args[0])
            if kind and len(args) > MAX_POSITIONAL:
                found.append(f"{m}:{node.lineno} {ast.unparse(func)}: {len(args)} positional")
    return found


def _service_sources() -> dict[str, tuple[str, bool]]:
    return {_module_of(p): (p.read_text(encoding="utf-8"), p.name == "__init__.py") for p in _sources()}


def test_no_call_in_service_passes_more_than_four_values_by_position():
    """A function of ``service/`` called with more than four values names them (keyword-only
    parameters), so that a reader of the call sees which value is which."""
    assert positional_calls(_service_sources()) == []


def test_the_positional_check_finds_what_it_looks_for():
    """Five values by position to a function, a method or an imported function of ours fail, also through
    a forwarder (``in_thread``, anyio's ``to_thread.run_sync``); the same calls naming their values, a
    forwarder passing four or calling a third-party function, and a third-party function do not."""
    money = "def charge(a, b, c, d, e=0, *, f=0):\n    return a\n\ndef in_thread(fn, *args):\n    return fn(*args)\n"
    cycle = (
        "import anyio\nfrom . import money as m\nfrom .money import charge, in_thread\n\n"
        "class Calls:\n    def verdict(self, a, b, c, d, e=0):\n        return a\n\n"
        "def run_sync(coro):\n    return coro\n\n"
        "def go(calls, x):\n"
        "    charge(1, 2, 3, 4, 5)\n"
        "    m.charge(1, 2, 3, 4, 5)\n"
        "    calls.verdict(1, 2, 3, 4, 5)\n"
        "    in_thread(calls.verdict, 1, 2, 3, 4, 5)\n"
        "    charge(1, 2, 3, 4, e=5)\n"
        "    calls.verdict(1, 2, 3, 4, e=5)\n"
        "    in_thread(charge, 1, 2, 3, 4)\n"
        "    in_thread(print, 1, 2, 3, 4, 5)\n"
        "    anyio.to_thread.run_sync(charge, 1, 2, 3, 4, 5)\n"
        "    anyio.to_thread.run_sync(print, 1, 2, 3, 4, 5)\n"
        "    x.unknown(1, 2, 3, 4, 5)\n"
    )
    sources = {"pkg": ("", True), "pkg.money": (money, False), "pkg.cycle": (cycle, False)}
    assert positional_calls(sources) == [
        "pkg.cycle:13 charge: 5 positional",
        "pkg.cycle:14 m.charge: 5 positional",
        "pkg.cycle:15 calls.verdict: 5 positional",
        "pkg.cycle:16 calls.verdict: 5 positional",
        "pkg.cycle:21 charge: 5 positional",
    ]
    assert positional_calls(sources, checked={"pkg.money"}) == []
