"""``spend_final`` (the campaign view; service/campaigns/settlement.py): true only once nothing in flight can change
the campaign's spend, where ``run.active`` covers only a run whose owner renews its lease. Three cases a harness
that trusted ``run.active`` alone read a spend that changed afterwards: a run's owner that stalled past its lease
and woke up, an annotator's duel whose models were being called when the campaign stopped, and, the other way, a
call past its deadline, which can no longer be charged. ``DELETE`` is refused while the spend is not final (the
late store would find its rows gone). On SQLite and PostgreSQL."""

from __future__ import annotations

import asyncio
import datetime as dt
import threading
import time
from typing import Any

import httpx
from conftest import app_client
from sqlalchemy import select, update
from test_lost_commits import _body
from test_run_settled import Gate, _ledger

from service.cli.campaign_text import summary
from service.fake_provider import create_fake_provider_app
from service.models import Campaign, Duel


def _gated(app, gate_class=None) -> tuple[Any, Any]:
    """The app's model calls go to a fake provider behind a gate (``gate_class``, default :class:`Gate`)."""
    gate = (gate_class or Gate)(create_fake_provider_app())
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


async def _annotator_duel_held_at_stop(api, gate: Gate, name: str) -> tuple[int, asyncio.Future]:
    """A human campaign stopped while an annotator's duel has both answers held at the provider: its id, and the
    annotator's request (answered once the gate opens)."""
    body = _body(name)
    body.update(judge={"kind": "human"})
    body.pop("verdicts")
    cid = (await api.post("/v1/campaigns", json=body)).json()["id"]
    token = (await api.post(f"/v1/campaigns/{cid}/annotators", json={"label": "ann"})).json()["token"]
    ask = asyncio.ensure_future(api.post(f"/v1/campaigns/{cid}/duels", headers={"Authorization": f"Bearer {token}"}))

    async def held():
        return gate.waiting >= 2

    await _until("both answers held at the provider", held)
    assert (await api.post(f"/v1/campaigns/{cid}/stop")).status_code == 200
    return cid, ask


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
        cid, ask = await _annotator_duel_held_at_stop(api, gate, "final-human")
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


async def test_a_stopped_hybrid_campaigns_waiting_duels_leave_its_spend_final(api, monkeypatch):
    """A hybrid campaign's duel selected for a human has its automatic verdict: what is left is an annotator's vote,
    which an ended campaign does not take (nor its fee). Its pool hold (30 days) is no deadline of a call: once the
    campaign stops, the spend is final and the campaign can be deleted."""
    from service_helpers import admin_duels_until_selected, hybrid_campaign, ledger_rows

    cid, (p, _) = await hybrid_campaign(api, monkeypatch, rate=1.0)
    sel = await admin_duels_until_selected(api, cid)
    assert (await api.post(f"/v1/campaigns/{cid}/stop")).status_code == 200
    view = await _view(api, cid)
    assert (await api.get(f"/v1/duels/{sel['id']}")).json()["status"] == "cancelled"
    assert view["spend_final"] is True, view
    assert (await api.post(f"/v1/duels/{sel['id']}/vote", json={"choice": "a"}, headers=p)).status_code in (404, 409)
    assert (await _view(api, cid))["spend"] == view["spend"]
    assert not [r for r in ledger_rows(api.app.state.db, cid) if (r.detail or {}).get("human_fee")]
    assert (await api.delete(f"/v1/campaigns/{cid}")).status_code == 200


class FreeGate(Gate):
    """:class:`Gate`, but its first ``free`` requests pass."""

    def __init__(self, app, free: int):
        super().__init__(app)
        self.free = free

    async def __call__(self, scope, receive, send):
        if scope["type"] == "http" and self.free > 0:
            self.free -= 1
            return await self.app(scope, receive, send)
        return await super().__call__(scope, receive, send)


class JudgeGate:
    """The fake provider with only the judge's calls behind a gate (the models answer at once)."""

    def __init__(self, app):
        self.app = app
        self.open = asyncio.Event()
        self.waiting = 0

    async def __call__(self, scope, receive, send):
        if scope["type"] != "http":
            return await self.app(scope, receive, send)
        body, more = b"", True
        while more:
            msg = await receive()
            body += msg.get("body", b"")
            more = msg.get("more_body", False)
        if b'-judge"' in body and not self.open.is_set():
            self.waiting += 1
            await self.open.wait()
        sent = False

        async def replay():
            nonlocal sent
            if sent:
                return await receive()
            sent = True
            return {"type": "http.request", "body": body, "more_body": False}

        await self.app(scope, replay, send)


