"""One owner per background run (service/campaigns/leases.py), on SQLite and PostgreSQL.

Several service instances on one database stand for several worker processes or
hosts: each app has its own owner id, its own run tasks and its own keeper.
"""

from __future__ import annotations

import asyncio
import time

import httpx
import pytest
from conftest import ADMIN_KEY, app_client, make_settings
from service_helpers import campaign_body, simulated_judge
from sqlalchemy import func, select

from algorithms.vocabulary import IN_FLIGHT
from service.models import utcnow

LEASE = 1.0  # seconds: short leases so take-over happens within the test
BEAT = 0.2


def _settings(**overrides) -> dict:
    """Short run leases and heartbeats, so that take-over happens within a test."""
    return dict(run_lease_seconds=LEASE, run_heartbeat_seconds=BEAT) | overrides


def _leased(db_url: str, **overrides):
    return app_client(db_url, **_settings(**overrides))


def _crash(app) -> None:
    """What a SIGKILL leaves behind: tasks gone mid-call, no lease released, nothing ended."""
    campaigns = app.state.campaigns
    campaigns.keeper.stop()
    for task in list(campaigns.runs._runs.values()):
        task.cancel()


def _run_duels_in_flight(db, cid: int) -> int:
    from service.models import Duel

    with db.read() as s:
        return s.execute(
            select(func.count(Duel.id)).where(
                Duel.campaign_id == cid, Duel.status.in_(IN_FLIGHT), Duel.requested_by == "run"
            )
        ).scalar_one()


def _requested_by(db, duel_id: int) -> str | None:
    from service.models import Duel

    with db.read() as s:
        return s.get(Duel, duel_id).requested_by


def _lease_end(db, cid: int):
    from service.models import Campaign

    with db.read() as s:
        return s.get(Campaign, cid).run_lease_expires_at


def _owner(db, cid: int) -> str | None:
    from service.models import Campaign

    with db.read() as s:
        return s.get(Campaign, cid).run_owner


def _slow_body(name: str, latency: float = 0.05, **extra) -> dict:
    clients = [{"kind": "simulated", "latency_s": latency}] * 3
    return campaign_body(name=name, judge=simulated_judge(), clients=clients, **extra)


async def test_two_concurrent_run_starts_give_one_202_and_one_409(db_url):
    async with _leased(db_url) as ca, _leased(db_url) as cb:
        a, b = ca.app, cb.app
        cid = (await ca.post("/v1/campaigns", json=_slow_body("two starts", latency=0.2))).json()["id"]
        body = {"max_duels": 6, "concurrency": 2}
        # two processes at once, and twice on the same process
        r = await asyncio.gather(
            ca.post(f"/v1/campaigns/{cid}/run", json=body),
            cb.post(f"/v1/campaigns/{cid}/run", json=body),
            ca.post(f"/v1/campaigns/{cid}/run", json=body),
        )
        codes = sorted(x.status_code for x in r)
        assert codes == [202, 409, 409], [x.text for x in r]
        for x in r:
            if x.status_code == 409:
                assert "already active" in x.json()["detail"]
        owners = [app for app in (a, b) if app.state.campaigns.runs.run_active_here(cid)]
        assert len(owners) == 1
        assert _owner(a.state.db, cid) == owners[0].state.campaigns.cycle.owner_id
        run = (await cb.get(f"/v1/campaigns/{cid}")).json()["run"]
        assert run["owner"] == owners[0].state.campaigns.cycle.owner_id and run["lease_expires_at"]
        deadline = time.monotonic() + 30
        while (await ca.get(f"/v1/campaigns/{cid}")).json()["run"]["active"]:
            assert _run_duels_in_flight(a.state.db, cid) <= 2
            assert time.monotonic() < deadline
            await asyncio.sleep(0.02)
        view = (await ca.get(f"/v1/campaigns/{cid}")).json()
        assert view["duels_created"] == 6  # the run's max_duels, started once
        assert _owner(a.state.db, cid) is None  # the ended run left no lease behind
        # A finished run can be started again, from the other process.
        assert (await cb.post(f"/v1/campaigns/{cid}/run", json={"max_duels": 2})).status_code == 202


