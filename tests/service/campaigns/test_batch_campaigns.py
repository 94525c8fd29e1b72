"""Batch campaigns end to end, on SQLite and PostgreSQL, against the fake provider's batch routes:
the same winner as call by call for about half the spend, a budget too small for a round, a stop
that cancels the open batches, and a server killed between submitting and collecting a batch."""

from __future__ import annotations

import asyncio
import math
import signal
import time
from collections import Counter

import httpx
import pytest
from conftest import (
    ADMIN_KEY,
    ThreadedServer,
    app_client,
    logged_tracebacks,
    start_live_server,
    started_app_client,
    stop_live_server,
)
from service_helpers import (
    all_duels,
    batch_body,
    batches_of,
    first_pregen_round,
    human_batch_spec,
    provider_batch_inputs,
    wait_for_campaign,
)

ADMIN = {"Authorization": f"Bearer {ADMIN_KEY}"}


def paid_judge_modes(duels: list[dict]) -> Counter:
    """Of the duels whose verdict was paid (not reused): how many read both orders, how many one."""
    return Counter(
        d["judge"].get("orders", "both")
        for d in duels
        for ch in d["charges"]
        if ch["kind"] == "judge" and not ch["reused"]
    )


async def run_over(api, app, cid: int, timeout: float = 60) -> dict:
    """The campaign's view once its run is over, as a poller of the REST API sees it: the first view whose
    ``run.active`` is false. The verdict that ends a campaign ends it in its own transaction, but the round
    goes on to record the verdicts it holds for its later duels, each charged (late); the run stays active
    until they are recorded, so the view's spend is final. Checked here: the run's task in ``app`` is over
    by then, and a view read after that shows the same spend."""
    runs = app.state.campaigns.runs
    deadline = time.monotonic() + timeout
    while (view := (await api.get(f"/v1/campaigns/{cid}")).json())["run"]["active"]:
        assert time.monotonic() < deadline, f"the run of campaign {cid} did not end within {timeout:g} s"
        await asyncio.sleep(0.05)
    while runs.run_active_here(cid):  # inactive in the view: the task is ending (its last transaction committed)
        assert time.monotonic() < deadline, f"the run of campaign {cid} was inactive before its task ended"
        await asyncio.sleep(0.01)
    assert (await api.get(f"/v1/campaigns/{cid}")).json()["spend"] == view["spend"], "the spend changed after the run"
    return view


def assert_ledger(app, view: dict, provider_app) -> None:
    """The ledger of a campaign whose run is over: its charge rows add up to its spend (the view's too),
    which is exactly what the provider answered for the campaign's models and judge, at the batch price
    (1 USD per million tokens: 1,000 nano-USD a token)."""
    from sqlalchemy import func, select

    from service.models import Campaign, Charge

    names = {m["name"] for m in view["models"]} | {view["judge"]["client"]["model"]}
    answered = [e for e in provider_app.state.provider.requests if e["model"] in names]
    assert all("batch" in e for e in answered), "a request of the campaign was not batched"
    tokens = sum(e["prompt_tokens"] + e["completion_tokens"] for e in answered)
    with app.state.db.read() as s:
        rows = s.execute(select(func.coalesce(func.sum(Charge.amount_nusd), 0)).where(Charge.campaign_id == view["id"]))
        charged = int(rows.scalar_one())
        spend = int(s.get(Campaign, view["id"]).spend_nusd)
    assert charged == spend == tokens * 1000, (charged, spend, tokens)
    assert view["spend"] == pytest.approx(spend / 1e9, abs=1e-12)


async def test_batch_campaign_certifies_the_same_winner_for_about_half_the_spend(db_url, batch_fake):
    base, provider_app = batch_fake
    async with app_client(db_url, base_url="http://t") as api:
        app = api.app
        r = await api.post("/v1/campaigns", json=batch_body(base, "batched", {"round_size": 4, "poll_seconds": 0.02}))
        assert r.status_code == 201, r.text
        cid = r.json()["id"]
        view = r.json()
        assert view["batch"]["rounds"] == 0 and view["batch"]["round_size"] == 4
        judge_client = view["judge"]["client"]
        assert judge_client["batch_price"] == {"input_per_1m": 1.0, "output_per_1m": 1.0}
        one = (await api.post("/v1/campaigns", json=batch_body(base, "one by one", None))).json()
        assert one["batch"] is None
        before = len(provider_app.state.provider.requests)
        for c in (cid, one["id"]):
            assert (await api.post(f"/v1/campaigns/{c}/run", json={"concurrency": 1})).status_code == 202
        # until each run is over
        t0 = time.monotonic()
        batched = await run_over(api, app, cid)
        took = time.monotonic() - t0
        single = await run_over(api, app, one["id"])
        assert not single["run"]["active"]
        assert batched["status"] == single["status"] == "certified", (batched["run"], single["run"], took)
        assert batched["winner_index"] == single["winner_index"] == 3
        ratio = batched["spend"] / single["spend"]
        assert 0.3 < ratio < 0.6, (batched["spend"], single["spend"])
        rounds = batched["batch"]["rounds"]
        assert 1 <= rounds <= math.ceil(math.log2(batched["duels_created"])) + 2
        # Every model and judge call of the batch campaign went out in a batch, each request once.
        names = {m["name"] for m in batched["models"]} | {batched["judge"]["client"]["model"]}
        sent = [e for e in provider_app.state.provider.requests[before:] if e["model"] in names]
        assert sent and all("batch" in e for e in sent)
        asked = Counter(
            (e["model"], e.get("prompt"), e.get("first"), e.get("second")) for e in sent
        )  # answers and verdicts are reused: a request asked twice would be paid twice
        assert max(asked.values()) == 1
        duels = await all_duels(api, cid)
        paid = Counter(ch["kind"] for d in duels for ch in d["charges"] if not ch["reused"])
        kinds = Counter(e["kind"] for e in sent)
        # each request charged once, none uncharged (a judgement in both orders: two requests, in one: one)
        modes = paid_judge_modes(duels)
        assert sum(modes.values()) == paid["judge"] and set(modes) <= {"both", "one"}, modes
        assert kinds["answer"] == paid["model"] and kinds["judge"] == 2 * modes["both"] + modes["one"], (
            kinds,
            modes,
        )
        # orders: auto (the default) keeps its measured rates from round to round: it reached one order
        assert modes["one"] > 0 and modes["both"] >= 8, modes
        assert batched["spend"] == pytest.approx(sum(d["cost"] for d in duels))
        assert_ledger(app, batched, provider_app)
        # The verdicts were folded in plan order: the judged duels' sequence numbers increase.
        judged = sorted((d for d in duels if d["status"] == "judged"), key=lambda d: d["number"])
        assert judged and len(batches_of(provider_app, f"llmduel-{cid}-")) >= 2 * rounds - 1


