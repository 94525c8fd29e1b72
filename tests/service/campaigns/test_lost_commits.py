"""A paid result's transaction whose database connection is lost (service/campaigns/lost_commits.py): what the
provider billed is neither dropped from the ledger nor charged twice, whether the lost transaction had
committed or not, in a background run, in a batch round, in pre-generation and in the collection of a
pre-generation batch adopted after a take-over, on SQLite and PostgreSQL."""

from __future__ import annotations

import asyncio
import datetime as dt
import time
import uuid
from collections import Counter
from typing import Any, Callable

import pytest
from service_helpers import all_duels, campaign_body
from sqlalchemy.exc import OperationalError

from service.campaigns import store_claims
from service.campaigns.lost_commits import committed

BASE = "http://fake.test/v1"


def test_committed_reads_the_stage_from_the_duels_columns():
    assert not committed("answers", "calling", None, None)
    assert committed("answers", "pending", "t", None)
    assert committed("answers", "failed", None, None)  # both calls failed: written, nothing answered
    assert not committed("verdict", "pending", "t", None)
    assert committed("verdict", "judged", "t", "t")
    assert committed("verdict", "pending", "t", "t")  # a hybrid duel: the judge's verdict kept, a human's due
    assert committed("verdict", "failed", "t", None)


#: The first two transactions of each kind lose their connection: the first before its commit (nothing
#: written), the second after it (written, the acknowledgement lost).
LOSSES = ("before", "after")


def losing(lost: Counter, stage: str, real, *, meanwhile=None):
    """``real``, whose first calls lose their connection as :data:`LOSSES` says ("after": it commits first;
    "before": it does not, and ``meanwhile()`` runs, as another process would); ``lost[stage]`` counts them."""

    def run(*args, **kwargs):
        if lost[stage] >= len(LOSSES):
            return real(*args, **kwargs)
        lost[stage] += 1
        if LOSSES[lost[stage] - 1] == "after":
            real(*args, **kwargs)
        elif meanwhile is not None:
            meanwhile()
        raise OperationalError("COMMIT", None, Exception("server closed the connection"), connection_invalidated=True)

    return run


def lose_connections(monkeypatch, svc) -> Counter:
    """The first answers and verdict transactions lose their connection, as :data:`LOSSES` says."""
    import service.cycle as cycle

    lost: Counter = Counter()
    monkeypatch.setattr(svc, "store_answers_tx", losing(lost, "answers", svc.store_answers_tx))
    monkeypatch.setattr(cycle, "record_verdict", losing(lost, "verdict", cycle.record_verdict))
    return lost


def _body(name: str, batch=None) -> dict:
    names = [f"{name}-small-q3", f"{name}-mid-q4", f"{name}-large-q5"]
    body = campaign_body(
        name=name,
        costs=[0.001, 0.002, 0.003],
        clients=[{"kind": "openai", "base_url": BASE, "model": n} for n in names],
        judge={
            "kind": "llm",
            "client": {"kind": "openai", "base_url": BASE, "model": f"{name}-judge"},
            "orders": "one",
            "cost": 0.01,
        },
        budget=10.0,
        max_duels=4,
        seed=5,
    )
    body.update(answers="fresh", verdicts="fresh", prompt_sampling="with_replacement")
    if batch is not None:
        body["batch"] = batch
    return body


async def _human_campaign(api, name: str, batch=None, *, first_duel: bool = True) -> int:
    """A human campaign whose answers are reused, so pre-generated for its annotators; with ``first_duel``,
    an annotator asks for its first duel (which starts the pre-generation). Its id."""
    body = _body(name, batch=batch)
    body.update(judge={"kind": "human"}, answers="reuse")
    body.pop("verdicts")
    r = await api.post("/v1/campaigns", json=body)
    assert r.status_code == 201, r.text
    cid = r.json()["id"]
    if first_duel:
        token = (await api.post(f"/v1/campaigns/{cid}/annotators", json={"label": "ann"})).json()["token"]
        first = await api.post(f"/v1/campaigns/{cid}/duels", headers={"Authorization": f"Bearer {token}"})
        assert first.status_code == 201, first.text
    return cid