async def test_two_instances_resuming_give_one_owner_and_respect_the_caps(db_url):
    # a lease long enough that "still valid right after the crash" holds on a loaded machine
    lease = 4.0
    async with _leased(db_url, run_lease_seconds=lease) as c0:
        first = c0.app
        body = _slow_body("resume twice", latency=0.05, max_duels=30)
        cid = (await c0.post("/v1/campaigns", json=body)).json()["id"]
        r = await c0.post(f"/v1/campaigns/{cid}/run", json={"concurrency": 4})
        assert r.status_code == 202
        await asyncio.sleep(0.3)
        _crash(first)  # the run stays active in the database, its owner gone
        lease_end = _lease_end(first.state.db, cid)
        async with (
            _leased(db_url, resume_runs=True, run_lease_seconds=lease) as ca,
            _leased(db_url, resume_runs=True, run_lease_seconds=lease) as cb,
        ):
            a, b = ca.app, cb.app
            # Both instances start their keepers at once (as two workers after a restart).
            await asyncio.gather(a.state.campaigns.runs.resume_runs(), b.state.campaigns.runs.resume_runs())
            if utcnow() < lease_end:  # the dead owner's lease is still valid: nobody took the run
                assert not a.state.campaigns.runs.run_active_here(cid)
                assert not b.state.campaigns.runs.run_active_here(cid)
            peak = 0
            owners_seen = set()
            deadline = time.monotonic() + 40
            while True:
                view = (await ca.get(f"/v1/campaigns/{cid}")).json()
                if view["status"] != "running":
                    break
                peak = max(peak, _run_duels_in_flight(a.state.db, cid))
                here = [x for x in (a, b) if x.state.campaigns.runs.run_active_here(cid)]
                assert len(here) <= 1, "two processes drive the same run"
                owners_seen.update(x.state.campaigns.cycle.owner_id for x in here)
                assert time.monotonic() < deadline, view
                await asyncio.sleep(0.01)
            assert view["status"] == "stopped" and view["duels"] == 30  # max_duels, not more
            assert 1 <= peak <= 4
            assert len(owners_seen) == 1
            assert (await ca.get(f"/v1/campaigns/{cid}/replay")).json()["ok"] is True


async def test_a_crashed_owner_is_taken_over_after_its_lease_and_its_calling_duels_settled(db_url):
    from service.campaigns.leases import ORPHAN_ERROR, ORPHAN_REQUESTER

    # Slow models: the crash leaves duels `calling`; a 600 s call timeout would keep them.
    async with _leased(db_url, call_timeout_seconds=600.0) as c0:
        first = c0.app
        cid = (await c0.post("/v1/campaigns", json=_slow_body("crash", latency=0.5))).json()["id"]
        assert (await c0.post(f"/v1/campaigns/{cid}/run", json={"concurrency": 3})).status_code == 202
        deadline = time.monotonic() + 30
        while _run_duels_in_flight(first.state.db, cid) < 3:  # three duels calling their models
            assert time.monotonic() < deadline, "the run never had three duels in flight"
            await asyncio.sleep(0.02)
        _crash(first)
        crashed_at = time.monotonic()
        lease_end = _lease_end(first.state.db, cid)
        orphans = [
            d["id"] for d in (await c0.get(f"/v1/campaigns/{cid}/duels", params={"status": "calling"})).json()["items"]
        ]
        assert 1 <= len(orphans) <= 3  # one may have been between its calls and its verdict at the crash
        async with _leased(db_url, resume_runs=True) as c1:
            second = c1.app
            svc = second.state.campaigns.runs
            await svc.resume_runs()
            started = (await c1.post(f"/v1/campaigns/{cid}/run")).status_code
            if utcnow() < lease_end:  # the dead owner's lease still valid (a loaded machine may start late)
                assert not svc.run_active_here(cid) and started == 409
            else:
                assert started in (202, 409)
            while not svc.run_active_here(cid):
                # well before the 600 s call timeout (slack for a loaded machine starting the second process)
                assert time.monotonic() - crashed_at < LEASE + 3 * BEAT + 15.0, "no take-over"
                await asyncio.sleep(0.02)
            assert utcnow() >= lease_end  # not before the dead owner's lease expired
            assert _owner(second.state.db, cid) == svc.leases.owner_id
            for did in orphans:  # orphaned at take-over, not after the 600 s call timeout
                d = (await c1.get(f"/v1/duels/{did}")).json()
                assert d["error"] == ORPHAN_ERROR
                # still reserved (its calls could land): calling until its expiry, but in no run slot
                assert d["status"] == "calling" and _requested_by(second.state.db, did) == ORPHAN_REQUESTER
            view = (await c1.get(f"/v1/campaigns/{cid}")).json()
            assert view["pending"] <= 3 + len(orphans)  # the orphans, and at most the run's concurrency
            assert _run_duels_in_flight(second.state.db, cid) <= 3
            # The run goes on under its new owner (the dead owner's duels never got judged).
            deadline = time.monotonic() + 20
            while (await c1.get(f"/v1/campaigns/{cid}")).json()["duels"] < 2:
                assert time.monotonic() < deadline
                await asyncio.sleep(0.05)
            assert (await c1.post(f"/v1/campaigns/{cid}/stop")).status_code == 200
            await asyncio.sleep(0.7)  # answers in flight land (paid for) on cancelled duels
            assert (await c1.get(f"/v1/campaigns/{cid}/replay")).json()["ok"] is True