async def test_a_budget_too_small_for_a_round_ends_before_anything_is_sent(db_url, batch_fake):
    base, provider_app = batch_fake
    async with app_client(db_url, base_url="http://t") as api:
        r = await api.post("/v1/campaigns", json=batch_body(base, "poor", True, budget=1e-7))
        assert r.status_code == 201, r.text
        cid = r.json()["id"]
        assert (await api.post(f"/v1/campaigns/{cid}/run", json={})).status_code == 202
        view = await wait_for_campaign(api, cid, lambda v: v["status"] != "running")
        assert view["status"] == "budget_exhausted", view["status"]
        assert view["spend"] == 0 and view["duels_created"] == 0
        assert batches_of(provider_app, f"llmduel-{cid}-") == []


async def test_bad_batch_settings_are_a_422(api, batch_fake):
    base, _ = batch_fake
    for bad in ({"round_size": 0}, {"poll_seconds": -1}, {"window_seconds": 1e9}, {"nope": 1}, "yes"):
        r = await api.post("/v1/campaigns", json=batch_body(base, "bad", bad))
        assert r.status_code == 422, (bad, r.text)
    r = await api.post("/v1/campaigns", json=batch_body(base, "human", True, judge={"kind": "human"}, answers="fresh"))
    assert r.status_code == 422 and "answers: reuse" in r.text


async def test_stopping_cancels_the_open_batches(db_url):
    from service.fake_provider import create_fake_provider_app

    provider_app = create_fake_provider_app(marker_key="stop", batch_delay_s=3600.0)
    server = ThreadedServer(provider_app)
    try:
        async with app_client(db_url, base_url="http://t") as api:
            app = api.app
            cid = (
                await api.post("/v1/campaigns", json=batch_body(server.url + "/v1", "stop", {"poll_seconds": 0.02}))
            ).json()["id"]
            assert (await api.post(f"/v1/campaigns/{cid}/run", json={})).status_code == 202
            deadline = time.monotonic() + 30
            while not batches_of(provider_app, f"llmduel-{cid}-"):
                assert time.monotonic() < deadline
                await asyncio.sleep(0.02)
            assert (await api.post(f"/v1/campaigns/{cid}/stop")).status_code == 200
            runs = app.state.campaigns.runs
            while runs.run_active_here(cid):
                assert time.monotonic() < deadline
                await asyncio.sleep(0.02)
            statuses = [b["status"] for b in batches_of(provider_app, f"llmduel-{cid}-")]
            assert statuses and set(statuses) == {"cancelled"}  # one batch per model, each cancelled
            jobs = runs.batch_jobs.jobs_tx(cid)
            assert len(jobs) == len(statuses) and {j["status"] for j in jobs} == {"cancelled"}
            assert provider_app.state.provider.requests == []  # nothing answered, nothing paid
    finally:
        server.stop()


