"""The vote cycle's two drivers (service/cycle/) store the same thing.

The same scripted annotator session is run on every driver the backend has, and
everything stored must be the same: the campaign's counters, policy state and
statistics, every duel's pair, status, choice, score, sequence numbers and charges.
Duels whose models answer through a provider store their answers in their own
transaction: the same script on both drivers leaves the same charge rows, spend and
answer store rows (stored answers, image spares).
On PostgreSQL: the asyncpg driver (on the event loop) against the SQLAlchemy driver in
worker threads (LLMDUEL_INLINE_TRANSACTIONS=0). SQLite has the SQLAlchemy driver
only: its session is checked against the script (statuses, counts, exact replay).
"""

from __future__ import annotations

import asyncio
import re
import threading
import time
from contextlib import contextmanager

import pytest
from service_helpers import all_duels, campaign_body

from service import cycle as fastpath
from service.campaigns import draws

# The session: a tie (dropped), duels left in flight, a duplicate vote, votes
# that arrive out of order, "both bad"; a 4-model campaign with a budget and
# max_duels far away (checked but not reached), tie_policy=half for some.
CHOICES = ["a", "b", "tie", "a", "both_bad", "b", "a", "a", "b", "tie", "a", "b", "b", "a", "a", "b"]

VOLATILE = {"id", "name", "created_at", "updated_at", "ended_at", "campaign_id"}


def strip(view: dict) -> dict:
    out = {k: v for k, v in view.items() if k not in VOLATILE and not k.endswith("_at") and k != "charges"}
    if isinstance(out.get("judged_by"), str):  # each session has its own annotator
        out["judged_by"] = out["judged_by"].split(":")[0]
    return out


async def session(api, name: str, tie_policy: str) -> tuple[dict, list[dict]]:
    body = campaign_body(
        name=name,
        costs=[0.004, 0.001, 0.002, 0.003],
        tie_policy=tie_policy,
        budget=50.0,
        max_duels=10_000,
        delta=1e-6,
        max_pending_per_annotator=5,  # the session holds up to 4 duels in flight
    )
    cid = (await api.post("/v1/campaigns", json=body)).json()["id"]
    token = (await api.post(f"/v1/campaigns/{cid}/annotators", json={"label": "fast"})).json()["token"]
    ann = {"Authorization": f"Bearer {token}"}
    held = []
    for n, choice in enumerate(CHOICES):
        r = await api.post(f"/v1/campaigns/{cid}/duels", headers=ann)
        assert r.status_code == 201, r.text
        duel = r.json()
        assert duel["status"] == "pending" and duel["answer_a"] and duel["answer_b"]
        if n % 5 == 1:  # keep it in flight for a while: later pairs see it as pending
            held.append((duel["id"], choice))
            continue
        r = await api.post(f"/v1/duels/{duel['id']}/vote", json={"choice": choice}, headers=ann)
        assert r.status_code == 200, r.text
        assert r.json()["status"] == "judged" and r.json()["choice"] == choice
        if n == 3:
            again = await api.post(f"/v1/duels/{duel['id']}/vote", json={"choice": "b"}, headers=ann)
            assert again.status_code == 409, again.text
    for duel_id, choice in reversed(held):
        r = await api.post(f"/v1/duels/{duel_id}/vote", json={"choice": choice}, headers=ann)
        assert r.status_code == 200, r.text
    view = (await api.get(f"/v1/campaigns/{cid}")).json()
    duels = await all_duels(api, cid)
    rep = (await api.get(f"/v1/campaigns/{cid}/replay")).json()
    assert rep["ok"] is True, rep["diff"]
    return view, duels


