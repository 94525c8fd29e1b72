"""``spend_final`` (the campaign view; service/campaigns/settlement.py): true only once nothing in flight can change
the campaign's spend, where ``run.active`` covers only a run whose owner renews its lease. Three cases a harness
that trusted ``run.active`` alone read a spend that changed afterwards: a run's owner that stalled past its lease
and woke up, an annotator's duel whose models were being called when the campaign stopped, and, the other way, a
call past its deadline, which can no longer be charged. ``DELETE`` is refused while the spend is not final (the
late store would find its rows gone). On SQLite and PostgreSQL."""

from __future__ import annotations

import asyncio
import datetime as dt
import time

import httpx
from conftest import app_client
from sqlalchemy import update
from test_lost_commits import _body
from test_run_settled import Gate, _ledger

from service.cli.campaign_text import summary
from service.fake_provider import create_fake_provider_app
from service.models import Campaign, Duel


def _gated(app) -> tuple[Gate, object]:
    """The app's model calls go to a fake provider behind a gate."""
    gate = Gate(create_fake_provider_app())
    calls = app.state.campaigns.cycle.deps.calls
    calls._http = httpx.AsyncClient(transport=httpx.ASGITransport(app=gate))
    return gate, calls


async def _until(what: str, cond, timeout: float = 60.0):
    deadline = time.monotonic() + timeout
    while not (got := await cond()):
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        await asyncio.sleep(0.02)
    return got


async def _view(api, cid: int) -> dict:
    r = await api.get(f"/v1/campaigns/{cid}")
    assert r.status_code == 200, r.text
    return r.json()


async def _stopped_run_with_answers_held(api, gate: Gate) -> int:
    """A run of concurrency 1 whose duel's two answers are held at the provider, stopped: its run drains."""
    cid = (await api.post("/v1/campaigns", json=_body("final"))).json()["id"]
    assert (await api.post(f"/v1/campaigns/{cid}/run", json={"concurrency": 1})).status_code == 202

    async def held():
        return gate.waiting >= 2

    await _until("both answers held at the provider", held)
    assert (await api.post(f"/v1/campaigns/{cid}/stop")).status_code == 200
    view = await _view(api, cid)
    assert view["status"] == "stopped" and view["run"]["active"] is True and view["spend_final"] is False, view
    return cid


def _lapse_lease(app, cid: int) -> None:
    """The run's owner stalls past its lease: the lease lapses while the owner, stuck, has not drained."""
    db = app.state.db
    with db.write() as s:
        c = db.lock_campaign(s, cid)
        assert c.run_owner is not None
        c.run_lease_expires_at = db.clock(s) - dt.timedelta(seconds=1)


async def test_a_stalled_owner_keeps_the_spend_open_until_it_has_recorded_its_duel(db_url):
    """The owner's lease lapses before it drains (``run.active`` false): its duel's calls can still be charged
    before their deadline, so ``spend_final`` stays false and the campaign cannot be deleted; the owner wakes up,
    stores the answers (charged, late) and drains; the spend then is final and equals the ledger."""
    async with app_client(db_url, run_lease_seconds=600.0, run_heartbeat_seconds=300.0) as api:
        gate, calls = _gated(api.app)
        try:
            cid = await _stopped_run_with_answers_held(api, gate)
            _lapse_lease(api.app, cid)
            view = await _view(api, cid)
            assert view["run"]["active"] is False, view["run"]  # the lease alone says the run is over
            assert view["spend_final"] is False, view  # but its duel's calls are still out
            r = await api.delete(f"/v1/campaigns/{cid}")
            assert r.status_code == 409 and "under way" in r.json()["detail"], r.text
            spend_before = view["spend"]
            gate.open.set()  # the owner wakes up: the answers come back and are stored

            async def settled():
                v = await _view(api, cid)
                return v if v["spend_final"] else None

            final = await _until("the spend to be final", settled)
            spend, total, late = _ledger(api.app, cid)
            assert late == 2, late  # both answers charged after the stop, marked late
            assert round(final["spend"] * 1e9) == spend == total, (final["spend"], spend, total)
            assert final["spend"] > spend_before  # what run.active alone would have reported was not final
            assert api.app.state.campaigns.runs.run_active_here(cid) is False
        finally:
            gate.open.set()
            await calls._http.aclose()
            calls._http = None