@pytest.mark.slow
@pytest.mark.parametrize("phase", ["a", "v"])  # killed while round 1's answers batch, or its verdicts batch, runs
async def test_sigkill_between_submit_and_collect_then_restart_sends_nothing_twice(db_url, tmp_path, phase, caplog):
    from service.fake_provider import create_fake_provider_app

    provider_app = create_fake_provider_app(marker_key="kill", batch_delay_s=0.6)
    provider = ThreadedServer(provider_app)
    lease = {"run_lease_seconds": 2, "run_heartbeat_seconds": 0.5}
    env = {
        "LLMDUEL_RESUME_RUNS": "1",
        "LLMDUEL_RUN_LEASE_SECONDS": str(lease["run_lease_seconds"]),
        "LLMDUEL_RUN_HEARTBEAT_SECONDS": str(lease["run_heartbeat_seconds"]),
    }
    # delta 0.25: fewer rounds to certify after the take-over (what is checked does not depend on delta)
    spec = batch_body(provider.url + "/v1", "kill", {"round_size": 4, "poll_seconds": 0.1}, delta=0.25)
    spec["judge"]["orders"] = "both"  # two requests per paid verdict, also for a duel the kill left without one
    # The killed server is a real process (SIGKILL); the restarted one is a fresh service started in this
    # process (nothing of the first in memory; no process start to wait for): it takes the run over at its
    # first heartbeat after the killed server's lease lapses, as a restarted server does.
    server = start_live_server(db_url, tmp_path / "first.log", extra_env=env)
    try:
        with httpx.Client(base_url=server.url, headers=ADMIN, timeout=30) as api:
            cid = api.post("/v1/campaigns", json=spec).json()["id"]
            assert api.post(f"/v1/campaigns/{cid}/run", json={}).status_code == 202
            deadline = time.monotonic() + 30
            while not batches_of(provider_app, f"llmduel-{cid}-1-{phase}-"):  # submitted, still in progress
                assert time.monotonic() < deadline, "no batch was submitted"
                time.sleep(0.01)
        server.process.send_signal(signal.SIGKILL)
        server.process.wait(timeout=10)
        killed_with = len(batches_of(provider_app, f"llmduel-{cid}-"))
        kinds = {e["kind"] for e in provider_app.state.provider.requests}
        assert "judge" not in kinds and (phase == "v" or not kinds)  # killed before the provider answered
        provider_app.state.batches.batch_delay_s = 0.0  # the kill fell inside a batch: the rest need not wait

        async with started_app_client(db_url, resume_runs=True, **lease) as api:
            deadline = time.monotonic() + 120
            while (view := (await api.get(f"/v1/campaigns/{cid}")).json())["status"] == "running":
                assert time.monotonic() < deadline, f"no certification after the take-over: {view}"
                await asyncio.sleep(0.1)
            assert view["status"] == "certified" and view["winner_index"] == 3
            # The round's other verdicts are still being recorded (and charged) after the certification: wait
            # until every request the provider answered is charged (never more: a request charged twice, or one
            # lost with the killed process, never gets there and fails here)
            while True:
                duels = await all_duels(api, cid)
                sent = Counter(e["kind"] for e in provider_app.state.provider.requests)
                paid = Counter(ch["kind"] for d in duels for ch in d["charges"] if not ch["reused"])
                if sent["answer"] == paid["model"] and sent["judge"] == 2 * paid["judge"]:
                    break
                assert time.monotonic() < deadline, ("the charges do not match the answered requests", sent, paid)
                await asyncio.sleep(0.1)
        assert not logged_tracebacks(caplog)
        inputs = provider_batch_inputs(provider.url + "/v1", f"llmduel-{cid}-")  # the provider's list of batches
    finally:
        stop_live_server(server)
        provider.stop()
    from service.campaigns.batch_jobs import BatchJobs
    from service.db import Database

    db = Database(db_url)
    try:
        jobs = BatchJobs(db, "test").jobs_tx(cid)
    finally:
        db.dispose()
    # the batches the killed server submitted were collected by the restarted one, none sent again
    # (a batch killed before the provider took it is closed as never sent: it cost nothing)
    unsent = [j for j in jobs if j["status"] != "collected"]
    assert all(j["status"] == "failed" and "not found at the provider" in j["error"] for j in unsent), unsent
    collected = [j for j in jobs if j["status"] == "collected"]
    assert sorted(j["provider_batch_id"] for j in collected) == sorted(
        b["id"] for b in batches_of(provider_app, f"llmduel-{cid}-")
    )
    assert all(b["status"] == "completed" for b in batches_of(provider_app, f"llmduel-{cid}-"))
    assert len(inputs) > killed_with  # the run went on after the restart
    asked = Counter(b for batch in inputs for b in batch)
    assert max(asked.values()) == 1, "a request was sent in two batches"  # answers and verdicts are reused
    # every answer the provider gave was charged once, none lost with the killed process
    sent = Counter(e["kind"] for e in provider_app.state.provider.requests)
    paid = Counter(ch["kind"] for d in duels for ch in d["charges"] if not ch["reused"])
    assert sent["answer"] == paid["model"] and sent["judge"] == 2 * paid["judge"], (sent, paid)


async def test_failed_requests_are_sent_again_in_the_next_batch(db_url):
    from service.fake_provider import create_fake_provider_app

    provider_app = create_fake_provider_app(marker_key="flaky", batch_failure_rate=0.3, seed=4)
    server = ThreadedServer(provider_app)
    try:
        async with app_client(db_url, base_url="http://t") as api:
            app = api.app
            spec = batch_body(server.url + "/v1", "flaky", {"round_size": 4, "poll_seconds": 0.02})
            cid = (await api.post("/v1/campaigns", json=spec)).json()["id"]
            assert (await api.post(f"/v1/campaigns/{cid}/run", json={})).status_code == 202
            view = await run_over(api, app, cid)
            assert view["status"] == "certified" and view["winner_index"] == 3
            counts = [b["request_counts"] for b in batches_of(provider_app, f"llmduel-{cid}-")]
            assert sum(c["failed"] for c in counts) > 0  # the provider failed some requests ...
            duels = await all_duels(api, cid)
            # ... which went out again (at most 3 batches each): a duel fails only when one failed 3 times
            failed = [d for d in duels if d["status"] == "failed"]
            assert all("after 3 batches" in (d["error"] or "") for d in failed), failed
            # every request the provider answered is charged once, at the batch price (1 USD per million tokens)
            assert_ledger(app, view, provider_app)
            assert view["spend"] == pytest.approx(sum(d["cost"] for d in duels))
    finally:
        server.stop()


