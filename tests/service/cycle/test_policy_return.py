"""A transaction that finds the policy cache empty while the transaction before it (this process) is putting
its policy back waits for it instead of restoring the stored state (O(L^2) at many models; on PostgreSQL
the lock passes to the next transaction before the last one's after-commit step has run)."""

from __future__ import annotations

import asyncio
import threading
import time
from types import SimpleNamespace

from algorithms import make_policy
from service.campaigns.policy_cache import PolicyCache, restore_policy
from service.cycle import shared
from service.cycle.pg_driver import PgTx
from service.cycle.sync_driver import run_sync
from service.plain_values import jsonable


class _Tx:
    """SyncTx's wait (a worker thread blocks) and reads that count the restores."""

    def __init__(self, state: dict):
        self.state, self.restored = state, 0

    async def wait_returned(self, returned: threading.Event, timeout_s: float) -> None:
        returned.wait(timeout_s)

    async def policy_state(self, campaign_id: int) -> dict:
        self.restored += 1
        return self.state

    async def policy_tail(self, campaign_id: int, after: int, upto: int) -> list:
        return []


def _policy():
    policy = make_policy("dctas-pc", [1.0, 1.0, 1.0], 0.05)
    for _ in range(5):
        i, j = policy.next_pair(pending=[])
        policy.record(i, j, 1.0)
    return policy


def _at(svc, tx, seq: int):
    return run_sync(shared.policy_at(svc, tx, 7, event_seq=seq, fetched_state=None, state_seq=seq))


def test_the_next_transaction_waits_for_the_policy_being_put_back():
    policy = _policy()
    svc, tx = SimpleNamespace(policies=PolicyCache()), _Tx(jsonable(policy.to_state()))
    svc.policies.put(7, 10, policy)
    seq, held = svc.policies.take_latest(7)  # the transaction before: committed, its put still to come
    assert held is policy and svc.policies.lent(7) is not None
    threading.Timer(0.01, lambda: svc.policies.put(7, seq, held)).start()
    assert _at(svc, tx, 10) is policy and tx.restored == 0  # no restore of the stored state
    assert svc.policies.lent(7) is not None  # this transaction has it now
    svc.policies.put(7, 10, policy)
    assert svc.policies.lent(7) is None


def test_a_policy_never_put_back_costs_one_bounded_wait_then_the_stored_state():
    policy = _policy()
    svc, tx = SimpleNamespace(policies=PolicyCache()), _Tx(jsonable(policy.to_state()))
    svc.policies.put(7, 10, policy)
    svc.policies.take_latest(7)  # taken by a transaction that failed: never put back
    t0 = time.monotonic()
    got = _at(svc, tx, 10)
    assert tx.restored == 1 and got is not policy
    assert got.to_state() == restore_policy(tx.state).to_state()
    assert shared.POLICY_RETURN_WAIT_S <= time.monotonic() - t0 < 5.0
    assert (
        _at(SimpleNamespace(policies=PolicyCache()), tx, 10) is not None and tx.restored == 2
    )  # nothing lent: no wait


async def test_on_the_event_loop_the_wait_lets_a_holder_on_the_loop_put_it_back():
    tx = PgTx.__new__(PgTx)  # its wait uses no connection
    returned = threading.Event()

    async def holder() -> None:
        await asyncio.sleep(0.005)  # its COMMIT awaited
        returned.set()

    t0 = time.monotonic()
    task = asyncio.create_task(holder())
    await tx.wait_returned(returned, 2.0)
    assert returned.is_set() and time.monotonic() - t0 < 1.0
    await task
    t0 = time.monotonic()
    await tx.wait_returned(threading.Event(), 0.02)  # never set: bounded
    assert 0.02 <= time.monotonic() - t0 < 1.0
