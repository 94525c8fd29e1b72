"""A batch campaign's process killed after a batch's results were fetched and before they were stored:
the batch stays open (``storing``), and the process that takes the run over fetches its results
again from the provider and stores them, never sending the batch again (SQLite and PostgreSQL)."""

from __future__ import annotations

import asyncio
import time
from collections import Counter

import pytest
from conftest import ThreadedServer, app_client
from service_helpers import all_duels, batch_body, batches_of, human_batch_spec, provider_batch_inputs


@pytest.mark.parametrize("phase", ["answers", "verdicts"])  # killed before storing answers, or folding verdicts
async def test_killed_between_fetching_a_batch_and_storing_it_the_take_over_stores_it_once(db_url, monkeypatch, phase):
    from service.cycle import batch_rounds
    from service.fake_provider import create_fake_provider_app

    provider_app = create_fake_provider_app(marker_key="killstore")
    provider = ThreadedServer(provider_app)
    base = provider.url + "/v1"
    lease = {"run_lease_seconds": 1.0, "run_heartbeat_seconds": 0.5}
    killed = asyncio.Event()
    real_duel_tx = batch_rounds.duel_tx

    async def dies_before_storing(fn, *args):
        # the first process "dies" at its first answer store, after its answers batch was fetched
        if phase == "answers":
            dies = getattr(fn, "__name__", "") == "store_answers_tx" and fn.__self__ is first_cycle
        else:
            dies = getattr(fn, "__name__", "") == "record_verdict" and args[0] is first_cycle
        if dies:
            killed.set()  # the whole run stops at once (as in a SIGKILL, no other call of it goes on)
            first.state.campaigns.runs._runs[cid].cancel()
            first.state.campaigns.runs.keeper.stop()  # nor renews its claims and leases any more
            await asyncio.Event().wait()
        return await real_duel_tx(fn, *args)

    monkeypatch.setattr(batch_rounds, "duel_tx", dies_before_storing)
    try:
        async with (
            app_client(db_url, base_url="http://t", **lease) as api,
            app_client(db_url, base_url="http://t", resume_runs=True, **lease) as api2,
        ):
            first, second = api.app, api2.app
            first_cycle = first.state.campaigns.runs.batch_rounds.cycle
            spec = batch_body(base, "killstore", {"round_size": 4, "poll_seconds": 0.02}, delta=0.25)
            spec["judge"]["orders"] = "both"  # two requests per paid verdict
            cid = (await api.post("/v1/campaigns", json=spec)).json()["id"]
            assert (await api.post(f"/v1/campaigns/{cid}/run", json={})).status_code == 202
            await asyncio.wait_for(killed.wait(), 60)
            runs1 = first.state.campaigns.runs
            deadline = time.monotonic() + 30
            while runs1.run_active_here(cid):
                assert time.monotonic() < deadline
                await asyncio.sleep(0.02)
            jobs = runs1.batch_jobs.jobs_tx(cid)
            # the fetched batch is still open: its answers were never stored (before, it was closed and lost)
            if phase == "verdicts":  # the answers were stored: their batches are closed
                assert {j["status"] for j in jobs if j["phase"] == "answers"} == {"collected"}, jobs
            jobs = [j for j in jobs if j["phase"] == phase]
            statuses = {j["status"] for j in jobs}
            # the phase's other batches go on concurrently: killed meanwhile, one may still be on its way to the
            # provider (``submitting``: the take-over finds it by its key) or at the provider (``running``)
            assert jobs and "storing" in statuses and statuses <= {"submitting", "running", "storing"}, jobs
            answered_before = len(provider_app.state.provider.requests)
            assert answered_before > 0

            runs2 = second.state.campaigns.runs
            deadline = time.monotonic() + 60
            while True:  # the first process's lease lapses: the take-over (here, or at the keeper's next beat)
                if cid in await runs2.resume_runs() or runs2.run_active_here(cid):
                    break
                if not {j["status"] for j in runs2.batch_jobs.jobs_tx(cid)} & {"running", "storing"}:
                    break  # already taken over and moved on
                assert time.monotonic() < deadline, "the run was not taken over"
                await asyncio.sleep(0.2)
            deadline = time.monotonic() + 120
            while (view := (await api2.get(f"/v1/campaigns/{cid}")).json())["status"] == "running":
                assert time.monotonic() < deadline, f"no certification after the take-over: {view}"
                await asyncio.sleep(0.1)
            assert view["status"] == "certified"
            while True:  # the round's last verdicts may still be recorded after the certification
                duels = await all_duels(api2, cid)
                sent = Counter(e["kind"] for e in provider_app.state.provider.requests)
                paid = Counter(ch["kind"] for d in duels for ch in d["charges"] if not ch["reused"])
                if sent["answer"] == paid["model"] and sent["judge"] == 2 * paid["judge"]:
                    break  # every answer the provider gave charged once: none lost with the killed run
                assert time.monotonic() < deadline, ("the charges do not match the answered requests", sent, paid)
                await asyncio.sleep(0.1)
            while runs2.run_active_here(cid):
                assert time.monotonic() < deadline
                await asyncio.sleep(0.05)
            inputs = await asyncio.to_thread(provider_batch_inputs, base, f"llmduel-{cid}-")
            asked = Counter(b for batch in inputs for b in batch)
            assert max(asked.values()) == 1, (
                "a request was sent in two batches",
                [b for b, n in asked.items() if n > 1],
            )
            assert len(inputs) == len(batches_of(provider_app, f"llmduel-{cid}-"))
            # the killed batch was collected by the take-over, once; one still on its way when the process died was
            # collected too, or closed when it never reached the provider (its requests went out in a later batch)
            after = {j["id"]: j for j in runs2.batch_jobs.jobs_tx(cid)}
            unsent = {j["id"] for j in jobs if j["status"] == "submitting"}
            assert all(
                after[j["id"]]["status"] == "collected"
                or (
                    j["id"] in unsent
                    and after[j["id"]]["status"] == "failed"
                    and "not found" in after[j["id"]]["error"]
                )
                for j in jobs
            ), after
            assert not [j for j in after.values() if j["status"] == "storing"]
    finally:
        provider.stop()