async def test_the_verdicts_a_round_records_after_the_ending_are_charged_before_its_run_is_over(db_url, batch_fake):
    """A round folds its verdicts in plan order; the one that certifies ends the campaign (its status), and the
    round then records the verdicts it holds for its later duels, each charged late. A view read in between
    shows the ended campaign without those charges, and its run still active: the spend is final once the run
    is reported inactive (:func:`run_over`), and then every request the provider answered is charged, once."""
    from sqlalchemy import select

    from service.models import Charge

    base, provider_app = batch_fake
    async with app_client(db_url, base_url="http://t") as api:
        app = api.app
        rounds, views = app.state.campaigns.runs.batch_rounds, app.state.campaigns.views
        record, between = rounds._record, []

        async def look_then_record(plan, verdict):  # the view a reader gets just before each verdict of the fold
            view = await asyncio.to_thread(views.get_campaign, plan.campaign_id)
            if view["status"] != "running":
                between.append(view)
            return await record(plan, verdict)

        rounds._record = look_then_record
        # rounds of 48 duels: the campaign certifies inside its second round, with verdicts of it still to record
        spec = batch_body(base, "late", {"round_size": 48, "poll_seconds": 0.02})
        cid = (await api.post("/v1/campaigns", json=spec)).json()["id"]
        assert (await api.post(f"/v1/campaigns/{cid}/run", json={})).status_code == 202
        view = await run_over(api, app, cid)
        assert view["status"] == "certified", view["run"]
        with app.state.db.read() as s:
            rows = s.scalars(select(Charge).where(Charge.campaign_id == cid)).all()
            late = [c.amount_nusd for c in rows if (c.detail or {}).get("late")]
        assert between and late, "no verdict was recorded after the one that certified"
        first = between[0]  # the ended campaign, before the round's later verdicts were charged
        assert first["status"] == "certified" and first["run"]["active"]  # the spend is not final yet
        assert view["spend"] - first["spend"] == pytest.approx(sum(late) / 1e9, abs=1e-12) and sum(late) > 0
        assert_ledger(app, view, provider_app)


@pytest.mark.parametrize("route", ["upload", "results"])
async def test_a_provider_error_that_passes_neither_fails_the_round_nor_leaves_billed_answers_uncharged(db_url, route):
    """The provider answers one upload of an input file, or one read of a batch's output file, with a 503 (as a
    kept-alive connection it closed as it was reused ends in a ReadError): the upload is sent again (a file
    starts nothing), the read is made again (the batch's answers are billed); the run goes on to certify and
    every request the provider answered is charged, once."""
    from starlette.responses import JSONResponse

    from service.fake_provider import create_fake_provider_app

    provider_app = create_fake_provider_app(marker_key="passing")
    fake = provider_app.state.batches
    upload, read, refused = fake.upload, fake.file, []

    def unavailable(what: str):  # the first request of the route (none of them awaits before it is counted)
        refused.append(what)
        return JSONResponse({"error": {"message": "try again", "type": "server_error", "code": None}}, 503)

    async def upload_once_refused(request):
        if route == "upload" and not refused:
            return unavailable("upload")
        return await upload(request)

    def read_once_refused(fid: str, content: bool):
        output = fid in fake.files and fake.files[fid]["filename"].endswith("_output.jsonl")
        if route == "results" and content and output and not refused:
            return unavailable("results")
        return read(fid, content)

    fake.upload, fake.file = upload_once_refused, read_once_refused
    server = ThreadedServer(provider_app)
    try:
        async with app_client(db_url, base_url="http://t") as api:
            spec = batch_body(server.url + "/v1", "passing", {"round_size": 4, "poll_seconds": 0.02})
            cid = (await api.post("/v1/campaigns", json=spec)).json()["id"]
            assert (await api.post(f"/v1/campaigns/{cid}/run", json={})).status_code == 202
            view = await run_over(api, api.app, cid)
            assert refused == [route]
            assert view["status"] == "certified" and view["run"]["error"] is None, view["run"]
            assert_ledger(api.app, view, provider_app)
    finally:
        server.stop()


async def test_a_refused_batch_ends_the_run_with_the_reason_and_frees_its_reservations(api, batch_fake):
    base, provider_app = batch_fake
    spec = batch_body(base.replace("/v1", "/missing/v1"), "refused", {"round_size": 2, "poll_seconds": 0.02})
    cid = (await api.post("/v1/campaigns", json=spec)).json()["id"]
    assert (await api.post(f"/v1/campaigns/{cid}/run", json={})).status_code == 202
    view = await wait_for_campaign(api, cid, lambda v: not v["run"]["active"] and v["run"]["error"])
    assert view["status"] == "running" and view["spend"] == 0
    assert view["run"]["error"].startswith("batch round failed:") and "HTTP 404" in view["run"]["error"]
    duels = await all_duels(api, cid)
    # no reservation left behind: each duel failed with the refusal (its batch's callers fail with it)
    assert len(duels) == 2 and {d["status"] for d in duels} <= {"expired", "failed"}
    assert all(d["status"] == "expired" or "HTTP 404" in (d["error"] or "") for d in duels), duels
    assert view["remaining_budget"] is None or view["remaining_budget"] == view["budget"]


