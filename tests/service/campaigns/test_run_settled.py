"""A background run reports itself active (``run.active``) until its last duel in flight has been recorded or
given up, not only until its campaign ends: a harness that polls the run until it is inactive and then reads the
spend reads the final spend (service/campaigns/expiry.py ``run_under_way``), on SQLite and PostgreSQL. The batch
campaign's case (the verdicts a round records after the one that certified) is in
tests/service/campaigns/test_batch_campaigns.py (its ``run_over``); the CLI's, tests/service/cli/test_watch_run_over.py."""

from __future__ import annotations

import asyncio
import datetime as dt
import time

import httpx
from sqlalchemy import func, select
from test_lost_commits import _body

from service.fake_provider import create_fake_provider_app
from service.models import Campaign, Charge


class Gate:
    """The fake provider behind a gate: every request waits until the gate opens (a slow provider)."""

    def __init__(self, app):
        self.app = app
        self.open = asyncio.Event()
        self.waiting = 0

    async def __call__(self, scope, receive, send):
        if scope["type"] == "http" and not self.open.is_set():
            self.waiting += 1
            await self.open.wait()
        await self.app(scope, receive, send)


def _ledger(app, cid: int) -> tuple[int, int, int]:
    """The campaign's spend, the sum of its charge rows, and how many of them are marked late (nano-USD)."""
    with app.state.db.read() as s:
        spend = s.execute(select(Campaign.spend_nusd).where(Campaign.id == cid)).scalar_one()
        total = s.execute(
            select(func.coalesce(func.sum(Charge.amount_nusd), 0)).where(Charge.campaign_id == cid)
        ).scalar_one()
        details = s.scalars(select(Charge.detail).where(Charge.campaign_id == cid)).all()
    return int(spend), int(total), sum(1 for d in details if (d or {}).get("late"))


async def test_a_run_stays_active_until_its_last_duels_in_flight_are_recorded(api):
    """A run of concurrency 3 whose duels' answers are slow (held at the provider) when its campaign ends: the
    ended campaign's run stays active while those answers are on their way; once a poller sees it inactive, the
    spend it reads equals the sum of the charges (the late answers' included) and does not change afterwards."""
    provider = create_fake_provider_app()
    gate = Gate(provider)
    calls = api.app.state.campaigns.cycle.deps.calls
    calls._http = httpx.AsyncClient(transport=httpx.ASGITransport(app=gate))
    try:
        r = await api.post("/v1/campaigns", json=_body("settled"))
        assert r.status_code == 201, r.text
        cid = r.json()["id"]
        assert (await api.post(f"/v1/campaigns/{cid}/run", json={"concurrency": 3})).status_code == 202
        deadline = time.monotonic() + 60
        while gate.waiting < 6:  # three duels in flight, both answers of each held at the provider
            assert time.monotonic() < deadline, f"only {gate.waiting} calls reached the provider"
            await asyncio.sleep(0.02)
        assert (await api.post(f"/v1/campaigns/{cid}/stop")).status_code == 200
        # the harness: poll until the run is inactive, then read the spend (the answers arrive meanwhile)
        seen_active = False
        while (view := (await api.get(f"/v1/campaigns/{cid}")).json())["run"]["active"]:
            assert view["status"] == "stopped", view["status"]
            seen_active = True
            gate.open.set()  # the slow answers come back while the ended run records them
            assert time.monotonic() < deadline, "the run stayed active"
            await asyncio.sleep(0.02)
        spend_read = view["spend"]
        gate.open.set()
        runs = api.app.state.campaigns.runs
        while runs.run_active_here(cid) or calls.live_duels:  # nothing of the run is left in this process
            assert time.monotonic() < deadline, "the run's task did not end"
            await asyncio.sleep(0.02)
        spend, total, late = _ledger(api.app, cid)
        assert late == 6, late  # the six held answers were charged after the end, marked late
        assert round(spend_read * 1e9) == spend == total > 0, (spend_read, spend, total)
        assert seen_active, "the ended campaign's run was reported inactive while its duels were in flight"
        assert (await api.get(f"/v1/campaigns/{cid}")).json()["spend"] == spend_read
    finally:
        gate.open.set()
        await calls._http.aclose()
        calls._http = None


async def test_a_new_run_waits_for_the_previous_run_to_drain_on_another_process(api):
    """A campaign continued (PATCH) while its ended run still records its last duels in flight on another process
    (that owner's lease unexpired, ``run_active`` off): ``POST /run`` is refused (409) until that run is over, on
    every process, as it is on the draining one. On the code before, another process took the lease over the
    draining owner's: its late charges could land after the new run ended and reported the spend final."""
    from service_helpers import campaign_body, simulated_judge

    body = campaign_body(costs=(0.01, 0.02, 0.03), judge=simulated_judge([[0.5] * 3 for _ in range(3)]), max_duels=2)
    cid = (await api.post("/v1/campaigns", json=body)).json()["id"]
    for _ in range(2):
        assert (await api.post(f"/v1/campaigns/{cid}/duels")).status_code == 201
    db = api.app.state.db
    with db.write() as s:  # the ended run of another process, draining: it keeps its lease (renewed) meanwhile
        c = db.lock_campaign(s, cid)
        assert c.status == "stopped" and c.end_limit == "max_duels" and not c.run_active
        c.run_owner = "draining:1:owner"
        c.run_lease_expires_at = db.clock(s) + dt.timedelta(seconds=60)
    r = await api.patch(f"/v1/campaigns/{cid}", json={"max_duels": 4})
    assert r.status_code == 200 and r.json()["status"] == "running" and r.json()["run"]["active"] is True, r.text
    r = await api.post(f"/v1/campaigns/{cid}/run", json={"concurrency": 2})
    assert r.status_code == 409 and "records its last duels in flight" in r.json()["detail"], r.text
    r = await api.post(f"/v1/campaigns/{cid}/resume")
    assert r.status_code == 409, r.text
    with db.read() as s:
        assert s.get(Campaign, cid).run_owner == "draining:1:owner"  # its lease stays with the draining run
    with db.write() as s:  # that run drained: its task cleared owner and lease (Lifecycle.end_run_tx)
        c = db.lock_campaign(s, cid)
        c.run_owner, c.run_lease_expires_at = None, None
    assert (await api.get(f"/v1/campaigns/{cid}")).json()["run"]["active"] is False
    assert (await api.post(f"/v1/campaigns/{cid}/run", json={"concurrency": 2})).status_code == 202