@pytest.mark.parametrize("batch", [None, {"round_size": 4, "poll_seconds": 0.02}], ids=["calls", "batch"])
async def test_a_lost_connection_under_a_paid_store_neither_drops_nor_doubles_its_charge(api, fake, monkeypatch, batch):
    svc = api.app.state.campaigns.cycle
    lost = lose_connections(monkeypatch, svc)
    name = f"lost-{'b' if batch else 'c'}"
    r = await api.post("/v1/campaigns", json=_body(name, batch))
    assert r.status_code == 201, r.text
    cid = r.json()["id"]
    before = len(fake.state.provider.requests)
    assert (await api.post(f"/v1/campaigns/{cid}/run", json={})).status_code == 202
    runs = api.app.state.campaigns.runs
    deadline = time.monotonic() + 60
    while runs.run_active_here(cid):
        assert time.monotonic() < deadline, "the run did not end within 60 s"
        await asyncio.sleep(0.05)
    assert lost["answers"] == 2 and lost["verdict"] == 2  # the losses happened
    view = (await api.get(f"/v1/campaigns/{cid}")).json()
    duels = await all_duels(api, cid)
    assert not [d for d in duels if "database" in (d["error"] or "")], duels  # no duel given up
    assert {d["status"] for d in duels} == {"judged"}, [(d["status"], d["error"]) for d in duels]
    asked = Counter(q["kind"] for q in fake.state.provider.requests[before:] if q["model"].startswith(name))
    paid = Counter(ch["kind"] for d in duels for ch in d["charges"] if not ch["reused"])
    # every call the provider answered is charged once: none dropped, none twice
    assert asked["answer"] == paid["model"] == 2 * len(duels), (asked, paid)
    assert asked["judge"] == paid["judge"] == len(duels), (asked, paid)
    assert view["spend"] == pytest.approx(sum(ch["amount"] for d in duels for ch in d["charges"]))


@pytest.mark.postgres
@pytest.mark.parametrize("db_url", ["postgres"], indirect=True)
async def test_a_lost_asyncpg_connection_under_an_admins_duel_neither_drops_nor_doubles_its_charge(
    api, fake, monkeypatch
):
    """The admin's duels on PostgreSQL store their answers on the asyncpg driver (service/cycle/pg_driver.py):
    a connection that breaks there is handled as a lost SQLAlchemy one."""
    import asyncpg

    import service.cycle as cycle

    provider = fake
    lost: Counter = Counter()
    real = cycle.store_answers_async

    async def losing(*args):
        if lost["answers"] >= len(LOSSES):
            return await real(*args)
        lost["answers"] += 1
        if LOSSES[lost["answers"] - 1] == "after":
            await real(*args)
        raise asyncpg.exceptions.ConnectionDoesNotExistError("connection was closed in the middle of operation")

    monkeypatch.setattr(cycle, "store_answers_async", losing)
    name = "lost-pg"
    r = await api.post("/v1/campaigns", json=_body(name))
    assert r.status_code == 201, r.text
    cid = r.json()["id"]
    before = len(provider.state.provider.requests)
    for _ in range(3):
        r = await api.post(f"/v1/campaigns/{cid}/duels")
        assert r.status_code == 201 and r.json()["status"] == "judged", r.text
    assert lost["answers"] == 2  # the hot path stored them, and lost two connections
    duels = await all_duels(api, cid)
    asked = Counter(q["kind"] for q in provider.state.provider.requests[before:] if q["model"].startswith(name))
    paid = Counter(ch["kind"] for d in duels for ch in d["charges"] if not ch["reused"])
    assert asked["answer"] == paid["model"] == 2 * len(duels) == 6, (asked, paid)


