"""Both drivers of the vote cycle satisfy one protocol (service/cycle/driver.py: ``Tx``): every
method the sequences call exists on ``SyncTx`` and ``PgTx`` with the protocol's parameters, as
a coroutine where the protocol has one."""

from __future__ import annotations

import inspect

import pytest
from conftest import REPO

from service.cycle.driver import Tx
from service.cycle.pg_driver import PgTx
from service.cycle.sync_driver import SyncTx

METHODS = sorted(name for name, member in vars(Tx).items() if not name.startswith("_") and inspect.isfunction(member))


def _params(fn) -> list[tuple[str, object]]:
    return [(p.name, p.kind) for p in inspect.signature(fn).parameters.values()]


def test_the_protocol_lists_the_sequences_round_trips():
    assert {"plan_reads", "plan_writes", "vote_reads", "vote_writes", "finish", "covers"} <= set(METHODS)
    assert "after_commit" in Tx.__annotations__


@pytest.mark.parametrize("driver", [SyncTx, PgTx])
@pytest.mark.parametrize("name", METHODS)
def test_each_driver_has_each_method_with_the_protocols_parameters(driver, name):
    theirs, ours = getattr(driver, name, None), getattr(Tx, name)
    assert theirs is not None, f"{driver.__name__} lacks {name}"
    assert _params(theirs) == _params(ours), f"{driver.__name__}.{name}"
    assert inspect.iscoroutinefunction(theirs) == inspect.iscoroutinefunction(ours), f"{driver.__name__}.{name}"


def test_every_method_a_sequence_calls_is_in_the_protocol():
    """``tx.<name>`` in the sequences and their shared reads names a protocol member."""
    import re

    root = REPO / "service" / "cycle"
    called = set()
    for module in ("plan.py", "answers.py", "verdict.py", "shared.py"):
        called |= set(re.findall(r"\btx\.([a-z_]+)", (root / module).read_text(encoding="utf-8")))
    assert called and called <= set(METHODS) | {"after_commit"}, called - set(METHODS)