async def _admin_duel_judge_held(api, gate, name: str) -> tuple[int, asyncio.Future]:
    """An LLM judge's campaign whose admin duel has its answers and waits for its judge's call, held at the provider
    (a :class:`JudgeGate`): its id, and the admin's request."""
    cid = (await api.post("/v1/campaigns", json=_body(name))).json()["id"]
    ask = asyncio.ensure_future(api.post(f"/v1/campaigns/{cid}/duels"))

    async def held():
        return gate.waiting >= 1

    await _until("the judge's call held at the provider", held)
    return cid, ask


async def test_a_duel_the_admin_voted_on_while_its_judge_decides_keeps_the_spend_open(api):
    """The admin votes on its duel while the LLM judge is deciding it, then stops the campaign: the duel is judged,
    but the judge's call is still out and is charged when it returns (before the duel's deadline). ``spend_final``
    stays false, and DELETE is refused, until it has."""
    gate, calls = _gated(api.app, JudgeGate)
    try:
        cid, ask = await _admin_duel_judge_held(api, gate, "voted")
        with api.app.state.db.read() as s:
            (did,) = s.scalars(select(Duel.id).where(Duel.campaign_id == cid, Duel.status == "pending")).all()
        r = await api.post(f"/v1/duels/{did}/vote", json={"choice": "a"})
        assert r.status_code == 200 and r.json()["status"] == "judged", r.text
        assert (await api.post(f"/v1/campaigns/{cid}/stop")).status_code == 200
        view = await _view(api, cid)
        assert view["status"] == "stopped" and view["run"]["active"] is False, view
        assert view["spend_final"] is False, view  # the judge's call is still out
        assert (await api.delete(f"/v1/campaigns/{cid}")).status_code == 409
        gate.open.set()
        assert (await ask).status_code in (201, 409)  # its verdict comes too late to count; its call is charged
        final = await _view(api, cid)
        spend, total, late = _ledger(api.app, cid)
        assert final["spend_final"] is True and late == 1, (final, late)
        assert round(final["spend"] * 1e9) == spend == total and final["spend"] > view["spend"], (final, view)
        assert (await api.delete(f"/v1/campaigns/{cid}")).status_code == 200
    finally:
        gate.open.set()
        await calls._http.aclose()
        calls._http = None


class CampaignLock:
    """Another transaction holding a campaign's row lock, in a worker thread, until released."""

    def __init__(self, db):
        self.db = db
        self.locked, self._release = threading.Event(), threading.Event()
        self._holder: asyncio.Future | None = None

    def _hold(self, cid: int) -> None:
        with self.db.write() as s:
            self.db.lock_campaign(s, cid)
            self.locked.set()
            assert self._release.wait(60)

    async def take(self, cid: int) -> None:
        self._holder = asyncio.ensure_future(asyncio.to_thread(self._hold, cid))
        await _until("the campaign's lock held", lambda: asyncio.sleep(0, self.locked.is_set()))

    async def release(self) -> None:
        self._release.set()
        if self._holder is not None:
            holder, self._holder = self._holder, None
            await holder


async def test_answers_that_waited_for_the_campaigns_lock_past_their_deadline_are_not_charged(api, monkeypatch):
    """An annotator's duel whose models were being called when its campaign stopped: its answers come back before the
    duel's deadline, but their store waits for the campaign's lock (another transaction holds it) until the deadline
    has passed. ``spend_final`` reads true then (nothing before its deadline); the store, once it has the lock, must
    not charge them: the spend read stays the spend."""

    from service.cycle import pg_driver, sync_driver

    settled_at: list[dt.datetime] = []
    for module in (sync_driver, pg_driver):
        real = module.settle

        def spy(*a, _real=real, **k):
            out = _real(*a, **k)
            settled_at.append(out.now)
            return out

        monkeypatch.setattr(module, "settle", spy)
    gate, calls = _gated(api.app)
    db = api.app.state.db
    lock = CampaignLock(db)
    try:
        cid, ask = await _annotator_duel_held_at_stop(api, gate, "lock-wait")
        deadline = dt.datetime.now(dt.timezone.utc) + dt.timedelta(seconds=3)
        with db.write() as s:
            s.execute(update(Duel).where(Duel.campaign_id == cid).values(expires_at=deadline))
        await lock.take(cid)
        gate.open.set()  # the answers come back and are settled; their store waits for the lock
        await _until("the answers settled", lambda: asyncio.sleep(0, bool(settled_at)))
        assert settled_at[0] < deadline, (settled_at, deadline)  # they came back before the deadline
        await _until(
            "the duel's deadline to pass", lambda: asyncio.sleep(0, dt.datetime.now(dt.timezone.utc) > deadline)
        )
        view = await _view(api, cid)
        assert view["spend_final"] is True and view["spend"] == 0, view
        await lock.release()
        await ask
        spend, total, late = _ledger(api.app, cid)
        assert spend == total == 0 and late == 0, (spend, total, late)
        assert (await _view(api, cid))["spend"] == view["spend"]
    finally:
        gate.open.set()
        await lock.release()
        await calls._http.aclose()
        calls._http = None