@pytest.mark.parametrize("heartbeat, lease", [(5.0, 5.0), (6.0, 5.0)])
def test_heartbeat_must_be_below_the_lease(monkeypatch, heartbeat, lease):
    from service.config import Settings

    monkeypatch.setenv("LLMDUEL_RUN_HEARTBEAT_SECONDS", str(heartbeat))
    monkeypatch.setenv("LLMDUEL_RUN_LEASE_SECONDS", str(lease))
    with pytest.raises(ValueError, match="LLMDUEL_RUN_HEARTBEAT_SECONDS must be below"):
        Settings.from_env()


@pytest.mark.slow
def test_two_real_workers_one_owner_and_kill_9_of_the_owner_is_taken_over(db_url, tmp_path):
    """``llmduel serve --workers 2`` after a restart: one worker drives the run; SIGKILL
    of that worker hands the run to another process once the lease expires."""
    import os
    import signal

    from conftest import start_live_server, stop_live_server

    from service.db import Database
    from service.models import Campaign, Duel

    db = Database(db_url)

    async def orphan_a_run() -> int:  # a run whose owner died: what a restart finds
        from service.app import create_app

        app = create_app(make_settings(db_url, **_settings()))  # never closed: the process is killed
        try:
            async with httpx.AsyncClient(
                transport=httpx.ASGITransport(app=app), base_url="http://t", headers=_admin()
            ) as api:
                body = _slow_body("two workers", latency=0.3, max_duels=60)
                cid = (await api.post("/v1/campaigns", json=body)).json()["id"]
                assert (await api.post(f"/v1/campaigns/{cid}/run", json={"concurrency": 4})).status_code == 202
                await asyncio.sleep(0.2)
                _crash(app)
                return cid
        finally:
            app.state.db.dispose()

    cid = asyncio.run(orphan_a_run())
    env = {"LLMDUEL_RESUME_RUNS": "1", "LLMDUEL_RUN_LEASE_SECONDS": "2", "LLMDUEL_RUN_HEARTBEAT_SECONDS": "0.4"}
    server = start_live_server(db_url, tmp_path / "workers.log", extra_env=env, workers=2)
    try:
        peak, owners = 0, []

        def sample() -> tuple[str | None, int]:
            nonlocal peak
            with db.read() as s:
                owner = s.get(Campaign, cid).run_owner
                n = _run_duels_in_flight(db, cid)
            peak = max(peak, n)
            if owner and (not owners or owners[-1] != owner):
                owners.append(owner)
            return owner, n

        deadline = time.monotonic() + 60
        while len(owners) < 1 or _judged(db, cid) < 8:  # taken over by one worker, which makes progress
            sample()
            assert time.monotonic() < deadline, "no worker took the run over"
            time.sleep(0.02)
        assert len(owners) == 1  # the two workers did not both take it
        pid = int(owners[0].split(":")[1])
        assert pid != server.process.pid  # a worker, not the supervisor
        with db.read() as s:
            calling = [
                d.id for d in s.execute(select(Duel).where(Duel.campaign_id == cid, Duel.status == "calling")).scalars()
            ]
        os.kill(pid, signal.SIGKILL)
        killed = time.monotonic()
        while len(owners) < 2:
            sample()
            assert time.monotonic() - killed < 30, "nobody took the run over after the kill"
            time.sleep(0.02)
        assert owners[1] != owners[0] and int(owners[1].split(":")[1]) != pid
        while (c := _campaign(db, cid)).status == "running":  # (the killed worker's socket waits for its restart)
            sample()
            assert time.monotonic() - killed < 90, (c.duels_judged, c.run_owner)
            time.sleep(0.05)
        assert peak <= 4, peak  # never more than the run's concurrency in flight
        # the campaign's max_duels, not more (or fewer when the certificate came first: the draw key is random)
        assert (c.status, c.duels_judged) == ("stopped", 60) or (c.status == "certified" and c.duels_judged <= 60)
        with db.read() as s:
            rows = s.execute(select(Duel.status, Duel.error).where(Duel.id.in_(calling))).all()
        # orphaned at the take-over, never judged; cancelled when the campaign reached max_duels
        assert rows and all(status in ("expired", "cancelled") for status, _ in rows), rows
        replay = httpx.get(f"{server.url}/v1/campaigns/{cid}/replay", headers=_admin(), timeout=120)
        assert replay.json()["ok"] is True
        assert "Traceback" not in server.log()
    finally:
        stop_live_server(server)
        db.dispose()


def _admin() -> dict:
    return {"Authorization": f"Bearer {ADMIN_KEY}"}


def _campaign(db, cid: int):
    from types import SimpleNamespace

    from service.models import Campaign

    with db.read() as s:
        c = s.get(Campaign, cid)
        return SimpleNamespace(status=c.status, duels_judged=c.duels_judged, run_owner=c.run_owner)


def _judged(db, cid: int) -> int:
    return _campaign(db, cid).duels_judged