@pytest.mark.parametrize("tie_policy", ["drop", "half"])
async def test_fast_path_stores_exactly_what_the_general_path_stores(api, monkeypatch, tie_policy):

    monkeypatch.setattr(draws, "new_draw_key", lambda: "5e" * 32)  # every session draws the same prompts and sides
    svc = api.app.state.campaigns.cycle
    on_postgres = not svc.db.is_sqlite
    used = {"plan": 0, "vote": 0, "plan_async": 0, "vote_async": 0}

    def counting(kind, fn):
        if asyncio.iscoroutinefunction(fn):

            async def awrapper(*args, **kwargs):
                out = await fn(*args, **kwargs)  # counted once it returned
                used[kind] += 1
                return out

            return awrapper

        def wrapper(*args, **kwargs):
            out = fn(*args, **kwargs)
            used[kind] += 1
            return out

        return wrapper

    for name, kind in (
        ("plan_duel", "plan"),
        ("record_vote", "vote"),
        ("plan_duel_async", "plan_async"),
        ("record_vote_async", "vote_async"),
    ):
        monkeypatch.setattr(fastpath, name, counting(kind, getattr(fastpath, name)))

    runs = {}
    n = len(CHOICES)
    # 1. the fast path this backend uses by default
    runs["fast"] = await session(api, "fast path", tie_policy)
    expected = (
        {"plan": 0, "vote": 0, "plan_async": n, "vote_async": n}
        if on_postgres
        else {"plan": n, "vote": n, "plan_async": 0, "vote_async": 0}
    )
    assert used == expected  # every step took it
    if on_postgres:  # 2. the SQLAlchemy driver in worker threads, the reference
        monkeypatch.setattr(svc, "_on_loop", False)
        used.update(dict.fromkeys(used, 0))
        runs["sqlalchemy on postgres"] = await session(api, "sync driver", tie_policy)
        assert used == {"plan": n, "vote": n, "plan_async": 0, "vote_async": 0}
    # SQLite has one driver: its run is checked against the script alone
    slow_view, slow_duels = runs.pop("sqlalchemy on postgres" if on_postgres else "fast")
    not_decisive = sum(c in ("tie", "both_bad") for c in CHOICES)  # dropped, or counted as 0.5 each
    assert slow_view["duels_counted"] == n - (not_decisive if tie_policy == "drop" else 0)
    for label, (view, duels) in runs.items():
        assert strip(view) == strip(slow_view), label
        assert len(duels) == len(slow_duels) == n
        for f, s in zip(duels, slow_duels):
            assert strip(f) == strip(s), (label, f, s)
            assert [(c["kind"], c["model_index"], c["amount"]) for c in f["charges"]] == [
                (c["kind"], c["model_index"], c["amount"]) for c in s["charges"]
            ], label


async def _ending(api, name: str, **limits) -> tuple[dict, list[dict]]:
    """Vote for model 0 until the campaign ends; then a plan is refused as ended."""
    body = campaign_body(name=name, costs=[1.0, 1.0], delta=0.5, webhook_url="http://127.0.0.1:9/hook", **limits)
    cid = (await api.post("/v1/campaigns", json=body)).json()["id"]
    for _ in range(200):
        r = await api.post(f"/v1/campaigns/{cid}/duels")
        if r.status_code == 409:  # the plan ended it (the next duel's bound exceeds the budget)
            break
        d = r.json()
        r = await api.post(f"/v1/duels/{d['id']}/vote", json={"choice": "a" if d["model_a"] == 0 else "b"})
        assert r.status_code == 200, r.text
        if r.json()["campaign_status"] != "running":  # the vote ended it
            r = await api.post(f"/v1/campaigns/{cid}/duels")
            break
    assert r.status_code == 409 and "ended" in r.json()["detail"]
    rep = (await api.get(f"/v1/campaigns/{cid}/replay")).json()
    assert rep["ok"] is True, rep["diff"]
    return (await api.get(f"/v1/campaigns/{cid}")).json(), await all_duels(api, cid)


@pytest.mark.parametrize("limits", [{}, {"max_duels": 3}, {"budget": 4.0}, {"budget": 5.0}])
async def test_the_vote_that_ends_the_campaign_is_decided_on_the_fast_path(api, monkeypatch, limits):
    """Certification, max_duels and a spent budget end the campaign (the vote that certifies,
    reaches max_duels or spends the budget; the plan whose bound exceeds what is left), and both
    drivers store the same thing."""

    monkeypatch.setattr(draws, "new_draw_key", lambda: "5e" * 32)  # both campaigns draw the same prompts and sides
    svc = api.app.state.campaigns.cycle
    fast_view, fast_duels = await _ending(api, "fast ending", **limits)
    slow_view, slow_duels = fast_view, fast_duels  # SQLite has one driver
    if svc._on_loop:  # PostgreSQL: the SQLAlchemy driver against the asyncpg one
        monkeypatch.setattr(fastpath, "ENABLED", False)
        slow_view, slow_duels = await _ending(api, "general ending", **limits)
    expected = {"max_duels": "stopped", "budget": "budget_exhausted"}.get(next(iter(limits), None), "certified")
    for view in {
        id(v): v for v in (fast_view, slow_view)
    }.values():  # the outbox has the event (its delivery is under way: not compared)
        assert view["status"] == expected and view.pop("webhook_state") != "none", view
        view.pop("webhook_error")
    assert strip(fast_view) == strip(slow_view)
    assert [strip(d) for d in fast_duels] == [strip(d) for d in slow_duels]
    # both outbox rows read back through the ORM with their times (SQLite's CAST(... AS DATETIME)
    # once stored the hot path's event time as the number 2026, which broke every later delivery)
    import datetime as dt

    from sqlalchemy import select

    from service.models import WebhookEvent

    with api.app.state.db.read() as s:
        ids = [fast_view["id"], slow_view["id"]]
        times = s.execute(
            select(WebhookEvent.created_at, WebhookEvent.next_attempt_at).where(WebhookEvent.campaign_id.in_(ids))
        ).all()
    assert len(times) == len(set(ids)) and all(isinstance(t, dt.datetime) for row in times for t in row), times