async def test_a_pre_generated_answer_that_waited_for_the_lock_past_its_hold_is_not_charged(api, monkeypatch):
    """A human campaign's answers pre-generated for its annotators, stopped while the calls are out: an answer comes
    back before its budget hold lapses, but its store waits for the campaign's lock until the hold has lapsed.
    ``spend_final`` reads true then; the store, once it has the lock, must not charge it."""

    from test_lost_commits import _human_campaign

    from service.models import BudgetHold, utcnow

    pregen = api.app.state.campaigns.pregen
    came_back: list[dt.datetime] = []
    real = pregen.store_pregenerated_tx

    def spy(*a, **k):
        came_back.append(utcnow())
        return real(*a, **k)

    monkeypatch.setattr(pregen, "store_pregenerated_tx", spy)
    gate = FreeGate(create_fake_provider_app(), free=2)  # the first duel's answers pass, the pre-generated wait
    calls = api.app.state.campaigns.cycle.deps.calls
    calls._http = httpx.AsyncClient(transport=httpx.ASGITransport(app=gate))
    db = api.app.state.db
    lock = CampaignLock(db)
    try:
        cid = await _human_campaign(api, "pregen-lock")  # its annotator's first duel starts the pre-generation

        async def held():
            with db.read() as s:
                holds = s.scalars(select(BudgetHold.id).where(BudgetHold.campaign_id == cid)).all()
            return holds and gate.waiting >= len(holds)

        await _until("pre-generated answers' calls held at the provider", held)
        assert (await api.post(f"/v1/campaigns/{cid}/stop")).status_code == 200
        deadline = dt.datetime.now(dt.timezone.utc) + dt.timedelta(seconds=3)
        with db.write() as s:
            s.execute(update(BudgetHold).where(BudgetHold.campaign_id == cid).values(expires_at=deadline))
            s.execute(update(Duel).where(Duel.campaign_id == cid).values(expires_at=deadline))
        await lock.take(cid)
        gate.open.set()  # the answers come back; their stores wait for the lock
        await _until("an answer back", lambda: asyncio.sleep(0, bool(came_back)))
        assert came_back[0] < deadline, (came_back, deadline)  # before its hold lapsed
        await _until("the holds to lapse", lambda: asyncio.sleep(0, dt.datetime.now(dt.timezone.utc) > deadline))
        view = await _view(api, cid)
        assert view["spend_final"] is True, view
        await lock.release()

        async def idle():
            return cid not in pregen.busy

        await _until("the pre-generation to end", idle)
        spend, total, late = _ledger(api.app, cid)
        assert spend == total == round(view["spend"] * 1e9), (spend, total, late, view["spend"])
        assert (await _view(api, cid))["spend"] == view["spend"]
    finally:
        gate.open.set()
        await lock.release()
        await calls._http.aclose()
        calls._http = None


async def test_a_view_that_says_final_shows_the_final_spend(api, monkeypatch):
    """The view reads the campaign (its spend), then whether the spend is final. An annotator's duel called at the
    stop stores and charges its answers between the two reads: the view must not say final with the spend it read
    before (PostgreSQL reads each statement at its own snapshot)."""

    from conftest import wait_until

    from service.campaigns import settlement

    gate, calls = _gated(api.app)
    armed, stored = threading.Event(), threading.Event()
    real = settlement._unsettled_many

    def between(s, campaigns, clock):  # the view has read the campaign; the answers are stored before it goes on
        if armed.is_set():
            armed.clear()
            loop.call_soon_threadsafe(gate.open.set)  # (the view is read in a worker thread)
            wait_until(lambda: _ledger(api.app, cid)[1] > 0, 60, "the answers charged")
            stored.set()
        return real(s, campaigns, clock)

    monkeypatch.setattr(settlement, "_unsettled_many", between)
    loop = asyncio.get_running_loop()
    try:
        body = _body("final-race")
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
        armed.set()
        view = await _view(api, cid)
        assert stored.is_set()
        await ask
        spend, total, late = _ledger(api.app, cid)
        assert late == 2 and spend == total > 0, (spend, total, late)
        assert not view["spend_final"] or round(view["spend"] * 1e9) == spend, (view["spend_final"], view["spend"])
        final = await _view(api, cid)
        assert final["spend_final"] is True and round(final["spend"] * 1e9) == spend
    finally:
        gate.open.set()
        await calls._http.aclose()
        calls._http = None


