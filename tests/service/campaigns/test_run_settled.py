"""A background run reports itself active (``run.active``) until its last duel in flight has been recorded or
given up, not only until its campaign ends: a harness that polls the run until it is inactive and then reads the
spend reads the final spend (service/campaigns/expiry.py ``run_under_way``), on SQLite and PostgreSQL. The batch
campaign's case (the verdicts a round records after the one that certified) is in
tests/service/campaigns/test_batch_campaigns.py (its ``run_over``); the CLI's, tests/service/cli/test_watch_run_over.py."""

from __future__ import annotations

import asyncio
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