@pytest.fixture
async def pg_api(pg_url):
    """An httpx.AsyncClient (admin) on an app over PostgreSQL; ``pg_api.app`` is the app."""
    from conftest import app_client

    from service.db import upgrade_database

    upgrade_database(pg_url)
    async with app_client(pg_url, timeout=30) as client:
        yield client


def _conninfo(pg_url) -> str:
    from sqlalchemy.engine import make_url

    return make_url(pg_url).set(drivername="postgresql").render_as_string(hide_password=False)


@contextmanager
def held_row_lock(pg_url, campaign_id: int):
    """Another connection (in a thread) holds the campaign's row lock until the block
    ends or ``release()`` is called."""
    import psycopg

    locked, release = threading.Event(), threading.Event()

    def hold():
        with psycopg.connect(_conninfo(pg_url)) as conn:
            conn.execute("SELECT id FROM campaigns WHERE id = %s FOR UPDATE", (campaign_id,))
            locked.set()
            release.wait(10)

    holder = threading.Thread(target=hold)
    holder.start()

    def release_now():
        release.set()
        holder.join()

    try:
        assert locked.wait(10)
        yield release_now
    finally:
        release_now()


@pytest.mark.postgres
async def test_a_vote_waiting_for_a_row_lock_does_not_hold_up_the_event_loop(pg_api, pg_url):
    """Another transaction holds the campaign's row: the vote waits for it on the
    event loop without blocking it (other requests are served meanwhile), then
    counts once."""
    api, svc = pg_api, pg_api.app.state.campaigns.cycle
    cid = (await api.post("/v1/campaigns", json=campaign_body(name="held lock"))).json()["id"]
    other = (await api.post("/v1/campaigns", json=campaign_body(name="other campaign"))).json()["id"]
    for _ in range(3):
        d = (await api.post(f"/v1/campaigns/{cid}/duels")).json()
        assert (await api.post(f"/v1/duels/{d['id']}/vote", json={"choice": "a"})).status_code == 200
    assert svc.hot_counts["loop"] >= 6 and svc.hot_counts["thread"] == 0, svc.hot_counts
    d = (await api.post(f"/v1/campaigns/{cid}/duels")).json()

    with held_row_lock(pg_url, cid) as release:
        before = dict(svc.hot_counts)
        vote = asyncio.create_task(api.post(f"/v1/duels/{d['id']}/vote", json={"choice": "b"}))
        await asyncio.sleep(0.3)
        assert not vote.done()  # waiting for the lock
        t0 = time.monotonic()
        for _ in range(3):  # meanwhile a duel and a vote of another campaign go through on the loop
            o = (await api.post(f"/v1/campaigns/{other}/duels")).json()
            assert (await api.post(f"/v1/duels/{o['id']}/vote", json={"choice": "a"})).status_code == 200
        served = time.monotonic() - t0
        assert not vote.done()
        release()
        r = await asyncio.wait_for(vote, 10)
    assert r.status_code == 200, r.text
    assert served < 2.0, served
    assert svc.hot_counts["loop"] == before["loop"] + 7 and svc.hot_counts["thread"] == before["thread"]
    dup = await api.post(f"/v1/duels/{d['id']}/vote", json={"choice": "a"})
    assert dup.status_code == 409
    view = (await api.get(f"/v1/campaigns/{cid}")).json()
    assert view["duels"] == 4 and view["pending"] == 0
    for c in (cid, other):
        rep = (await api.get(f"/v1/campaigns/{c}/replay")).json()
        assert rep["ok"] is True, rep["diff"]