async def test_a_pre_generation_batch_left_by_a_process_gone_is_adopted_by_one_process(api, db_url):
    """Host A adopts the batch; its answers' claims stay lapsed until A claims them again, and host B's
    heartbeat meanwhile must not adopt the same batch (both would collect and store it)."""
    import datetime as dt
    import uuid

    from service.campaigns.batch_jobs import BatchJobs
    from service.db import Database
    from service.models import BatchJob, utcnow

    cid = (await api.post("/v1/campaigns", json=human_batch_spec("http://127.0.0.1:9/v1", "adopt", {}))).json()["id"]
    db = Database(db_url)
    try:
        old = utcnow() - dt.timedelta(hours=1)
        with db.write() as s:  # sent an hour ago by a process gone: no claim of its answers is alive
            s.add(
                BatchJob(
                    campaign_id=cid,
                    round=1,
                    phase="pregen",
                    key=f"llmduel-{cid}-1-p-{uuid.uuid4().hex[:12]}",
                    client={"kind": "openai", "model": "m"},
                    status="running",
                    requests=[{"custom_id": "r1-p1", "key": f"answer-{uuid.uuid4().hex}"}],
                    owner="gone",
                    created_at=old,
                    updated_at=old,
                )
            )
        lease = dt.timedelta(seconds=20)
        a, b = BatchJobs(db, "host-a"), BatchJobs(db, "host-b")
        adopted = a.orphaned_pregen_tx(lease, cid)
        assert len(adopted) == 1
        assert b.orphaned_pregen_tx(lease, cid) == []  # A's claims are still lapsed: B must not adopt it
        assert b.orphaned_pregen_tx(lease) == []
        assert [j["id"] for j in a.open_jobs_tx(cid)] == [adopted[0]["id"]]
        with db.read() as s:
            assert s.get(BatchJob, adopted[0]["id"]).owner == "host-a"
    finally:
        db.dispose()