async def test_a_lost_connection_under_a_pre_generated_answers_store_neither_drops_nor_doubles_its_charge(
    api, fake, monkeypatch
):
    """A human campaign's answers pre-generated for its annotators (service/campaigns/pregeneration.py)."""
    from sqlalchemy import func, select

    from service.models import Campaign, Charge

    pregen = api.app.state.campaigns.pregen
    lost: Counter = Counter()
    monkeypatch.setattr(pregen, "store_pregenerated_tx", losing(lost, "pregen", pregen.store_pregenerated_tx))
    name = "lost-pregen"
    cid = await _human_campaign(api, name)
    deadline = time.monotonic() + 60
    while cid in pregen.busy or lost["pregen"] < 2:
        assert time.monotonic() < deadline, "the pre-generation did not end within 60 s"
        await asyncio.sleep(0.05)
    asked = [q for q in fake.state.provider.requests if q["model"].startswith(name) and q["kind"] == "answer"]
    db = api.app.state.campaigns.cycle.deps.db
    with db.read() as s:
        rows = s.execute(
            select(func.count(), func.sum(Charge.amount_nusd)).where(
                Charge.campaign_id == cid, Charge.kind == "model", Charge.amount_nusd > 0
            )
        ).one()
        spend = s.execute(select(Campaign.spend_nusd).where(Campaign.id == cid)).scalar_one()
    assert len(asked) > 2 and rows[0] == len(asked), (len(asked), rows)  # each answered call charged once
    assert spend == rows[1]


#: The run lease of the recovered pre-generation's two processes: no claim of the first one lapses by the clock
#: while the test runs, however loaded the machine; the test makes them lapse (:func:`_lapse`).
LEASE_S = 120.0


def one_flush(monkeypatch) -> None:
    """A pre-generation's calls all go out in the collector's first flush, one batch per model, however loaded the
    machine: the collector waits until every call still running has parked (on a loaded machine, its flush after
    a quiet period, ``batch_collector.LONG_SETTLE_S``, sent the calls parked so far, and a process that "dies" in
    that flush's collection never sends the others)."""
    from service.cycle.batch_collector import Collector

    async def every_call_parked(self, tasks, work, one_call_each):
        while not all(t.done() for t in tasks):
            if self.parked and len(self.parked) >= sum(not t.done() for t in tasks):
                return
            await asyncio.sleep(self.settle_s)

    monkeypatch.setattr(Collector, "_settle", every_call_parked)


def pregen_sender_dies(monkeypatch, first_owner: Callable[[], str], first_api: Callable[[], Any]) -> list[int]:
    """The process ``first_owner()`` (the app of ``first_api()``) "dies" as it collects its pre-generation batches:
    it never collects them nor renews its claims, and sends its calls in one flush (:func:`one_flush`); the ids of
    the batches it sent, as it sends them."""
    from service.cycle.batch_collector import Collector

    hung: list[int] = []
    real_collect = Collector.collect

    async def dies_when_collecting(self, batch_api, job_id, bid, custom_ids):
        if self.phase == "pregen" and self.jobs.owner_id == first_owner():
            hung.append(job_id)
            first_api().app.state.campaigns.runs.keeper.stop()  # nor renews its claims
            await asyncio.Event().wait()  # gone: it never collects the batch
        return await real_collect(self, batch_api, job_id, bid, custom_ids)

    monkeypatch.setattr(Collector, "collect", dies_when_collecting)
    one_flush(monkeypatch)
    return hung


def _lapse(db, cid: int, owner: str) -> None:
    """The first process gone for longer than the lease, without waiting for it: the store claims of the answers of
    the campaign's open pre-generation batches, and the rows of the batches ``owner`` sent, older than the lease (a
    renewal of its cancelled heartbeat that lands late is undone at the next call)."""
    from sqlalchemy import select, update

    from service.campaigns.batch_jobs import OPEN
    from service.models import BatchJob, StoredAnswer

    with db.write() as s:
        past = db.clock(s) - dt.timedelta(seconds=2 * LEASE_S)
        jobs = s.scalars(
            select(BatchJob).where(BatchJob.campaign_id == cid, BatchJob.phase == "pregen", BatchJob.status.in_(OPEN))
        ).all()
        keys = [r["key"] for j in jobs for r in j.requests if r.get("key")]
        sent = [int(j.id) for j in jobs if j.owner == owner]
        if keys:
            s.execute(
                update(StoredAnswer)
                .where(StoredAnswer.key.in_(keys), StoredAnswer.status == store_claims.GENERATING)
                .values(claimed_at=past)
                .execution_options(synchronize_session=False)
            )
        if sent:
            s.execute(
                update(BatchJob)
                .where(BatchJob.id.in_(sent))
                .values(updated_at=past)
                .execution_options(synchronize_session=False)
            )