@pytest.mark.postgres
async def test_pooled_connections_killed_by_the_server_cost_no_request(pg_api, pg_url):
    """The server ends the hot pool's idle connections (a restart, a proxy): the next
    requests reconnect by themselves and succeed; nothing is lost or counted twice."""
    import psycopg

    api, svc = pg_api, pg_api.app.state.campaigns.cycle
    cid = (await api.post("/v1/campaigns", json=campaign_body(name="killed connections"))).json()["id"]
    d = (await api.post(f"/v1/campaigns/{cid}/duels")).json()
    assert (await api.post(f"/v1/duels/{d['id']}/vote", json={"choice": "a"})).status_code == 200
    connects = svc.db.hot_pool.connects
    pids = [c.get_server_pid() for c in svc.db.hot_pool._idle]
    assert pids
    with psycopg.connect(_conninfo(pg_url), autocommit=True) as conn:
        for pid in pids:
            conn.execute("SELECT pg_terminate_backend(%s)", (pid,))
    await asyncio.sleep(0.2)
    for _ in range(3):
        d = await api.post(f"/v1/campaigns/{cid}/duels")
        assert d.status_code == 201, d.text
        r = await api.post(f"/v1/duels/{d.json()['id']}/vote", json={"choice": "b"})
        assert r.status_code == 200, r.text
    assert svc.db.hot_pool.connects > connects
    view = (await api.get(f"/v1/campaigns/{cid}")).json()
    assert view["duels"] == 4 and view["duels_created"] == 4 and view["pending"] == 0
    rep = (await api.get(f"/v1/campaigns/{cid}/replay")).json()
    assert rep["ok"] is True, rep["diff"]


@pytest.mark.postgres
async def test_a_lock_held_past_the_command_timeout_gives_503_and_nothing_is_written(pg_api, pg_url):
    """A transaction elsewhere holds the campaign's row longer than the hot path's
    command timeout: the vote gets 503 with a JSON message (not 500), its connection
    is dropped, nothing is written; once the lock is free the same vote counts once."""
    api, svc = pg_api, pg_api.app.state.campaigns.cycle
    cid = (await api.post("/v1/campaigns", json=campaign_body(name="long lock"))).json()["id"]
    d = (await api.post(f"/v1/campaigns/{cid}/duels")).json()
    svc.db.hot_pool.connect_kwargs["command_timeout"] = 0.5
    svc.db.hot_pool.discard_idle()
    with held_row_lock(pg_url, cid):
        r = await api.post(f"/v1/duels/{d['id']}/vote", json={"choice": "a"})
    assert r.status_code == 503, r.text
    assert r.json()["detail"] == "the database is unavailable; retry later" and r.headers["retry-after"] == "1"
    assert svc.db.hot_pool._idle == [] or all(not c.is_in_transaction() for c in svc.db.hot_pool._idle)
    view = (await api.get(f"/v1/campaigns/{cid}")).json()
    assert view["duels"] == 0 and view["pending"] == 1  # nothing was written
    r = await api.post(f"/v1/duels/{d['id']}/vote", json={"choice": "a"})
    assert r.status_code == 200, r.text
    view = (await api.get(f"/v1/campaigns/{cid}")).json()
    assert view["duels"] == 1 and view["pending"] == 0
    rep = (await api.get(f"/v1/campaigns/{cid}/replay")).json()
    assert rep["ok"] is True, rep["diff"]