async def test_a_batch_refused_beside_collected_ones_still_charges_what_the_provider_answered(db_url):
    """One model's endpoint refuses its batch while the other models' batches of the same flush are collected:
    the provider bills those, so their answers are stored and charged; the run ends with the refusal and no
    duel keeps a reservation."""
    from service.fake_provider import create_fake_provider_app

    provider_app = create_fake_provider_app(marker_key="mixed")
    server = ThreadedServer(provider_app)
    try:
        async with app_client(db_url, base_url="http://t") as api:
            app = api.app
            spec = batch_body(server.url + "/v1", "mixed", {"round_size": 4, "poll_seconds": 0.02})
            spec["models"][0]["client"]["base_url"] = server.url + "/missing/v1"  # this endpoint refuses (404)
            cid = (await api.post("/v1/campaigns", json=spec)).json()["id"]
            assert (await api.post(f"/v1/campaigns/{cid}/run", json={})).status_code == 202
            view = await run_over(api, app, cid)
            assert not view["run"]["active"] and "HTTP 404" in view["run"]["error"]
            answered = [b for b in batches_of(provider_app, f"llmduel-{cid}-") if b["status"] == "completed"]
            assert answered  # the other models' batches went out and the provider answered them ...
            tokens = sum(e["prompt_tokens"] + e["completion_tokens"] for e in provider_app.state.provider.requests)
            assert tokens > 0
            # ... so they are charged, once, at the batch price (1 USD per million tokens)
            assert_ledger(app, view, provider_app)
            duels = await all_duels(api, cid)
            # no duel is left in flight holding a reservation: a duel both of whose models answered is closed
            # with its answers charged (its verdict was never asked for)
            assert duels and {d["status"] for d in duels} <= {"failed", "expired"}, duels
            answered = [d for d in duels if d["cost"] > 0 and d["status"] == "expired"]
            assert all("before its verdict" in d["error"] for d in answered), answered
            assert view["remaining_budget"] is None or view["remaining_budget"] == view["budget"] - view["spend"]
    finally:
        server.stop()


@pytest.mark.parametrize("phase", ["a", "v"])  # the answers batch, or the verdicts batch, outlives its window
async def test_a_batch_past_its_window_keeps_what_the_provider_answered_and_charges_it_once(db_url, phase):
    """A batch still running at ``window_seconds`` is cancelled; the provider had answered its requests
    before the cancellation (and bills them): those answers (or verdicts) are stored and charged once,
    the run ends with the reason, and no duel of the round is left in flight."""
    from service.fake_provider import create_fake_provider_app

    provider_app = create_fake_provider_app(marker_key="late")
    fake = provider_app.state.batches
    advance = fake._advance

    async def slow_phase(bid):  # the phase's batch stays in progress until it is cancelled
        key = fake.batches[bid]["metadata"].get("llmduel_key", "")
        return fake.batches[bid] if f"-{phase}-" in key else await advance(bid)

    async def cancel_after_answering(bid):  # it had answered everything when the cancellation came
        from starlette.responses import JSONResponse

        await advance(bid)
        fake.batches[bid].update(status="cancelled", cancelled_at=int(time.time()))
        return JSONResponse(fake.batches[bid])

    fake._advance, fake.cancel = slow_phase, cancel_after_answering
    server = ThreadedServer(provider_app)
    try:
        async with app_client(db_url, base_url="http://t") as api:
            app = api.app
            spec = batch_body(
                server.url + "/v1", "late", {"round_size": 4, "poll_seconds": 0.02, "window_seconds": 0.3}
            )
            cid = (await api.post("/v1/campaigns", json=spec)).json()["id"]
            assert (await api.post(f"/v1/campaigns/{cid}/run", json={})).status_code == 202
            runs = app.state.campaigns.runs
            view = await run_over(api, app, cid)
            assert not view["run"]["active"] and "did not end within its window of 0.3 s" in view["run"]["error"]
            assert view["status"] == "running" and view["batch"]["rounds"] == 1
            sent = Counter(e["kind"] for e in provider_app.state.provider.requests)
            assert sent["answer"] > 0 and (sent["judge"] > 0) == (phase == "v")
            # every request the provider answered is charged, once, at the batch price (1 USD per million tokens)
            assert_ledger(app, view, provider_app)
            duels = await all_duels(api, cid)
            assert view["spend"] == pytest.approx(sum(d["cost"] for d in duels))
            assert duels and not [d for d in duels if d["status"] in ("calling", "pending")], duels
            if phase == "v":  # the verdicts that came back were recorded, in the round's plan order
                assert {d["status"] for d in duels} == {"judged"}, duels
            else:
                assert all("before its verdict" in d["error"] for d in duels), duels
            jobs = runs.batch_jobs.jobs_tx(cid)
            late = [j for j in jobs if j["phase"][0] == phase]
            assert late and all(j["status"] == "failed" and "within its window" in j["error"] for j in late)
    finally:
        server.stop()


