"""The background run's failure cap counts the whole run, not each of its concurrent tasks."""

from __future__ import annotations

import asyncio
import time

from conftest import app_client
from service_helpers import campaign_body, simulated_judge


async def test_the_failure_cap_counts_consecutive_failures_of_the_whole_run(db_url):
    cap, concurrency = 5, 4
    clients = [{"kind": "simulated", "failure_rate": 1.0, "latency_s": 0.05}] * 3  # every call fails
    body = campaign_body(name="failure cap", judge=simulated_judge(), clients=clients)
    async with app_client(db_url, run_max_failures=cap) as api:
        cid = (await api.post("/v1/campaigns", json=body)).json()["id"]
        r = await api.post(f"/v1/campaigns/{cid}/run", json={"concurrency": concurrency})
        assert r.status_code == 202
        deadline = time.monotonic() + 30
        while (view := (await api.get(f"/v1/campaigns/{cid}")).json())["run"]["active"]:
            assert time.monotonic() < deadline
            await asyncio.sleep(0.05)
        assert view["status"] == "running" and view["duels"] == 0
        assert view["run"]["error"].startswith(f"run paused after {cap} consecutive failed duels")
        # The cap stops new duels; the (concurrency - 1) others already in flight may still fail.
        # Counted per task, the run would go on to about cap * concurrency = 20 failures.
        assert cap <= view["duels_failed"] <= cap + concurrency - 1, view["duels_failed"]
        assert view["duels_created"] == view["duels_failed"]
        # Stopping the paused campaign keeps the pause's cause beside the admin's stop.
        assert (await api.post(f"/v1/campaigns/{cid}/stop")).status_code == 200
        ended = (await api.get(f"/v1/campaigns/{cid}")).json()
        assert ended["status"] == "stopped" and ended["end_reason"].startswith("stopped by the admin; ")
        assert view["run"]["error"] in ended["end_reason"], ended["end_reason"]
        page = (await api.get(f"/campaigns/{cid}")).text
        assert "consecutive failed duels" in page


def test_a_success_resets_the_count():
    from service.campaigns.types import DuelOutcome
    from service.cycle.runs import RunFailures

    failures = RunFailures(3)
    for failed in (True, True, False, True, True):
        failures.count(DuelOutcome(1, "x", failed=failed, error="boom"))
    assert failures.error is None and failures.consecutive == 2
    failures.count(DuelOutcome(2, "x", failed=True, error="boom"))
    assert failures.error == "run paused after 3 consecutive failed duels; last error: boom"


async def test_a_run_duel_that_met_a_database_error_is_released_and_the_run_goes_on(api, monkeypatch):
    """A database error while a run duel is under way (its answers could not be stored) used to
    leave the duel ``calling`` until the call timeout, holding one of the run's slots: with both
    slots held the run stalled for 10 minutes. The task now expires the duel once the database
    answers again, and the run goes on."""
    from service_helpers import all_duels
    from sqlalchemy.exc import OperationalError

    from service.campaigns.leases import ABANDONED_ERROR

    svc = api.app.state.campaigns.cycle
    body = campaign_body(
        name=f"db error mid-duel {time.monotonic_ns()}",
        judge=simulated_judge(),
        clients=[{"kind": "simulated", "latency_s": 0.01}] * 3,
        delta=1e-6,
    )
    cid = (await api.post("/v1/campaigns", json=body)).json()["id"]
    store = svc.store_answers_tx
    failed = {"n": 0}

    def flaky(plan, results):
        if failed["n"] < 2:  # the first two duels, one per task: both of the run's slots
            failed["n"] += 1
            raise OperationalError("UPDATE duels", {}, Exception("server closed the connection unexpectedly"))
        return store(plan, results)

    monkeypatch.setattr(svc, "store_answers_tx", flaky)
    assert (await api.post(f"/v1/campaigns/{cid}/run", json={"concurrency": 2})).status_code == 202
    deadline = time.monotonic() + 30
    while (await api.get(f"/v1/campaigns/{cid}")).json()["duels"] < 10:
        assert time.monotonic() < deadline, "the run stalled on duels left in flight by a database error"
        await asyncio.sleep(0.1)
    await api.post(f"/v1/campaigns/{cid}/stop")
    assert failed["n"] == 2
    released = [d for d in await all_duels(api, cid) if d["error"] == ABANDONED_ERROR]
    assert len(released) == 2 and all(d["status"] == "expired" for d in released)
    assert (await api.get(f"/v1/campaigns/{cid}/replay")).json()["ok"] is True