async def test_reservations_on_stored_answers_are_the_same_on_every_path(api, monkeypatch):
    """Provider models with answer reuse: a duel's reservation (``expected_cost_nusd``) leaves out
    the answers already stored, which every path looks up; the stored duels, reservations and
    charges are identical whichever path planned them."""
    import uuid

    import httpx
    import respx
    from sqlalchemy import select

    from service.models import Charge, Duel, to_nusd

    monkeypatch.setattr(draws, "new_draw_key", lambda: "3c" * 32)
    svc = api.app.state.campaigns.cycle
    monkeypatch.setattr(svc.deps.pregen, "schedule", lambda cid: None)  # no background answers: a fixed store
    # the policy's marginal costs refreshed before every plan, not by a timer: the same pairs on every path
    monkeypatch.setattr(api.app.state.campaigns.stores, "store_costs_ttl", 0.0)
    refresh = svc.deps.stores.update_store_costs

    async def costs_now(campaign_id, wait):
        await refresh(campaign_id, True)

    monkeypatch.setattr(svc.deps.stores, "update_store_costs", costs_now)
    on_postgres = not svc.db.is_sqlite
    used = {"plan": 0, "plan_async": 0}
    for name, kind in (("plan_duel", "plan"), ("plan_duel_async", "plan_async")):
        fn = getattr(fastpath, name)
        if asyncio.iscoroutinefunction(fn):

            async def wrapped(*a, _fn=fn, _k=kind, **k):
                out = await _fn(*a, **k)
                used[_k] += 1
                return out
        else:

            def wrapped(*a, _fn=fn, _k=kind, **k):
                out = _fn(*a, **k)
                used[_k] += 1
                return out

        monkeypatch.setattr(fastpath, name, wrapped)

    def reply(request: httpx.Request) -> httpx.Response:
        return httpx.Response(
            200,
            json={
                "choices": [{"message": {"role": "assistant", "content": "an answer"}}],
                "usage": {"prompt_tokens": 12, "completion_tokens": 50},
            },
        )

    async def run(label: str) -> list:
        tag = uuid.uuid4().hex[:8]
        body = {
            "name": label,
            "models": [
                {
                    "name": n,
                    "cost": 0.001,
                    "client": {
                        "kind": "openai",
                        "base_url": "http://fastpath.test/v1",
                        "model": f"{tag}-{n}",
                        "price": {"input_per_1m": 1.0, "output_per_1m": 1000.0},
                        "params": {"max_tokens": 100},
                    },
                }
                for n in "abc"
            ],
            "prompts": [f"question {n}" for n in range(3)],
            "judge": {"kind": "human", "fee_per_vote": 0.001},
            "budget": 50.0,
            "seed": 9,
        }
        cid = (await api.post("/v1/campaigns", json=body)).json()["id"]
        token = (await api.post(f"/v1/campaigns/{cid}/annotators", json={"label": "s"})).json()["token"]
        ann = {"Authorization": f"Bearer {token}"}
        for n in range(10):
            r = await api.post(f"/v1/campaigns/{cid}/duels", headers=ann)
            assert r.status_code == 201, r.text
            r = await api.post(f"/v1/duels/{r.json()['id']}/vote", json={"choice": "ab"[n % 2]}, headers=ann)
            assert r.status_code == 200, r.text
        with svc.db.read() as s:
            duels = [
                (d.number, d.model_i, d.model_j, d.prompt_index, d.a_is_i, d.status, d.expected_cost_nusd, d.cost_nusd)
                for d in s.execute(select(Duel).where(Duel.campaign_id == cid).order_by(Duel.number)).scalars()
            ]
            charges = [
                (ch.kind, ch.model_index, ch.amount_nusd, ch.reuses_charge_id is not None)
                for ch in s.execute(select(Charge).where(Charge.campaign_id == cid).order_by(Charge.id)).scalars()
            ]
        return [duels, charges]

    runs = {}
    with respx.mock(assert_all_called=False) as mock:
        mock.post("http://fastpath.test/v1/chat/completions").mock(side_effect=reply)
        runs["fast"] = await run("fast path")
        # PostgreSQL: every plan on the asyncpg driver; SQLite: on the SQLAlchemy one
        assert used["plan_async" if on_postgres else "plan"] >= 1 and used["plan" if on_postgres else "plan_async"] == 0
        if on_postgres:
            monkeypatch.setattr(svc, "_on_loop", False)
            runs["sync on postgres"] = await run("sync driver")
        general = runs.pop("sync on postgres" if on_postgres else "fast")  # the SQLAlchemy driver's run
    reservations = [d[6] for d in general[0]]
    assert len(set(reservations)) > 1 and min(reservations) == to_nusd(0.001)  # some duels reused both answers
    for label, got in runs.items():
        assert got == general, label


@pytest.mark.postgres
async def test_stale_duels_a_pooled_duel_and_refusals_are_decided_on_the_event_loop(pg_api, pg_url):
    """Expiring stale duels, handing a skipped duel over, refusing a vote on an expired duel
    and handing an annotator its own duel back run on the event loop (no general transaction
    in a thread), and store what the general transaction stores: replay stays exact."""
    import psycopg

    api, svc = pg_api, pg_api.app.state.campaigns.cycle
    cid = (await api.post("/v1/campaigns", json=campaign_body(name="on the loop"))).json()["id"]

    async def annotator(label: str) -> dict:
        r = await api.post(f"/v1/campaigns/{cid}/annotators", json={"label": label})
        return {"Authorization": f"Bearer {r.json()['token']}"}

    def age(duel_id: int) -> None:  # the duel's expiry passes
        with psycopg.connect(_conninfo(pg_url)) as conn:
            conn.execute("UPDATE duels SET expires_at = now() - interval '1 second' WHERE id = %s", (duel_id,))

    async def status(duel_id: int) -> str:
        return (await api.get(f"/v1/duels/{duel_id}")).json()["status"]

    alice, bob = await annotator("alice"), await annotator("bob")
    first = (await api.post(f"/v1/campaigns/{cid}/duels", headers=alice)).json()
    before = dict(svc.hot_counts)
    again = await api.post(f"/v1/campaigns/{cid}/duels", headers=alice)  # her own duel, handed back
    assert again.status_code == 200 and again.json()["id"] == first["id"]
    assert (await api.post(f"/v1/duels/{first['id']}/skip", headers=alice)).status_code == 204
    handed = await api.post(f"/v1/campaigns/{cid}/duels", headers=bob)  # the pooled duel, handed over
    assert handed.status_code == 200 and handed.json()["id"] == first["id"]
    age(first["id"])
    vote = await api.post(f"/v1/duels/{first['id']}/vote", headers=bob, json={"choice": "a"})
    assert vote.status_code == 409 and "expired" in vote.json()["detail"]
    assert await status(first["id"]) == "expired"
    second = (await api.post(f"/v1/campaigns/{cid}/duels", headers=alice)).json()
    age(second["id"])
    third = await api.post(f"/v1/campaigns/{cid}/duels", headers=alice)  # expires the stale one first
    assert third.status_code == 201 and await status(second["id"]) == "expired"
    assert (await api.post(f"/v1/duels/{third.json()['id']}/vote", headers=alice, json={"choice": "b"})).is_success
    assert svc.hot_counts["thread"] == before["thread"], svc.hot_counts
    assert svc.hot_counts["loop"] >= before["loop"] + 3
    assert (await api.get(f"/v1/campaigns/{cid}/replay")).json()["ok"] is True


