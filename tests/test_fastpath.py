"""The Core fast path of a vote cycle (service/fastpath.py) against the general ORM path.

The same scripted annotator session is run twice on SQLite and on PostgreSQL: once
with the fast path (inline on the event loop on PostgreSQL), once with it switched
off. Everything stored must be the same: the campaign's counters, policy state and
statistics, every duel's pair, status, choice, score, sequence numbers and charges.
"""

from __future__ import annotations

import asyncio
import threading
import time

import pytest
from service_helpers import all_duels, campaign_body

from service import fastpath

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
    body = campaign_body(name=name, costs=[0.004, 0.001, 0.002, 0.003], tie_policy=tie_policy, budget=50.0,
                         max_duels=10_000, delta=1e-6)
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
    used = {"plan": 0, "vote": 0}
    plan, vote = fastpath.plan_duel, fastpath.record_vote

    def counting(kind, fn):
        def wrapper(*args, **kwargs):
            out = fn(*args, **kwargs)  # a Fallback is not counted
            used[kind] += 1
            return out
        return wrapper

    monkeypatch.setattr(fastpath, "plan_duel", counting("plan", plan))
    monkeypatch.setattr(fastpath, "record_vote", counting("vote", vote))
    fast_view, fast_duels = await session(api, "fast path", tie_policy)
    assert used == {"plan": len(CHOICES), "vote": len(CHOICES)}  # every step took the fast path

    monkeypatch.setattr(fastpath, "ENABLED", False)
    used.update(plan=0, vote=0)
    slow_view, slow_duels = await session(api, "general path", tie_policy)
    assert used == {"plan": 0, "vote": 0}

    assert strip(fast_view) == strip(slow_view)
    not_decisive = sum(c in ("tie", "both_bad") for c in CHOICES)  # dropped, or counted as 0.5 each
    assert fast_view["duels_counted"] == len(CHOICES) - (not_decisive if tie_policy == "drop" else 0)
    assert len(fast_duels) == len(slow_duels) == len(CHOICES)
    for f, s in zip(fast_duels, slow_duels):
        assert strip(f) == strip(s), (f, s)
        assert [(c["kind"], c["model_index"], c["amount"]) for c in f["charges"]] == \
            [(c["kind"], c["model_index"], c["amount"]) for c in s["charges"]]


async def test_fast_path_falls_back_for_the_vote_that_certifies(api, monkeypatch):
    """The certifying vote, max_duels and an ended campaign go to the general path."""
    body = campaign_body(name="fast certify", costs=[1.0, 1.0], delta=0.5)
    cid = (await api.post("/v1/campaigns", json=body)).json()["id"]
    for _ in range(200):
        d = (await api.post(f"/v1/campaigns/{cid}/duels")).json()
        r = await api.post(f"/v1/duels/{d['id']}/vote", json={"choice": "a" if d["model_a"] == 0 else "b"})
        assert r.status_code == 200, r.text
        if r.json()["campaign_status"] != "running":
            break
    view = (await api.get(f"/v1/campaigns/{cid}")).json()
    assert view["status"] == "certified" and view["winner"] == "m0", view
    r = await api.post(f"/v1/campaigns/{cid}/duels")
    assert r.status_code == 409 and "ended" in r.json()["detail"]
    rep = (await api.get(f"/v1/campaigns/{cid}/replay")).json()
    assert rep["ok"] is True, rep["diff"]


@pytest.mark.postgres
async def test_inline_vote_gives_way_to_a_held_row_lock(pg_url):
    """Another transaction holds the campaign's row: the inline attempt gives up
    after its lock_timeout, the vote waits in a worker thread, and counts once."""
    import httpx
    import psycopg
    from conftest import ADMIN_KEY, make_settings
    from sqlalchemy.engine import make_url

    from service.app import create_app
    from service.db import upgrade_database

    upgrade_database(pg_url)
    app = create_app(make_settings(pg_url))
    svc = app.state.service
    conninfo = make_url(pg_url).set(drivername="postgresql").render_as_string(hide_password=False)
    try:
        async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://t",
                                     headers={"Authorization": f"Bearer {ADMIN_KEY}"}, timeout=30) as api:
            cid = (await api.post("/v1/campaigns", json=campaign_body(name="held lock"))).json()["id"]
            for _ in range(3):  # warm the inline pool and check it is used
                d = (await api.post(f"/v1/campaigns/{cid}/duels")).json()
                assert (await api.post(f"/v1/duels/{d['id']}/vote", json={"choice": "a"})).status_code == 200
            assert svc.inline_counts["inline"] >= 4, svc.inline_counts
            d = (await api.post(f"/v1/campaigns/{cid}/duels")).json()

            locked, release = threading.Event(), threading.Event()

            def hold():
                with psycopg.connect(conninfo) as conn:
                    conn.execute("SELECT id FROM campaigns WHERE id = %s FOR UPDATE", (cid,))
                    locked.set()
                    release.wait(10)
                    time.sleep(0.3)

            holder = threading.Thread(target=hold)
            holder.start()
            assert locked.wait(10)
            before = dict(svc.inline_counts)
            release.set()  # the holder commits 0.3 s from now, while the vote waits for it
            t0 = time.monotonic()
            r = await api.post(f"/v1/duels/{d['id']}/vote", json={"choice": "b"})
            waited = time.monotonic() - t0
            holder.join()
            assert r.status_code == 200, r.text
            assert svc.inline_counts["thread"] == before["thread"] + 1, svc.inline_counts
            assert waited >= 0.2  # it waited for the lock (in a thread), not errored
            dup = await api.post(f"/v1/duels/{d['id']}/vote", json={"choice": "a"})
            assert dup.status_code == 409
            view = (await api.get(f"/v1/campaigns/{cid}")).json()
            assert view["duels"] == 4 and view["pending"] == 0
            rep = (await api.get(f"/v1/campaigns/{cid}/replay")).json()
            assert rep["ok"] is True, rep["diff"]
            await asyncio.sleep(0)
    finally:
        await svc.aclose()
        app.state.db.dispose()