async def test_a_human_campaign_buys_its_pre_generated_answers_in_batches(db_url, batch_fake, monkeypatch):
    """A human campaign with ``batch``: the answers pre-generated for annotators go out as one batch per
    model (a pre-generation round, counted in ``batch.rounds``), each request once, charged at the batch
    price; the duels that follow take them from the store and call no model."""
    from service.campaigns import draws
    from service.campaigns.pregeneration import planned_prompts

    key = "3b" * 32  # the campaign's draws are fixed: its next six duels ask six different prompts
    monkeypatch.setattr(draws, "new_draw_key", lambda: key)
    base, provider_app = batch_fake
    async with app_client(db_url, base_url="http://t") as api:
        app = api.app
        spec = batch_body(base, "human batch", {"round_size": 6, "poll_seconds": 0.02}, judge={"kind": "human"})
        spec.pop("verdicts")
        r = await api.post("/v1/campaigns", json=spec)
        assert r.status_code == 201, r.text
        cid, before = r.json()["id"], len(provider_app.state.provider.requests)
        duel, who, rows = await first_pregen_round(api, app, cid)
        c = (await api.get(f"/v1/campaigns/{cid}")).json()
        assert c["batch"]["rounds"] == 1
        assert {(j["phase"], j["status"]) for j in rows} == {("pregen", "collected")}
        asked = provider_app.state.provider.requests[before:]
        batched = [e for e in asked if "batch" in e]
        direct = [e for e in asked if "batch" not in e]
        assert len(direct) == 2  # the first duel's own answers (nothing was pre-generated yet)
        # one batch per model; the answers of the next 6 planned duels' prompts, for every model
        assert batched and len({e["batch"] for e in batched}) == len({e["model"] for e in batched}) == 4
        planned = {spec["prompts"][i] for i in planned_prompts(spec["seed"], 1, len(spec["prompts"]), 6, draw_key=key)}
        assert len(planned) >= 4 and {e["prompt"] for e in batched} == planned
        # every (model, prompt) answered once, none twice (the batch skipped what the store held)
        pairs = Counter((e["model"], e["prompt"]) for e in asked)
        assert max(pairs.values()) == 1, pairs
        tokens = lambda es: sum(e["prompt_tokens"] + e["completion_tokens"] for e in es)  # noqa: E731
        # list price 2 USD per million tokens for the direct calls, batch price 1 for the batched ones
        assert c["spend"] == pytest.approx(tokens(direct) * 2e-6 + tokens(batched) * 1e-6, abs=1e-7)
        # the next duels take their answers from the store: no model is called
        for _ in range(3):
            vote = await api.post(f"/v1/duels/{duel['id']}/vote", headers=who, json={"choice": "a"})
            assert vote.status_code == 200, vote.text
            r = await api.post(f"/v1/campaigns/{cid}/duels", headers=who)
            assert r.status_code == 201, r.text
            duel = r.json()
            while cid in app.state.campaigns.pregen.busy:
                await asyncio.sleep(0.02)
        later = [e for e in provider_app.state.provider.requests[before:] if "batch" not in e]
        assert later == direct


async def test_a_round_that_can_plan_nothing_ends_the_run_with_the_reason(monkeypatch):
    """The plan of a round's first duel keeps asking to retry later (duels of others in flight): the round
    waits PLAN_WAIT_S, then the run ends with the plan's reason, instead of ending silently as if done."""
    from service.campaigns.types import Conflict
    from service.cycle import batch_rounds

    class Cycle:
        calls = 0

        async def plan(self, campaign_id, principal, run):
            Cycle.calls += 1
            raise Conflict("3 duels of the run are in flight", retry_later=True)

    class Jobs:
        def start_round_tx(self, campaign_id):
            return 1, 4

        def adopt_tx(self, campaign_id):
            return [], []

    monkeypatch.setattr(batch_rounds, "PLAN_WAIT_S", 0.3)
    rounds = batch_rounds.BatchRounds(Cycle(), None, Jobs())
    error = await asyncio.wait_for(rounds.run(1, {"poll_seconds": 1, "window_seconds": 10}), 10)
    assert error == "batch round 1 planned no duel: 3 duels of the run are in flight (for 0.3 s)"
    assert Cycle.calls >= 2  # it did wait and ask again


async def test_a_round_survives_database_errors_that_rolled_a_duels_transaction_back(db_url, batch_fake):
    """The round's many concurrent transactions may meet a deadlock or a lock timeout (rolled back): the
    duel's transaction is tried again, so the campaign certifies and every answered request is charged once."""
    from sqlalchemy.exc import OperationalError

    base, provider_app = batch_fake
    async with app_client(db_url, base_url="http://t") as api:
        app = api.app
        cycle = app.state.campaigns.cycle
        store, failures = cycle.store_answers_tx, Counter()

        def flaky_store(plan, res):
            if failures["store"] < 3:  # the first three attempts are refused by the database, as a deadlock is
                failures["store"] += 1
                raise OperationalError("UPDATE duels ...", {}, Exception("deadlock detected"))
            return store(plan, res)

        cycle.store_answers_tx = flaky_store
        spec = batch_body(base, "deadlocks", {"round_size": 4, "poll_seconds": 0.02}, delta=0.25)
        cid = (await api.post("/v1/campaigns", json=spec)).json()["id"]
        before = len(provider_app.state.provider.requests)
        assert (await api.post(f"/v1/campaigns/{cid}/run", json={})).status_code == 202
        view = await run_over(api, app, cid)
        assert view["status"] == "certified" and view["winner_index"] == 3, view["run"]
        assert failures["store"] == 3
        names = {m["name"] for m in view["models"]}
        sent = Counter(e["kind"] for e in provider_app.state.provider.requests[before:] if e["model"] in names)
        duels = await all_duels(api, cid)
        paid = Counter(ch["kind"] for d in duels for ch in d["charges"] if not ch["reused"])
        assert sent["answer"] == paid["model"] > 0, (sent, paid)
        assert_ledger(app, view, provider_app)
        assert not [d for d in duels if d["status"] in ("calling", "pending")]


async def test_a_slow_database_does_not_split_a_rounds_calls_into_several_batches(db_url, batch_fake):
    """Each call of a round first claims its answer in the store (a database transaction); on a database that
    serializes them slowly (as SQLite's write lock does under load), the calls reach the batch one by one,
    further apart than the collector's settle time: they still go out as one batch per model and phase."""
    import threading

    base, provider_app = batch_fake
    async with app_client(db_url, base_url="http://t") as api:
        app = api.app
        calls = app.state.campaigns.calls
        claim, lock, slowed = calls.claim_tx, threading.Lock(), Counter()

        def slow_claim(*args, **kwargs):
            with lock:  # one at a time, each slower than the collector's settle time
                if slowed["claims"] < 12:
                    slowed["claims"] += 1
                    time.sleep(0.15)
                return claim(*args, **kwargs)

        calls.claim_tx = slow_claim
        spec = batch_body(base, "slow store", {"round_size": 4, "poll_seconds": 0.02}, delta=0.25)
        cid = (await api.post("/v1/campaigns", json=spec)).json()["id"]
        assert (await api.post(f"/v1/campaigns/{cid}/run", json={})).status_code == 202
        runs = app.state.campaigns.runs
        view = await run_over(api, app, cid)
        assert view["status"] == "certified", view["run"]
        assert slowed["claims"] == 12
        per_phase: dict[tuple[int, str], list[str]] = {}
        for j in runs.batch_jobs.jobs_tx(cid):
            per_phase.setdefault((j["round"], j["phase"]), []).append(j["client"]["model"])
        assert (1, "answers") in per_phase
        # no request failed (no batch sent again): one batch per model in every phase of every round
        for phase, models in per_phase.items():
            assert len(models) == len(set(models)), (phase, Counter(models))