async def test_a_pre_generation_batch_a_process_gone_left_open_keeps_the_spend_open_at_any_age(db_url, monkeypatch):
    """A stopped human campaign's pre-generation batch, left open by a process that died, is adopted and collected
    by any process's heartbeat however old it is (service/cycle/pregen_recovery.py), and what the provider finished
    is charged: ``spend_final`` stays false (and DELETE is refused) until it is closed, then the spend is final."""
    from sqlalchemy import func
    from test_lost_commits import LEASE_S, _human_campaign, _lapse, pregen_sender_dies

    from service.models import BatchJob, BudgetHold, utcnow
    from service.schemas.batch_config import MAX_WINDOW_SECONDS

    provider = create_fake_provider_app()
    hung = pregen_sender_dies(monkeypatch, lambda: first_owner, lambda: api)
    async with (
        app_client(db_url, run_lease_seconds=LEASE_S, run_heartbeat_seconds=0.5) as api,
        app_client(db_url, run_lease_seconds=LEASE_S, run_heartbeat_seconds=0.5) as api2,
    ):
        api2.app.state.campaigns.runs.keeper.stop()  # the second process adopts the batches when told below
        for app in (api.app, api2.app):
            app.state.campaigns.cycle.deps.calls._http = httpx.AsyncClient(transport=httpx.ASGITransport(app=provider))
        first_owner = api.app.state.campaigns.leases.owner_id
        cid = await _human_campaign(api, "old-batch", batch={"round_size": 4, "poll_seconds": 0.02})

        async def sent():
            # a batch submitted and never collected (the first flush may hold fewer than one batch per model: the
            # process dies collecting it and never sends the rest, which the stop below leaves unsent)
            return len(hung) >= 1

        await _until("a pre-generation batch sent", sent)
        assert (await api2.post(f"/v1/campaigns/{cid}/stop")).status_code == 200
        db = api2.app.state.db
        with db.write() as s:  # no process was up for a while: the batches are old, their calls' holds lapsed
            long_ago = utcnow() - dt.timedelta(seconds=2 * MAX_WINDOW_SECONDS + 3600)
            s.execute(update(BatchJob).where(BatchJob.campaign_id == cid).values(created_at=long_ago))
            s.execute(update(BudgetHold).where(BudgetHold.campaign_id == cid).values(expires_at=long_ago))
        view = await _view(api2, cid)
        assert view["spend_final"] is False, view  # a process's heartbeat adopts and collects them, at any age
        assert (await api2.delete(f"/v1/campaigns/{cid}")).status_code == 409
        pregen2, jobs2 = api2.app.state.campaigns.pregen, api2.app.state.campaigns.runs.batch_jobs

        async def collected():
            _lapse(db, cid, first_owner)  # the first process gone for longer than the lease, without waiting
            await pregen2.recover(cid)
            return not {j["status"] for j in jobs2.jobs_tx(cid)} - {"collected", "failed", "cancelled"}

        await _until("the batches adopted and collected", collected)
        final = await _view(api2, cid)
        spend, total, _ = _ledger(api2.app, cid)
        assert final["spend_final"] is True and round(final["spend"] * 1e9) == spend == total, (final, spend, total)
        assert final["spend"] > view["spend"], (final["spend"], view["spend"])  # the batches' answers, charged
        with db.read() as s:
            assert s.execute(select(func.count()).where(BatchJob.campaign_id == cid)).scalar_one() == len(hung)
        assert (await api2.delete(f"/v1/campaigns/{cid}")).status_code == 200


async def test_the_admins_duel_cancelled_while_its_judge_decides_is_settled_once_the_judge_is_back(api):
    """The admin's duel of an LLM judge's campaign is cancelled by the stop while the judge decides it: the spend is
    not final while the judge's call is out; once it is back (charged, late; its verdict refused), nothing of the
    duel is out any more, and the spend is final at once (not at the duel's deadline, half an hour on)."""
    gate, calls = _gated(api.app, JudgeGate)
    try:
        cid, ask = await _admin_duel_judge_held(api, gate, "cancelled-judge")
        assert (await api.post(f"/v1/campaigns/{cid}/stop")).status_code == 200
        view = await _view(api, cid)
        assert view["spend_final"] is False, view  # the judge's call is out
        gate.open.set()
        await ask
        final = await _view(api, cid)
        spend, total, late = _ledger(api.app, cid)
        assert late == 1 and round(final["spend"] * 1e9) == spend == total and final["spend"] > view["spend"]
        assert final["spend_final"] is True, final
        assert (await api.delete(f"/v1/campaigns/{cid}")).status_code == 200
    finally:
        gate.open.set()
        await calls._http.aclose()
        calls._http = None