async def test_marginal_costs_that_change_between_duels_are_recorded_on_the_fast_path(api, monkeypatch):
    """When the stores' marginal costs change before a selection, the fast path records them on
    the duel (``costs_at_select``) and stores the policy's new state, as the general path does:
    replay, which applies the recorded costs, stays exact and both paths pick the same duels."""
    from sqlalchemy import select

    from service.models import Duel

    monkeypatch.setattr(draws, "new_draw_key", lambda: "5e" * 32)
    svc = api.app.state.campaigns.cycle
    costs = [None, {"costs": [0.5, 1.0, 1.0], "judge_cost": 0.0}, None, {"costs": [0.1, 0.1, 2.0], "judge_cost": 0.0}]
    current: dict = {}
    monkeypatch.setattr(svc.deps.stores, "store_costs_for", lambda cid: current.get(cid))

    async def session(name: str) -> tuple[list[dict], list]:
        cid = (await api.post("/v1/campaigns", json=campaign_body(name=name, delta=1e-6))).json()["id"]
        for target in costs:
            if target is not None:
                current[cid] = target
            d = (await api.post(f"/v1/campaigns/{cid}/duels")).json()
            assert (await api.post(f"/v1/duels/{d['id']}/vote", json={"choice": "a"})).status_code == 200
        rep = (await api.get(f"/v1/campaigns/{cid}/replay")).json()
        assert rep["ok"] is True, rep["diff"]
        with svc.db.read() as s:
            query = select(Duel.costs_at_select).where(Duel.campaign_id == cid).order_by(Duel.id)
            recorded = list(s.execute(query).scalars())
        return await all_duels(api, cid), recorded

    fast, fast_costs = await session("fast costs")
    assert fast_costs == [None, costs[1], None, costs[3]]
    if svc._on_loop:  # PostgreSQL: the SQLAlchemy driver picks the same duels
        monkeypatch.setattr(fastpath, "ENABLED", False)
        slow, slow_costs = await session("general costs")
        assert slow_costs == fast_costs
        assert [strip(d) for d in fast] == [strip(d) for d in slow]


# ---------------------------------------------------------------- the answers stage on both drivers
FAKE = "http://fake.test/v1"
_FAKE_TOKEN = re.compile(r"<<fake:[0-9a-f]{36}>>|sha256:[0-9a-f]{64}")


def _provider_model(name: str, model: str, cost: float, *, image_n: int | None = None, **client) -> dict:
    """A model of the fake provider (the ``fake`` fixture): text, or images ``image_n`` a call."""
    out = {"name": name, "cost": cost, "client": {"kind": "openai", "base_url": FAKE, "model": model, **client}}
    if image_n is not None:
        out["output"] = "image"
        out["client"]["params"] = {"size": "32x32", "n": image_n}
    return out


def _provider_body(name: str, models: list[dict], prompts: list[str], answers: str) -> dict:
    return {"name": name, "models": models, "prompts": prompts, "judge": {"kind": "human"}, "answers": answers}