async def test_stopping_a_human_campaign_cancels_its_open_pre_generation_batches(db_url):
    from service.fake_provider import create_fake_provider_app

    provider_app = create_fake_provider_app(marker_key="pregen-stop", batch_delay_s=3600.0)
    server = ThreadedServer(provider_app)
    try:
        async with app_client(db_url, base_url="http://t") as api:
            app = api.app
            spec = human_batch_spec(server.url + "/v1", "pregen stop", {"round_size": 6, "poll_seconds": 0.02})
            cid = (await api.post("/v1/campaigns", json=spec)).json()["id"]
            token = (await api.post(f"/v1/campaigns/{cid}/annotators", json={"label": "ann"})).json()["token"]
            assert (
                await api.post(f"/v1/campaigns/{cid}/duels", headers={"Authorization": f"Bearer {token}"})
            ).status_code == 201
            deadline = time.monotonic() + 30
            while len(batches_of(provider_app, f"llmduel-{cid}-")) < 4:  # one per model, each still running
                assert time.monotonic() < deadline, "no pre-generation batches"
                await asyncio.sleep(0.02)
            assert (await api.post(f"/v1/campaigns/{cid}/stop")).status_code == 200
            jobs, pregen = app.state.campaigns.runs.batch_jobs, app.state.campaigns.pregen
            while cid in pregen.busy:
                assert time.monotonic() < deadline, "the pre-generation did not end with the campaign"
                await asyncio.sleep(0.02)
            assert {b["status"] for b in batches_of(provider_app, f"llmduel-{cid}-")} == {"cancelled"}
            assert {j["status"] for j in jobs.jobs_tx(cid)} == {"cancelled"}
            assert len(provider_app.state.provider.requests) == 2  # the first duel's own answers; no batch answered
    finally:
        server.stop()


@pytest.mark.slow
async def test_sigkill_during_a_pre_generation_batch_then_restart_collects_it_and_sends_nothing_twice(
    db_url, tmp_path, caplog
):
    """A human campaign's answers bought in batches for its annotators: the server is killed while the batches
    run; the restarted server finds them by their record, collects them and stores and charges their answers,
    and the next duel takes its answers from the store: the provider's list of batches shows each request once,
    and no answer is asked for twice."""
    from service.campaigns.batch_jobs import BatchJobs
    from service.db import Database
    from service.fake_provider import create_fake_provider_app

    provider_app = create_fake_provider_app(marker_key="pregen-kill", batch_delay_s=3600.0)
    provider = ThreadedServer(provider_app)
    lease = {"run_lease_seconds": 2, "run_heartbeat_seconds": 0.5}
    env = {"LLMDUEL_RUN_LEASE_SECONDS": "2", "LLMDUEL_RUN_HEARTBEAT_SECONDS": "0.5"}
    spec = human_batch_spec(provider.url + "/v1", "pregen kill", {"round_size": 6, "poll_seconds": 0.1})
    # the restarted server is a fresh service in this process (see the test above)
    server = start_live_server(db_url, tmp_path / "first.log", extra_env=env)
    db = Database(db_url)
    try:
        with httpx.Client(base_url=server.url, headers=ADMIN, timeout=30) as api:
            cid = api.post("/v1/campaigns", json=spec).json()["id"]
            token = api.post(f"/v1/campaigns/{cid}/annotators", json={"label": "ann"}).json()["token"]
            who = {"Authorization": f"Bearer {token}"}
            first = api.post(f"/v1/campaigns/{cid}/duels", headers=who)
            assert first.status_code == 201, first.text
            deadline = time.monotonic() + 30
            while len(batches_of(provider_app, f"llmduel-{cid}-")) < 4:  # one per model, submitted, still running
                assert time.monotonic() < deadline, "no pre-generation batches"
                time.sleep(0.01)
        server.process.send_signal(signal.SIGKILL)
        server.process.wait(timeout=10)
        direct = list(provider_app.state.provider.requests)
        assert len(direct) == 2  # the first duel's own answers; the batches had answered nothing
        provider_app.state.batches.batch_delay_s = 0.0
        jobs = BatchJobs(db, "test")
        deadline = time.monotonic() + 60
        async with started_app_client(db_url, resume_runs=False, timeout=60, **lease) as api:
            # at once, before the second server adopted the batches: the next duel's answers are in them, so it
            # waits for them (the killed server's claims lapse, but a duel does not take over an answer an open
            # pre-generation batch asked for) instead of calling the models
            voted = await api.post(f"/v1/duels/{first.json()['id']}/vote", headers=who, json={"choice": "a"})
            assert voted.status_code == 200
            nxt = await api.post(f"/v1/campaigns/{cid}/duels", headers=who)
            assert nxt.status_code == 201, nxt.text
            while not {j["status"] for j in jobs.jobs_tx(cid)} <= {"collected"}:  # adopted by the second server
                assert time.monotonic() < deadline, jobs.jobs_tx(cid)
                await asyncio.sleep(0.1)
            asked = provider_app.state.provider.requests
            assert [e for e in asked if "batch" not in e] == direct  # the next duel's answers came from the store
            # every (model, prompt) answered once, by a batch or directly; each request in one batch only
            assert max(Counter((e["model"], e["prompt"]) for e in asked).values()) == 1
            assert (
                max(
                    Counter(
                        b for batch in provider_batch_inputs(provider.url + "/v1", f"llmduel-{cid}-") for b in batch
                    ).values()
                )
                == 1
            )
            # every answer the provider gave is charged once: list price for the direct calls, batch price for
            # the batched ones (the second server may be pre-generating more: wait until it is all charged)
            while True:
                asked = list(provider_app.state.provider.requests)
                tokens = [
                    sum(e["prompt_tokens"] + e["completion_tokens"] for e in asked if ("batch" in e) == b)
                    for b in (0, 1)
                ]
                spend = (await api.get(f"/v1/campaigns/{cid}")).json()["spend"]
                if spend == pytest.approx(tokens[0] * 2e-6 + tokens[1] * 1e-6, abs=1e-7):
                    break
                assert time.monotonic() < deadline, (spend, tokens)
                await asyncio.sleep(0.1)
        assert not logged_tracebacks(caplog)
    finally:
        db.dispose()
        stop_live_server(server)
        provider.stop()


