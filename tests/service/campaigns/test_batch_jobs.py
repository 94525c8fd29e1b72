"""A batch whose row another process took over while its owner was still sending it (service/cycle/batch_collector.py
``Collector._send_batch``, service/campaigns/batch_jobs.py ``BatchJobs.submitted_tx``), on SQLite and PostgreSQL."""

from __future__ import annotations

import asyncio
import time

from test_lost_commits import LEASE_S, _human_campaign, _lapse, one_flush


class HeldCreates:
    """The fake provider, whose batch creations wait until ``open`` is set (a process stalled while sending)."""

    def __init__(self, app):
        self.app = app
        self.open = asyncio.Event()
        self.waiting = 0

    async def __call__(self, scope, receive, send):
        held = scope["type"] == "http" and scope["method"] == "POST" and scope["path"].endswith("/batches")
        if held and not self.open.is_set():
            self.waiting += 1
            await self.open.wait()
        await self.app(scope, receive, send)


async def test_a_batch_sent_after_its_row_was_taken_over_and_closed_is_cancelled_not_reopened(db_url, monkeypatch):
    """Process A stalls past the lease while sending its pre-generation batches (their creation held at the
    provider, its heartbeat stopped); process B adopts them, does not find them at the provider and closes them as
    failed. Then A's creations go through: the rows stay closed, as B left them, and A cancels the batches nobody
    will collect. On the code before, A stored each batch's id unconditionally: the row became ``running`` again,
    open under B's id, where no process would adopt it while B lives (and a duel needing one of its answers would
    wait for it), and the batch ran to its end at the provider."""
    import httpx
    from conftest import app_client

    from service.fake_provider import create_fake_provider_app

    one_flush(monkeypatch)
    provider = create_fake_provider_app()
    held = HeldCreates(provider)
    async with (
        app_client(db_url, run_lease_seconds=LEASE_S, run_heartbeat_seconds=0.5) as api,
        app_client(db_url, run_lease_seconds=LEASE_S, run_heartbeat_seconds=0.5) as api2,
    ):
        calls, calls2 = api.app.state.campaigns.cycle.deps.calls, api2.app.state.campaigns.cycle.deps.calls
        calls._http = httpx.AsyncClient(transport=httpx.ASGITransport(app=held))
        calls2._http = httpx.AsyncClient(transport=httpx.ASGITransport(app=provider))
        first_owner = api.app.state.campaigns.leases.owner_id
        jobs2 = api2.app.state.campaigns.runs.batch_jobs
        try:
            cid = await _human_campaign(api, "sent-late", batch={"round_size": 4, "poll_seconds": 0.02})
            deadline = time.monotonic() + 120
            while held.waiting < 3:  # one batch per model, each written and being sent
                assert time.monotonic() < deadline, f"only {held.waiting} batches reached the provider"
                await asyncio.sleep(0.05)
            assert {j["status"] for j in jobs2.jobs_tx(cid)} == {"submitting"}, jobs2.jobs_tx(cid)
            api.app.state.campaigns.runs.keeper.stop()  # A stalls: its claims are no longer renewed
            while {j["status"] for j in jobs2.jobs_tx(cid)} != {"failed"}:  # B adopts them, finds none, closes them
                assert time.monotonic() < deadline, jobs2.jobs_tx(cid)
                _lapse(api2.app.state.db, cid, first_owner)
                await api2.app.state.campaigns.pregen.recover(cid)
                await asyncio.sleep(0.05)
            assert all("not found at the provider" in (j["error"] or "") for j in jobs2.jobs_tx(cid))
        finally:
            held.open.set()  # A wakes up: its batches reach the provider
        pregen = api.app.state.campaigns.pregen
        while cid in pregen.busy:
            assert time.monotonic() < deadline, "A's pre-generation did not end"
            await asyncio.sleep(0.05)
        jobs = jobs2.jobs_tx(cid)
        assert [(j["status"], j["provider_batch_id"]) for j in jobs] == [("failed", None)] * 3, jobs
        sent = [b for b in provider.state.batches.batches.values() if f"llmduel-{cid}-" in str(b.get("metadata"))]
        assert len(sent) == 3 and {b["status"] for b in sent} == {"cancelled"}, [b["status"] for b in sent]
