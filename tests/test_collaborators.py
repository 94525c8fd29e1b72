"""Collaborators, not mixins: the campaign core's objects are built from their own classes,
hold one another by reference, and call only one another's public methods.

Read from the source with :mod:`ast` (every class of ``service/``, every module of
``service/campaigns/``) and from the classes themselves (the method resolution order).
"""

from __future__ import annotations

import ast
from pathlib import Path

SERVICE = Path(__file__).resolve().parents[1] / "service"
CAMPAIGNS = SERVICE / "campaigns"
#: Underscore names that are public API (named tuples and SQLAlchemy rows).
PUBLIC_UNDERSCORE = {"_asdict", "_replace", "_fields", "_make", "_mapping"}


def combined_classes(source: str, name: str) -> list[str]:
    """``name:line Class(A, B)`` for every class built from more than one base class."""
    out = []
    for node in ast.walk(ast.parse(source, filename=name)):
        if isinstance(node, ast.ClassDef) and len(node.bases) > 1:
            out.append(f"{name}:{node.lineno} {node.name}({', '.join(ast.unparse(b) for b in node.bases)})")
    return out


def private_reaches(source: str, name: str) -> list[str]:
    """``name:line expr`` for every ``x._private`` where ``x`` is not ``self``/``cls`` nor a name the
    module imports (a module's private function is a layering question, not an object's state)."""
    tree = ast.parse(source, filename=name)
    imported = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            imported.update((a.asname or a.name).split(".")[0] for a in node.names)
    out = []
    for node in ast.walk(tree):
        if not isinstance(node, ast.Attribute):
            continue
        attr = node.attr
        if not attr.startswith("_") or attr.startswith("__") or attr in PUBLIC_UNDERSCORE:
            continue
        if isinstance(node.value, ast.Name) and (node.value.id in ("self", "cls") or node.value.id in imported):
            continue
        out.append((node.lineno, f"{name}:{node.lineno} {ast.unparse(node)}"))
    return [text for _, text in sorted(out)]


def test_no_class_of_service_is_built_from_several_bases():
    found = []
    for path in sorted(SERVICE.rglob("*.py")):
        found += combined_classes(path.read_text(encoding="utf-8"), str(path.relative_to(SERVICE.parent)))
    assert found == []


def test_no_campaign_module_reaches_into_another_objects_private_state():
    found = []
    for path in [*sorted(CAMPAIGNS.glob("*.py")), *sorted((SERVICE / "cycle").glob("*.py")), SERVICE / "container.py"]:
        found += private_reaches(path.read_text(encoding="utf-8"), str(path.relative_to(SERVICE.parent)))
    assert found == []


def test_the_cycle_holds_its_collaborators_by_reference():
    from service.campaigns.calls import Calls
    from service.campaigns.lifecycle import Lifecycle
    from service.campaigns.pregeneration import Pregeneration
    from service.cycle.orchestration import Cycle

    for cls in (Cycle, Calls, Pregeneration, Lifecycle):  # no base class at all, no mixin
        assert cls.__mro__ == (cls, object), cls.__mro__
    # the parts no longer live on the cycle: they are reached through its references
    for name in ("call_model", "acquire", "settle_claims", "live_claims", "schedule", "pregenerate"):
        assert not hasattr(Cycle, name), name
    # a campaign's life outside its duels is the lifecycle's
    for name in ("create_campaign", "stop_tx", "update_limits_tx", "start_run_tx", "end_run_tx"):
        assert not hasattr(Cycle, name) and hasattr(Lifecycle, name), name


def test_the_checks_find_what_they_look_for():
    assert combined_classes("class A(B, C):\n    pass\nclass D(E):\n    pass\n", "m.py") == ["m.py:1 A(B, C)"]
    src = (
        "from . import rules\n"
        "def f(self, other, row):\n"
        "    self._mine()\n"
        "    rules._helper()\n"
        "    row._asdict()\n"
        "    other.__dict__\n"
        "    other._theirs()\n"
        "    other.calls._flights\n"
    )
    assert private_reaches(src, "m.py") == ["m.py:7 other._theirs", "m.py:8 other.calls._flights"]


def test_the_cycle_gets_its_collaborators_as_one_frozen_keyword_only_dataclass():
    """``Cycle(deps=CycleDeps(...))``: every collaborator a typed field of a frozen dataclass, no
    other parameter, and no ``functools.partial`` in the vote cycle hiding which function runs."""
    import dataclasses
    import inspect

    from service.cycle.orchestration import Cycle
    from service.cycle.service_port import CycleDeps

    params = list(inspect.signature(Cycle.__init__).parameters.values())[1:]
    assert [(p.name, p.kind) for p in params] == [("deps", inspect.Parameter.KEYWORD_ONLY)]
    assert dataclasses.is_dataclass(CycleDeps) and CycleDeps.__dataclass_params__.frozen  # type: ignore[attr-defined]
    fields = dataclasses.fields(CycleDeps)
    assert all(f.kw_only and f.type not in ("Any", "object") for f in fields), fields
    assert {"db", "views", "calls", "endings", "prompts"} <= {f.name for f in fields}
    found = [p.name for p in sorted((SERVICE / "cycle").glob("*.py")) if "partial(" in p.read_text(encoding="utf-8")]
    assert found == []