async def test_a_budget_that_holds_part_of_a_round_cuts_the_round_and_ends_before_a_round_it_cannot_start(
    db_url, batch_fake
):
    """A round reserves each duel's worst case before anything is sent: with a budget of 2.5 duels' worst case
    and rounds of 8, the first round sends 2 duels; the campaign goes on while the budget holds a duel and ends
    (budget_exhausted) at the first round that cannot reserve one, before that round sends anything; the spend
    never passes the budget."""
    from sqlalchemy import select

    from service.models import Campaign
    from service.money.reserve import reserve_duel_nusd

    base, provider_app = batch_fake
    async with app_client(db_url, base_url="http://t") as api:
        app = api.app
        spec = batch_body(base, "part of a round", {"round_size": 8, "poll_seconds": 0.02})
        # a judge call's bound capped near its real cost (else the bound of its input, answers of up to
        # MAX_ANSWER_BYTES, is thousands of times what it costs, and no budget of a few bounds runs out)
        spec["judge"]["client"]["max_cost_per_query"] = 0.0005
        probe = (await api.post("/v1/campaigns", json={**spec, "budget": 1000.0})).json()["id"]
        with app.state.db.read() as s:
            c = s.execute(select(Campaign).where(Campaign.id == probe)).scalar_one()
            models, judge = c.models, c.judge
        worst = max(
            reserve_duel_nusd(models, i, j, judge=judge, prompt=p, judge_spent_nusd=0, duels_done=0)
            for p in spec["prompts"]
            for i in range(4)
            for j in range(4)
            if i != j
        )
        budget = 2.5 * worst / 1e9
        cid = (await api.post("/v1/campaigns", json={**spec, "budget": budget})).json()["id"]
        assert (await api.post(f"/v1/campaigns/{cid}/run", json={})).status_code == 202
        runs = app.state.campaigns.runs
        view = await run_over(api, app, cid)
        assert view["status"] == "budget_exhausted", (view["run"], view["spend"], budget, view["duels_created"])
        assert 0 < view["spend"] <= budget
        jobs = runs.batch_jobs.jobs_tx(cid)
        duels_of = lambda k: {r["duel_id"] for j in jobs if j["round"] == k for r in j["requests"]}  # noqa: E731
        assert len(duels_of(1)) == 2  # the third duel of round 1 could not reserve its worst case
        # the last round counted could reserve no duel: it sent nothing
        assert max(j["round"] for j in jobs) < view["batch"]["rounds"]
        duels = await all_duels(api, cid)
        assert view["spend"] == pytest.approx(sum(d["cost"] for d in duels))
        assert not [d for d in duels if d["status"] in ("calling", "pending")]
        assert_ledger(app, view, provider_app)


async def test_two_duels_of_a_round_with_the_same_verdict_key_do_not_hang_the_round(db_url, batch_fake):
    """Two prompts drawn with replacement, two models, answers and verdicts reused: duels of one round
    ask the judge the same question. The verdict store's first claim is recorded only at the round's fold, after its verdicts
    batch; a second duel of the round waiting for it would wait for ever. Each pays its own judge call in
    its round (nothing is stored twice), and later rounds reuse the stored verdict."""

    base, _ = batch_fake
    async with app_client(db_url, base_url="http://t") as api:
        app = api.app
        spec = batch_body(
            base,
            "same verdict key",
            {"round_size": 8, "poll_seconds": 0.02},
            max_duels=16,
            prompt_sampling="with_replacement",
        )
        spec["models"] = spec["models"][:2]
        spec["prompts"] = ["The first question?", "The second question?"]  # 8 duels of one pair: repeats
        cid = (await api.post("/v1/campaigns", json=spec)).json()["id"]
        assert (await api.post(f"/v1/campaigns/{cid}/run", json={})).status_code == 202
        view = await run_over(api, app, cid, timeout=90)
        duels = await all_duels(api, cid)
        judged = [d for d in duels if d["status"] == "judged"]
        assert len(judged) >= 4, (view["status"], view["run"], [(d["status"], d["error"]) for d in duels])
        reused = [d for d in judged if "reused_verdict" in (d["judge"] or {})]
        assert reused, "no later duel reused the stored verdict"
