"""The shape of ``service/``, read from the source with :mod:`ast`: no module over 700
lines and no function over 100 lines, so that each one can be read in one sitting.

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