@pytest.mark.parametrize("lapsed", [False, True], ids=["held", "lapsed"])
async def test_a_lost_connection_under_a_recovered_pre_generated_answers_store_neither_drops_nor_doubles_its_charge(
    db_url, monkeypatch, lapsed
):
    """A human campaign's pre-generation batch left open by a process gone is adopted by another process, which
    collects it and stores its answers (service/cycle/pregen_recovery.py): a store whose connection is lost
    before or after its commit is run again only when it did not commit (its hold of the answer's key is
    still there, or its answer not stored). The first process "dies" as its batches are submitted (it never
    collects them nor renews its claims); the second adopts them once their claims are older than its lease,
    which the test makes them (:func:`_lapse`) once all three are submitted, rather than waiting for a short lease
    to run out: on a loaded machine a short one ran out before the last batch was sent. Its calls all go out in one
    flush (:func:`one_flush`).
    ``lapsed``: the batch outlived its calls' holds (expired, not yet deleted), and another pre-generation's
    ``holds.take_hold`` deletes the campaign's expired holds while the lost store waits for the database: on the
    code before, the hold gone read as "committed" and the answer's charge was dropped."""
    import httpx
    from conftest import app_client
    from sqlalchemy import delete, func, select, update

    from service.fake_provider import create_fake_provider_app
    from service.models import BudgetHold, Campaign, Charge, utcnow

    provider = create_fake_provider_app()
    hung = pregen_sender_dies(monkeypatch, lambda: first_owner, lambda: api)
    async with (
        app_client(db_url, run_lease_seconds=LEASE_S, run_heartbeat_seconds=0.5) as api,
        app_client(db_url, run_lease_seconds=LEASE_S, run_heartbeat_seconds=0.5) as api2,
    ):
        for app in (api.app, api2.app):
            app.state.campaigns.cycle.deps.calls._http = httpx.AsyncClient(transport=httpx.ASGITransport(app=provider))
        first_owner = api.app.state.campaigns.leases.owner_id
        pregen2 = api2.app.state.campaigns.pregen
        lost: Counter = Counter()

        def sweep() -> None:  # meanwhile, another pre-generation's take_hold sweeps the expired holds
            if lapsed:
                with api2.app.state.db.write() as s:
                    s.execute(
                        delete(BudgetHold).where(BudgetHold.campaign_id == cid, BudgetHold.expires_at <= utcnow())
                    )

        real = pregen2.store_pregenerated_tx
        monkeypatch.setattr(pregen2, "store_pregenerated_tx", losing(lost, "pregen", real, meanwhile=sweep))
        name = "lost-recovered" + ("-lapsed" if lapsed else "")
        cid = await _human_campaign(api, name, batch={"round_size": 4, "poll_seconds": 0.02})
        deadline = time.monotonic() + 120
        while len(hung) < 3:  # one batch per model, each submitted and never collected
            assert time.monotonic() < deadline, f"the pre-generation batches were not sent: {hung}"
            await asyncio.sleep(0.05)
        jobs2 = api2.app.state.campaigns.runs.batch_jobs
        assert {j["status"] for j in jobs2.jobs_tx(cid)} == {"running"}, jobs2.jobs_tx(cid)  # none adopted yet
        if lapsed:  # the batch outlived the holds of its calls: expired, still there
            with api2.app.state.db.write() as s:
                gone = utcnow() - dt.timedelta(seconds=1)
                assert s.execute(
                    update(BudgetHold).where(BudgetHold.campaign_id == cid).values(expires_at=gone)
                ).rowcount
        deadline = time.monotonic() + 120
        while {j["status"] for j in jobs2.jobs_tx(cid)} - {"collected", "failed"}:  # adopted once the claims lapse
            assert time.monotonic() < deadline, jobs2.jobs_tx(cid)
            _lapse(api2.app.state.db, cid, first_owner)
            await pregen2.recover(cid)
            await asyncio.sleep(0.1)
        assert lost["pregen"] == 2  # the losses happened
        assert {j["status"] for j in jobs2.jobs_tx(cid)} == {"collected"}, jobs2.jobs_tx(cid)
        asked = [q for q in provider.state.provider.requests if q["model"].startswith(name) and q["kind"] == "answer"]
        batched = [q for q in asked if "batch" in q]
        with api2.app.state.db.read() as s:
            rows = s.execute(
                select(func.count(), func.sum(Charge.amount_nusd)).where(
                    Charge.campaign_id == cid, Charge.kind == "model", Charge.amount_nusd > 0
                )
            ).one()
            spend = s.execute(select(Campaign.spend_nusd).where(Campaign.id == cid)).scalar_one()
            held = s.execute(select(func.count()).where(BudgetHold.campaign_id == cid)).scalar_one()
        # every answer the provider gave, the batches' included, charged once: none dropped, none twice
        assert len(batched) > 2 and rows[0] == len(asked), (len(asked), len(batched), rows)
        assert spend == rows[1] and held == 0