async def _answers_script(api) -> list[int]:
    """The admin's duels of four campaigns whose models answer through the provider (so every duel
    stores its answers in their own transaction), each pending duel voted on: stored and reused text
    answers; a provider fault that pauses its campaign; images three a call (spares kept, taken and
    shown); a failing model beside an image model (a paid call's images all kept, spares taken and
    given back). Their ids."""
    broken = {"max_attempts": 1}
    campaigns = [
        (
            _provider_body(
                "answers reused",
                [
                    _provider_model("good", "ans-good-q4", 0.004),
                    _provider_model("mid", "ans-mid-q2", 0.002),
                    _provider_model("weak", "ans-weak-q1", 0.003),
                ],
                ["Say hello.", "Explain duels."],
                "reuse",
            ),
            8,
        ),
        (
            _provider_body(
                "answers fault",
                [_provider_model("good", "ans-good-q4", 0.004), _provider_model("faulty", "ans-usage-nan", 0.002)],
                ["Say hello."],
                "reuse",
            ),
            1,
        ),
        (
            _provider_body(
                "answers images",
                [
                    _provider_model("painter", "ans-paint-q4", 0.04, image_n=3),
                    _provider_model("sketchy", "ans-sketch-q1", 0.02, image_n=3),
                ],
                ["A lighthouse at dusk."],
                "fresh",
            ),
            4,
        ),
        (
            _provider_body(
                "answers images failing",
                [
                    _provider_model("painter", "ans-paint2-q4", 0.04, image_n=3),
                    _provider_model("broken", "ans-fault-500-q2", 0.02, image_n=3, **broken),
                ],
                ["A lighthouse at dusk."],
                "fresh",
            ),
            3,
        ),
    ]
    cids = []
    for body, n in campaigns:
        r = await api.post("/v1/campaigns", json={**body, "seed": 7, "delta": 1e-6, "budget": 10.0})
        assert r.status_code == 201, r.text
        cid = r.json()["id"]
        cids.append(cid)
        for k in range(n):
            d = await api.post(f"/v1/campaigns/{cid}/duels")
            assert d.status_code == 201, d.text
            if d.json()["status"] == "pending":
                v = await api.post(f"/v1/duels/{d.json()['id']}/vote", json={"choice": "ab"[k % 2]})
                assert v.status_code == 200, v.text
        rep = (await api.get(f"/v1/campaigns/{cid}/replay")).json()
        assert rep["ok"] is True, rep["diff"]
    return cids


def _answers_state(api, cids: list[int], store_after: int) -> dict:
    """What the script stored, with the ids and the provider's answer tokens (a fresh random marker or
    image per call) replaced by their order of first appearance (store rows: by model and prompt, then
    id), so two runs compare: the campaigns,
    their duels, every charge row (kind, model, amount, detail, the charge it reuses) and the answer
    store's rows written since row ``store_after`` (status, text, tokens, cost, paying charge, taker)."""
    from sqlalchemy import select

    from service.models import Campaign, Charge, Duel, StoredAnswer

    seen: dict[tuple[str, object], str] = {}

    def canon(kind: str, value):
        if value is None:
            return None
        return seen.setdefault((kind, value), f"{kind}{sum(k == kind for k, _ in seen)}")

    def text(value):
        return None if value is None else _FAKE_TOKEN.sub(lambda m: canon("t", m.group(0)), value)

    def completion(info):  # a duel's record of one call: its latency varies, a reused answer names its row
        if info is None:
            return None
        return {**info, "latency_s": None, "reused_answer": canon("s", info.get("reused_answer"))}

    with api.app.state.db.read() as s:
        campaigns = [s.get(Campaign, cid) for cid in cids]
        duels = s.execute(select(Duel).where(Duel.campaign_id.in_(cids)).order_by(Duel.id)).scalars().all()
        charges = s.execute(select(Charge).where(Charge.campaign_id.in_(cids)).order_by(Charge.id)).scalars().all()
        store = (
            s.execute(
                select(StoredAnswer)
                .where(StoredAnswer.id > store_after)  # both models' rows are claimed at once: ordered by model
                .order_by(StoredAnswer.model_key, StoredAnswer.prompt_hash, StoredAnswer.id)
            )
            .scalars()
            .all()
        )
        for d in duels:
            canon("d", d.id)
        for ch in charges:
            canon("c", ch.id)
        for row in store:
            canon("s", row.id)
        return {
            "campaigns": [
                {
                    k: getattr(c, k)
                    for k in ("status", "end_reason", "spend_nusd", "judge_spend_nusd", "duels_created", "duels_judged")
                    + ("duels_failed", "duels_counted", "event_seq", "leader", "version")
                }
                for c in campaigns
            ],
            "duels": [
                (cids.index(d.campaign_id), d.number, d.model_i, d.model_j, d.a_is_i, d.status, d.choice, d.score)
                + (d.error, d.cost_nusd, d.expected_cost_nusd, d.record_seq, text(d.answer_a), text(d.answer_b))
                + (completion(d.completion_a), completion(d.completion_b), d.answered_at is None, d.judged_at is None)
                for d in duels
            ],
            "charges": [
                (cids.index(ch.campaign_id), canon("d", ch.duel_id), ch.kind, ch.model_index, ch.amount_nusd)
                + (
                    canon("c", ch.reuses_charge_id),
                    ch.detail and {**ch.detail, "store_id": canon("s", ch.detail.get("store_id"))},
                )
                for ch in charges
            ],
            "store": [
                (row.model_key, row.prompt_hash, row.status, text(row.text), row.input_tokens, row.output_tokens)
                + (row.cost_nusd, canon("c", row.charge_id), canon("d", row.taken_by))
                for row in store
            ],
        }