async def test_a_call_past_its_deadline_no_longer_holds_the_spend_open(db_url):
    """The stalled owner's duel passes its hard deadline: no call of it can be charged any more, so the spend is
    final (and the campaign may be deleted) though the owner never drained; when the answers do come back they
    are not charged, and the spend read stays the spend."""
    async with app_client(db_url, run_lease_seconds=600.0, run_heartbeat_seconds=300.0) as api:
        gate, calls = _gated(api.app)
        try:
            cid = await _stopped_run_with_answers_held(api, gate)
            _lapse_lease(api.app, cid)
            db = api.app.state.db
            with db.write() as s:  # the duel's deadline passes (by this process's clock, which the store reads)
                s.execute(
                    update(Duel)
                    .where(Duel.campaign_id == cid)
                    .values(expires_at=dt.datetime.now(dt.timezone.utc) - dt.timedelta(seconds=1))
                )
            view = await _view(api, cid)
            assert view["run"]["active"] is False and view["spend_final"] is True, view
            gate.open.set()
            runs = api.app.state.campaigns.runs

            async def drained():
                return not runs.run_active_here(cid) and not calls.live_duels

            await _until("the owner to drain", drained)
            spend, total, late = _ledger(api.app, cid)
            assert late == 0 and spend == total == round(view["spend"] * 1e9), (spend, total, late, view["spend"])
            assert (await _view(api, cid))["spend"] == view["spend"]
            r = await api.delete(f"/v1/campaigns/{cid}")
            assert r.status_code == 200, r.text
        finally:
            gate.open.set()
            await calls._http.aclose()
            calls._http = None


async def test_an_annotators_duel_called_at_the_stop_keeps_the_spend_open(api):
    """A human campaign has no run: an annotator's duel whose models are being called when the campaign stops is
    cancelled, but its answers are still charged when they arrive. ``spend_final`` is false until then."""
    gate, calls = _gated(api.app)
    try:
        body = _body("final-human")
        body.update(judge={"kind": "human"})
        body.pop("verdicts")
        cid = (await api.post("/v1/campaigns", json=body)).json()["id"]
        token = (await api.post(f"/v1/campaigns/{cid}/annotators", json={"label": "ann"})).json()["token"]
        ask = asyncio.ensure_future(
            api.post(f"/v1/campaigns/{cid}/duels", headers={"Authorization": f"Bearer {token}"})
        )

        async def held():
            return gate.waiting >= 2

        await _until("both answers held at the provider", held)
        assert (await api.post(f"/v1/campaigns/{cid}/stop")).status_code == 200
        view = await _view(api, cid)
        assert view["status"] == "stopped" and view["run"]["active"] is False and view["pending"] == 0, view
        assert view["spend_final"] is False and view["spend"] == 0, view
        assert "(judge 0.0000 USD), not final yet (calls under way)\n" in summary(view)  # campaign show
        r = await api.delete(f"/v1/campaigns/{cid}")
        assert r.status_code == 409, r.text
        gate.open.set()
        await ask
        final = await _view(api, cid)
        spend, total, late = _ledger(api.app, cid)
        assert ", final\n" in summary(final)
        assert final["spend_final"] is True and late == 2 and round(final["spend"] * 1e9) == spend == total > 0
        with api.app.state.db.read() as s:
            assert s.get(Campaign, cid).status == "stopped"
    finally:
        gate.open.set()
        await calls._http.aclose()
        calls._http = None


async def test_the_spend_of_a_running_or_drained_campaign(api):
    """False while the campaign runs; true once it has ended with nothing in flight; the list says the same."""
    from service_helpers import campaign_body, simulated_judge

    body = campaign_body(costs=(0.01, 0.02), judge=simulated_judge([[0.5, 0.9], [0.1, 0.5]]), max_duels=2)
    cid = (await api.post("/v1/campaigns", json=body)).json()["id"]
    running = await _view(api, cid)
    assert running["spend_final"] is False
    assert "final" not in next(x for x in summary(running).splitlines() if x.strip().startswith("spend"))
    for _ in range(2):
        assert (await api.post(f"/v1/campaigns/{cid}/duels")).status_code == 201
    view = await _view(api, cid)
    assert view["status"] == "stopped" and view["spend_final"] is True, view
    listed = {c["id"]: c for c in (await api.get("/v1/campaigns")).json()["items"]}
    assert listed[cid]["spend_final"] is True