async def test_a_recovered_answer_with_a_provider_fault_is_charged_once_across_a_lost_connection(api, monkeypatch):
    """A batch answer collected after a take-over whose provider reported an unusable usage (a fault: charged its
    bound, the campaign paused, no answer kept) and whose store's connection is lost before, then after, its
    commit, with no hold of its key left to decide: the check finds the charge of its store row, so the store runs
    again only when it did not commit (the answer is never stored, so "is it stored" alone read "no" and charged
    it twice)."""
    from sqlalchemy import func, select

    from service.clients.base import Completion
    from service.models import Campaign, Charge

    cid = await _human_campaign(api, "lost-fault", first_duel=False)
    deps = api.app.state.campaigns.cycle.deps
    key = uuid.uuid4().hex * 2  # a store row of its own (the answer store is shared by every campaign)
    status, row_id = deps.stores.claim_tx(
        "answer", key, {"model_key": "m" * 64, "prompt_hash": "p" * 64}, dt.timedelta(seconds=60)
    )
    assert status == "claimed", (status, row_id)
    claim = store_claims.Claim("answer", int(row_id), key)
    res = Completion(text="x", input_tokens=None, output_tokens=None, cost=0.0, latency_s=0.1, usage_fault="-1 tokens")
    pregen = api.app.state.campaigns.pregen
    lost: Counter = Counter()
    real = pregen.store_pregenerated_tx

    def counted(*args, **kwargs):
        lost["runs"] += 1
        return real(*args, **kwargs)

    monkeypatch.setattr(pregen, "store_pregenerated_tx", losing(lost, "store", counted))
    await pregen.store_recovered_answer(cid, 0, claim, res, prompt="a prompt", hold_key=None)
    with deps.db.read() as s:
        rows = s.execute(
            select(func.count(), func.sum(Charge.amount_nusd)).where(Charge.campaign_id == cid, Charge.kind == "model")
        ).one()
        c = s.execute(select(Campaign.spend_nusd, Campaign.status, Campaign.end_limit).where(Campaign.id == cid)).one()
    # lost before its commit (run again), then after it (found committed: not run a third time)
    assert lost["store"] == 2 and lost["runs"] == 1
    assert rows[0] == 1 and rows[1] > 0 and c.spend_nusd == rows[1]  # the fault's bound, charged once
    assert (c.status, c.end_limit) == ("stopped", "provider")  # paused for the fault