async def test_the_answers_stage_stores_exactly_the_same_on_both_drivers(api, fake, monkeypatch):
    """The same duels, answered through the provider, stored by the asyncpg driver and by the SQLAlchemy
    driver (PostgreSQL; SQLite has the SQLAlchemy driver only, checked against the script): identical
    campaigns (spend, counters, a provider fault's pause), duels, charge rows (paid, reused, each reuse
    naming the charge that paid) and answer store rows (stored answers, image spares taken, shown, given
    back and kept)."""
    from sqlalchemy import delete, func, select

    from service.campaigns.store_lookup import StoredKeys
    from service.models import StoredAnswer

    monkeypatch.setattr(draws, "new_draw_key", lambda: "5e" * 32)  # every run draws the same prompts and sides
    svc = api.app.state.campaigns.cycle
    # the policy's marginal costs (answers stored so far) refreshed before every plan, not by a timer:
    # the same pairs in every run
    monkeypatch.setattr(svc.deps.stores, "store_costs_ttl", 0.0)
    refresh = svc.deps.stores.update_store_costs

    async def costs_now(campaign_id, wait):
        await refresh(campaign_id, True)

    monkeypatch.setattr(svc.deps.stores, "update_store_costs", costs_now)
    used = {"loop": 0, "thread": 0}
    on_loop, in_thread = fastpath.store_answers_async, svc.store_answers_tx

    async def counted_on_loop(*args):
        used["loop"] += 1
        return await on_loop(*args)

    def counted_in_thread(*args):
        used["thread"] += 1
        return in_thread(*args)

    monkeypatch.setattr(fastpath, "store_answers_async", counted_on_loop)
    monkeypatch.setattr(svc, "store_answers_tx", counted_in_thread)

    def store_top() -> int:
        with api.app.state.db.read() as s:
            return int(s.execute(select(func.coalesce(func.max(StoredAnswer.id), 0))).scalar_one())

    runs = []
    for driver in ("asyncpg", "sqlalchemy") if svc._on_loop else ("sqlalchemy",):
        monkeypatch.setattr(svc, "_on_loop", driver == "asyncpg")
        svc.stored_keys = StoredKeys()  # the run before left none of its answers in the store
        top, calls = store_top(), len(fake.state.provider.requests)
        used.update(loop=0, thread=0)
        cids = await _answers_script(api)
        n = len(fake.state.provider.requests) - calls
        state = _answers_state(api, cids, top)
        # and the API's campaign views: counts, wins, statistics
        state["views"] = [strip((await api.get(f"/v1/campaigns/{cid}")).json()) for cid in cids]
        runs.append((driver, state, n, dict(used)))
        with api.app.state.db.write() as s:  # the next run pays for its own answers
            s.execute(delete(StoredAnswer).where(StoredAnswer.id > top))
    ((driver, state, calls, used_here), *others) = runs
    # every duel's answers were stored in their own transaction, on the driver of the run
    assert used_here == ({"loop": 0, "thread": 16} if driver == "sqlalchemy" else {"loop": 16, "thread": 0})
    # the script as run: reuse, a failing model, the pause, spares drawn without replacement
    import pprint

    pprint.pprint(state, width=200)
    statuses = [c["status"] for c in state["campaigns"]]
    assert statuses == ["running", "stopped", "running", "running"], state["campaigns"]
    assert state["campaigns"][1]["end_reason"].startswith("paused on a provider fault")
    kinds = [(ch[2], ch[4] == 0, ch[5] is not None) for ch in state["charges"]]
    assert ("model", True, True) in kinds and ("model", False, False) in kinds  # reused and paid
    assert {row[2] for row in state["store"]} == {"ready", "spare", "spent"}
    assert {d[5] for d in state["duels"]} == {"judged", "failed"}
    assert [c["spend_nusd"] for c in state["campaigns"]] == [
        sum(ch[4] for ch in state["charges"] if ch[0] == k) for k in range(4)
    ]
    for label, other, other_calls, other_used in others:
        assert other_used == {"loop": 0, "thread": 16}, label
        assert other_calls == calls, label
        for key in ("campaigns", "views", "duels", "charges", "store"):
            assert other[key] == state[key], (label, key)
