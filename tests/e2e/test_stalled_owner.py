"""A run owner stalled past its lease cannot make the campaign overspend (docs/reliability.md, Ledger).

Two service processes on one PostgreSQL database. The first drives a run whose duels
reserve the whole budget; it is stopped (SIGSTOP) mid-call past its lease, the second
takes the run over, then the first is continued (SIGCONT) and its calls land. On main
the take-over expired the stalled owner's duels and released their reservations, the
new owner reserved the budget again, and the old calls were charged on top: spend 2x
the budget. The orphaned duels now keep their reservations until their expiry (the hard
deadline of their calls), are charged when their calls land, and are never counted.
"""

from __future__ import annotations

import os
import signal
import time

import httpx
import pytest
from conftest import ADMIN_KEY, start_live_server, stop_live_server, wait_until
from service_helpers import campaign_body, simulated_judge
from sqlalchemy import func, select

COST = 0.01  # per model call: a duel costs 0.02 (free simulated judge)
BUDGET = 0.08  # exactly the four duels the first owner starts
ENV = {"LLMDUEL_RUN_LEASE_SECONDS": "2", "LLMDUEL_RUN_HEARTBEAT_SECONDS": "0.4"}


def _admin() -> dict:
    return {"Authorization": f"Bearer {ADMIN_KEY}"}


def _stop_outside_a_transaction(pid: int, db) -> None:
    """SIGSTOP the server while none of its sessions is inside a transaction (tried again after SIGCONT
    otherwise). Stopped inside one, PostgreSQL ends that session after the idle-in-transaction limit
    (tests/e2e/test_stalled_lock.py covers that case) and the pool's other connections go with it, so the
    answers that land on them are not stored: what this test counts would then depend on the timing."""
    from sqlalchemy import text

    busy = text(
        "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() "
        "AND pid <> pg_backend_pid() AND backend_type = 'client backend' AND state <> 'idle'"
    )
    for _ in range(200):
        os.kill(pid, signal.SIGSTOP)
        with db.read() as s:
            if s.execute(busy).scalar_one() == 0:
                return
        os.kill(pid, signal.SIGCONT)
        time.sleep(0.02)
    raise AssertionError("the server was always inside a transaction")


@pytest.mark.slow
def test_a_stalled_owner_past_its_lease_does_not_overspend(pg_url, tmp_path):
    from service.campaigns.leases import ORPHAN_REQUESTER
    from service.db import Database, upgrade_database
    from service.models import Campaign, Charge, Duel

    upgrade_database(pg_url)
    db = Database(pg_url)
    first = start_live_server(pg_url, tmp_path / "first.log", extra_env=dict(ENV, LLMDUEL_RESUME_RUNS="0"))
    second = None
    stopped = False
    try:
        body = campaign_body(
            name=f"stalled owner {time.monotonic_ns()}",
            costs=(COST, COST, COST),
            judge=simulated_judge(),
            clients=[{"kind": "simulated", "latency_s": 2.0}] * 3,
            budget=BUDGET,
        )
        cid = httpx.post(f"{first.url}/v1/campaigns", json=body, headers=_admin(), timeout=30).json()["id"]
        r = httpx.post(f"{first.url}/v1/campaigns/{cid}/run", json={"concurrency": 4}, headers=_admin(), timeout=30)
        assert r.status_code == 202, r.text

        def calling() -> list[int]:
            with db.read() as s:
                ids = s.execute(select(Duel.id).where(Duel.campaign_id == cid, Duel.status == "calling")).scalars()
                return sorted(ids)

        stalled = wait_until(lambda: (ids := calling()) and len(ids) == 4 and ids, 30, "the first owner's four duels")
        _stop_outside_a_transaction(first.process.pid, db)  # mid-call, holding the whole budget
        stopped = True
        second = start_live_server(pg_url, tmp_path / "second.log", extra_env=dict(ENV, LLMDUEL_RESUME_RUNS="1"))

        def owner_pid() -> int | None:
            with db.read() as s:
                owner = s.get(Campaign, cid).run_owner
            return int(owner.split(":")[1]) if owner else None

        wait_until(lambda: owner_pid() == second.process.pid, 30, "the second process took the run over")
        time.sleep(1.0)  # the new owner tries to start duels (on main: it reserved the budget again)
        with db.read() as s:
            orphans = s.execute(select(Duel.id, Duel.requested_by).where(Duel.id.in_(stalled))).all()
        assert all(r.requested_by == ORPHAN_REQUESTER for r in orphans), orphans
        os.kill(first.process.pid, signal.SIGCONT)  # the stalled calls land
        stopped = False

        def ended():
            with db.read() as s:
                c = s.get(Campaign, cid)
                return (c.status, c.end_reason, int(c.spend_nusd)) if c.status != "running" else None

        def landed() -> bool:  # both answers of each stalled duel charged
            with db.read() as s:
                n = s.execute(select(func.count(Charge.id)).where(Charge.duel_id.in_(stalled))).scalar_one()
            return n == 2 * len(stalled)

        def settled() -> bool:
            with db.read() as s:
                n = s.execute(
                    select(func.count(Duel.id)).where(Duel.campaign_id == cid, Duel.status.in_(("calling", "pending")))
                ).scalar_one()
            return n == 0

        wait_until(landed, 30, "the stalled owner's calls land and are charged")
        status, reason, spend = wait_until(ended, 60, "the campaign ends on its budget")
        wait_until(settled, 30, "no duel in flight")
        status, reason, spend = ended()
        with db.read() as s:
            charged = s.execute(
                select(func.coalesce(func.sum(Charge.amount_nusd), 0)).where(Charge.campaign_id == cid)
            ).scalar_one()
            statuses = dict(s.execute(select(Duel.id, Duel.status).where(Duel.id.in_(stalled))).all())
        assert spend == charged <= round(BUDGET * 1e9), (spend, charged, status, reason)
        assert status == "budget_exhausted", (status, reason)
        # the stalled owner's calls were paid for and its duels never counted
        assert spend == round(BUDGET * 1e9) and set(statuses.values()) == {"expired"}, statuses
        replay = httpx.get(f"{second.url}/v1/campaigns/{cid}/replay", headers=_admin(), timeout=120).json()
        assert replay["ok"] is True, replay
        assert "Traceback" not in first.log() and "Traceback" not in second.log()
    finally:
        if stopped:
            os.kill(first.process.pid, signal.SIGCONT)
        stop_live_server(first)
        if second is not None:
            stop_live_server(second)
        db.dispose()
