"""One writer of money: exactly one module of ``service/`` (:mod:`service.money.charges`) inserts
charge rows or changes a campaign's spend, read from the source with :mod:`ast`.

A write is any of: ``insert(Charge...)`` or ``Charge(...)``; a ``spend_nusd`` or
``judge_spend_nusd`` keyword (``.values(spend_nusd=...)``) other than a new campaign's 0; an
assignment to such an attribute (``c.spend_nusd += x``, ``setattr(c, "spend_nusd", x)``); a
``{"spend_nusd": ...}`` passed to ``.values``; raw SQL inserting into ``charges`` or setting a spend.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
WRITER = "service/money/charges.py"
SPEND_COLUMNS = {"spend_nusd", "judge_spend_nusd"}
RAW_SQL = re.compile(r"(?is)insert\s+into\s+\"?charges\b|update\s+\"?campaigns\"?\s+set\b.*\bspend_nusd\b")


def _names_charge(node: ast.AST) -> bool:
    return any(isinstance(n, ast.Name) and n.id == "Charge" for n in ast.walk(node))


def _func_name(call: ast.Call) -> str | None:
    f = call.func
    return f.id if isinstance(f, ast.Name) else f.attr if isinstance(f, ast.Attribute) else None


def money_writes(source: str) -> list[str]:
    """The money writes in ``source`` (one line each: line number and what)."""
    found: list[str] = []
    for node in ast.walk(ast.parse(source)):
        where = getattr(node, "lineno", 0)
        if isinstance(node, ast.Call):
            name = _func_name(node)
            if name == "insert" and node.args and _names_charge(node.args[0]):
                found.append(f"{where}: insert(Charge)")
            if name == "Charge":
                found.append(f"{where}: Charge(...)")
            if name == "setattr" and len(node.args) > 1:
                key = node.args[1]
                if isinstance(key, ast.Constant) and key.value in SPEND_COLUMNS:
                    found.append(f"{where}: setattr {key.value}")
            for kw in node.keywords:
                new_campaign = isinstance(kw.value, ast.Constant) and kw.value.value == 0
                if kw.arg in SPEND_COLUMNS and not new_campaign:
                    found.append(f"{where}: {kw.arg}=")
            if name == "values":
                for arg in node.args:
                    if isinstance(arg, ast.Dict) and any(
                        isinstance(k, ast.Constant) and k.value in SPEND_COLUMNS for k in arg.keys
                    ):
                        found.append(f"{where}: values({{spend}})")
        elif isinstance(node, (ast.Assign, ast.AugAssign, ast.AnnAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            for t in targets:
                for n in ast.walk(t):
                    if isinstance(n, ast.Attribute) and n.attr in SPEND_COLUMNS and isinstance(n.ctx, ast.Store):
                        found.append(f"{where}: .{n.attr} assigned")
        elif isinstance(node, ast.Constant) and isinstance(node.value, str) and RAW_SQL.search(node.value):
            found.append(f"{where}: raw SQL")
    return found


def _service_files() -> list[Path]:
    return sorted((REPO / "service").rglob("*.py"))


def test_exactly_one_module_writes_money():
    writers = {}
    for path in _service_files():
        hits = money_writes(path.read_text(encoding="utf-8"))
        if hits:
            writers[str(path.relative_to(REPO))] = hits
    assert list(writers) == [WRITER], f"money written outside {WRITER}: {writers}"


def test_the_writer_writes_charges_and_both_spends():
    """The scan sees the writer's own writes (so an empty result elsewhere means something)."""
    hits = " ".join(money_writes((REPO / WRITER).read_text(encoding="utf-8")))
    assert "insert(Charge)" in hits and ".spend_nusd assigned" in hits and ".judge_spend_nusd assigned" in hits


@pytest.mark.parametrize(
    "snippet",
    [
        "s.execute(insert(Charge).values(amount_nusd=1))",
        "conn.execute(insert(Charge.__table__), rows)",
        "s.add(Charge(campaign_id=1))",
        "c.spend_nusd += total",
        "c.judge_spend_nusd = c.judge_spend_nusd + 1",
        "update(Campaign).values(spend_nusd=Campaign.spend_nusd + x)",
        "update(Campaign).values({'judge_spend_nusd': 3})",
        "setattr(c, 'spend_nusd', 5)",
        "conn.exec_driver_sql('INSERT INTO charges (amount_nusd) VALUES (1)')",
        "conn.exec_driver_sql('UPDATE campaigns SET spend_nusd = spend_nusd + 1')",
    ],
)
def test_every_form_of_a_money_write_is_seen(snippet):
    assert money_writes(snippet), snippet


@pytest.mark.parametrize(
    "snippet",
    [
        "Campaign(name='x', spend_nusd=0, judge_spend_nusd=0)",  # a new campaign starts at 0
        "view = dict(spend=c.spend_nusd)",
        "select(Charge.duel_id, func.sum(Charge.amount_nusd))",
        "x = c.spend_nusd + 1",
    ],
)
def test_reads_are_not_writes(snippet):
    assert money_writes(snippet) == []
