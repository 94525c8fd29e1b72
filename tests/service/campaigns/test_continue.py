"""PATCH /v1/campaigns/{id}: raising the budget or the duel cap continues a campaign that
ended on it, with its policy state intact (replay exact), on the general and the hot path."""

from __future__ import annotations

import asyncio
import json

import httpx
import pytest
import respx
from service_helpers import campaign_body, simulated_judge

from service import cycle

EVEN = [[0.5] * 3 for _ in range(3)]  # no model can be certified: only the limits end these campaigns


async def drive(api, cid: int, limit: int = 200, headers: dict | None = None) -> int:
    """Request duels until the campaign refuses one; returns how many were created."""
    n = 0
    for _ in range(limit):
        r = await api.post(f"/v1/campaigns/{cid}/duels", headers=headers)
        if r.status_code != 201:
            assert r.status_code == 409, r.text
            return n
        n += 1
        if headers is not None:  # an annotator votes
            v = await api.post(f"/v1/duels/{r.json()['id']}/vote", json={"choice": "a"}, headers=headers)
            assert v.status_code == 200, v.text
    return n


async def replay_ok(api, cid: int) -> None:
    rep = (await api.get(f"/v1/campaigns/{cid}/replay")).json()
    assert rep["ok"] is True, rep["diff"]


async def test_continue_after_the_budget_ran_out(api):
    body = campaign_body(costs=(0.01, 0.01, 0.01), judge=simulated_judge(EVEN), budget=0.1)
    cid = (await api.post("/v1/campaigns", json=body)).json()["id"]
    first = await drive(api, cid)
    before = (await api.get(f"/v1/campaigns/{cid}")).json()
    assert before["status"] == "budget_exhausted" and before["end_limit"] == "budget", before["end_reason"]
    assert first == 5 and before["spend"] == pytest.approx(0.1)
    # below what is spent: 422; the duel cap is not what ended it: 409
    r = await api.patch(f"/v1/campaigns/{cid}", json={"budget": 0.05})
    assert r.status_code == 422 and "already spent" in r.text
    r = await api.patch(f"/v1/campaigns/{cid}", json={"max_duels": 100})
    assert r.status_code == 409 and "raise the budget" in r.text
    assert (await api.patch(f"/v1/campaigns/{cid}", json={})).status_code == 422
    r = await api.patch(f"/v1/campaigns/{cid}", json={"budget": 0.3})
    assert r.status_code == 200, r.text
    after = r.json()
    assert after["status"] == "running" and after["end_reason"] is None and after["end_limit"] is None
    assert after["budget"] == pytest.approx(0.3) and after["remaining_budget"] == pytest.approx(0.2)
    for key in ("counts", "wins", "t", "duels", "spend", "evidence", "leader"):  # the state is intact
        assert after[key] == before[key], key
    await replay_ok(api, cid)
    second = await drive(api, cid)
    assert second == 10
    end = (await api.get(f"/v1/campaigns/{cid}")).json()
    assert end["status"] == "budget_exhausted" and end["duels"] == 15 and end["t"] == 15
    await replay_ok(api, cid)


async def test_continue_after_max_duels_and_refusals(api):
    body = campaign_body(costs=(0.01, 0.02, 0.03), judge=simulated_judge(EVEN), max_duels=4)
    cid = (await api.post("/v1/campaigns", json=body)).json()["id"]
    assert await drive(api, cid) == 4
    view = (await api.get(f"/v1/campaigns/{cid}")).json()
    assert view["status"] == "stopped" and view["end_limit"] == "max_duels"
    assert (await api.patch(f"/v1/campaigns/{cid}", json={"max_duels": 3})).status_code == 422
    r = await api.patch(f"/v1/campaigns/{cid}", json={"max_duels": 4})
    assert r.status_code == 409 and "max_duels" in r.text  # not raised
    r = await api.patch(f"/v1/campaigns/{cid}", json={"max_duels": 9})
    assert r.status_code == 200 and r.json()["status"] == "running" and r.json()["max_duels"] == 9
    assert await drive(api, cid) == 5
    view = (await api.get(f"/v1/campaigns/{cid}")).json()
    assert view["status"] == "stopped" and view["duels"] == 9 and view["end_limit"] == "max_duels"
    await replay_ok(api, cid)
    # a campaign the admin stopped is not continued
    cid2 = (await api.post("/v1/campaigns", json=campaign_body(max_duels=3))).json()["id"]
    assert (await api.post(f"/v1/campaigns/{cid2}/stop")).status_code == 200
    r = await api.patch(f"/v1/campaigns/{cid2}", json={"max_duels": 30})
    assert r.status_code == 409 and "cannot be continued" in r.text
    # a running campaign gets its new limits and keeps running; duels in flight hold their place and reservation
    cid3 = (await api.post("/v1/campaigns", json=campaign_body(max_duels=3, costs=(1.0, 1.0, 1.0)))).json()["id"]
    r = await api.patch(f"/v1/campaigns/{cid3}", json={"max_duels": 5, "budget": 100})
    assert r.status_code == 200 and r.json()["status"] == "running" and r.json()["budget"] == 100
    duel = (await api.post(f"/v1/campaigns/{cid3}/duels")).json()  # human judge: stays in flight
    assert duel["status"] == "pending"
    # spent 2 USD (both answers) and the duel still holds its reservation of 2 USD, as the next plan counts it
    r = await api.patch(f"/v1/campaigns/{cid3}", json={"budget": 3.9})
    assert r.status_code == 422 and "reserved by duels in flight" in r.text
    assert (await api.patch(f"/v1/campaigns/{cid3}", json={"budget": 4.0})).status_code == 200
    assert (await api.patch(f"/v1/campaigns/{cid3}", json={"max_duels": 1})).status_code == 200  # 0 judged + 1
    r = await api.post(f"/v1/campaigns/{cid3}/duels")
    assert r.status_code == 409 and "in flight" in r.text  # the cap is held by the duel in flight
    assert (await api.post(f"/v1/duels/{duel['id']}/vote", json={"choice": "a"})).status_code == 200
    view = (await api.get(f"/v1/campaigns/{cid3}")).json()
    assert view["status"] == "stopped" and view["end_limit"] == "max_duels" and view["spend"] <= 4.0
    assert (await api.patch("/v1/campaigns/999999999", json={"max_duels": 5})).status_code == 404


async def test_continue_a_certified_campaign_is_409(api):
    body = campaign_body(judge=simulated_judge(), delta=0.2, max_duels=5000)
    cid = (await api.post("/v1/campaigns", json=body)).json()["id"]
    await drive(api, cid, limit=5000)
    view = (await api.get(f"/v1/campaigns/{cid}")).json()
    assert view["status"] == "certified", view["end_reason"]
    r = await api.patch(f"/v1/campaigns/{cid}", json={"max_duels": 6000})
    assert r.status_code == 409 and "certified" in r.text


async def test_hot_path_sees_the_raised_cap(api, monkeypatch):
    """Annotator cycles (the hot path) continue after the cap was raised, and stop exactly at the new cap."""
    used = {"plan": 0}

    def counting(fn):
        if asyncio.iscoroutinefunction(fn):

            async def awrapper(*args, **kwargs):
                out = await fn(*args, **kwargs)
                used["plan"] += 1
                return out

            return awrapper

        def wrapper(*args, **kwargs):
            out = fn(*args, **kwargs)
            used["plan"] += 1
            return out

        return wrapper

    monkeypatch.setattr(cycle, "plan_duel", counting(cycle.plan_duel))
    monkeypatch.setattr(cycle, "plan_duel_async", counting(cycle.plan_duel_async))
    cid = (await api.post("/v1/campaigns", json=campaign_body(max_duels=3, delta=1e-6, budget=50.0))).json()["id"]
    token = (await api.post(f"/v1/campaigns/{cid}/annotators", json={"label": "a"})).json()["token"]
    ann = {"Authorization": f"Bearer {token}"}
    assert await drive(api, cid, headers=ann) == 3
    assert (await api.get(f"/v1/campaigns/{cid}")).json()["status"] == "stopped"
    assert used["plan"] == 3
    r = await api.patch(f"/v1/campaigns/{cid}", json={"max_duels": 7})
    assert r.status_code == 200 and r.json()["status"] == "running"
    assert await drive(api, cid, headers=ann) == 4
    assert used["plan"] == 7  # every plan after the PATCH took the hot path too
    view = (await api.get(f"/v1/campaigns/{cid}")).json()
    assert view["status"] == "stopped" and view["duels"] == 7 and view["end_limit"] == "max_duels"
    await replay_ok(api, cid)


async def test_continued_campaign_sends_its_ended_webhook_again(api):
    hook = "http://hooks.test/llmduel"
    body = campaign_body(costs=(0.01, 0.01, 0.01), judge=simulated_judge(EVEN), max_duels=2, webhook_url=hook)
    seen: list[dict] = []

    def receive(request: httpx.Request) -> httpx.Response:
        seen.append(json.loads(request.content))
        return httpx.Response(200)

    async def delivered(n: int) -> dict:
        for _ in range(200):
            view = (await api.get(f"/v1/campaigns/{cid}")).json()
            if len(seen) >= n and view["webhook_state"] == "sent":
                return view
            await asyncio.sleep(0.02)
        raise AssertionError(f"webhook {n} not delivered: {seen}")

    with respx.mock(assert_all_called=False) as mock:
        mock.post(hook).mock(side_effect=receive)
        cid = (await api.post("/v1/campaigns", json=body)).json()["id"]
        await drive(api, cid)
        await delivered(1)
        r = await api.patch(f"/v1/campaigns/{cid}", json={"max_duels": 4})
        assert r.json()["webhook_state"] == "none"
        await drive(api, cid)
        await delivered(2)
    assert [e["campaign"]["duels"] for e in seen] == [2, 4]
    assert all(e["campaign"]["status"] == "stopped" for e in seen)


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def empty_db_url(request, tmp_path):
    """A new, empty database (no schema yet), on each backend."""
    if request.param == "sqlite":
        yield f"sqlite:///{tmp_path / 'old.db'}"
        return
    import uuid

    import psycopg
    from sqlalchemy.engine import make_url

    server = make_url(request.getfixturevalue("pg_url"))
    conninfo = server.set(drivername="postgresql", database="postgres").render_as_string(hide_password=False)
    name = f"llmduel_mig_{uuid.uuid4().hex[:10]}"
    with psycopg.connect(conninfo, autocommit=True) as conn:
        conn.execute(f'CREATE DATABASE "{name}"')
    yield server.set(database=name).render_as_string(hide_password=False)
    with psycopg.connect(conninfo, autocommit=True) as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


def test_migration_0006_fills_end_limit_of_existing_campaigns(empty_db_url):
    """Campaigns stored before the end_limit column keep their rows; the ones that ended on a limit can continue."""
    from sqlalchemy import JSON, column, create_engine, insert, select, table

    from service.db import normalise_database_url, upgrade_database
    from service.models import Campaign, utcnow

    upgrade_database(empty_db_url, "0001")
    engine = create_engine(normalise_database_url(empty_db_url))
    now = utcnow()
    base = dict(
        algorithm="dctas-pc", delta=0.05, tie_policy="drop", models=[], n_prompts=1, judge={"kind": "human"},
        seed=1, policy_state={}, counts={}, stats={}, event_seq=0, spend_nusd=0, judge_spend_nusd=0,
        duels_created=0, duels_judged=0, duels_counted=0, duels_failed=0, run_active=False, run_concurrency=1,
        webhook_state="none", version=0, created_at=now, updated_at=now,
    )  # fmt: skip
    rows = [
        ("budget", "budget_exhausted", "spend reached the budget"),
        ("cap", "stopped", "max_duels (40) reached"),
        ("admin", "stopped", "stopped by the admin"),
        ("won", "certified", "certified by the dctas-pc stopping rule at delta=0.05"),
        ("live", "running", None),
    ]
    t = Campaign.__table__
    # the columns of 0001 only (later migrations add more, with defaults the ORM table would send;
    # 0033 moved the policy's JSON to policy_checkpoints)
    names_0001 = ["id", "name", "status", "end_reason", *base]
    moved = {n: JSON() for n in ("policy_state", "counts", "stats")}
    t0 = table("campaigns", *[column(n, moved[n] if n in moved else t.c[n].type) for n in names_0001])
    columns_0001 = [t0.c[n] for n in names_0001]
    with engine.begin() as conn:
        for name, status, reason in rows:
            conn.execute(insert(t0).values(name=name, status=status, end_reason=reason, **base))
    upgrade_database(empty_db_url, "0006")
    with engine.connect() as conn:
        got = dict(conn.execute(select(t.c.name, t.c.end_limit)).all())
        assert len(conn.execute(select(*columns_0001)).all()) == 5
    engine.dispose()
    assert got == {"budget": "budget", "cap": "max_duels", "admin": None, "won": None, "live": None}


async def test_a_background_run_continues_a_raised_budget(api):
    """A run ends with the budget; after PATCH the campaign runs again (POST /run) to the new budget, replay exact."""
    body = campaign_body(costs=(0.01, 0.01, 0.01), judge=simulated_judge(EVEN), budget=0.1)
    cid = (await api.post("/v1/campaigns", json=body)).json()["id"]

    async def run_to_end() -> dict:
        for _ in range(200):  # the previous run's task may still be finishing in this process: 409 meanwhile
            r = await api.post(f"/v1/campaigns/{cid}/run", json={"concurrency": 2})
            if r.status_code != 409 or "already active" not in r.text:
                break
            await asyncio.sleep(0.02)
        assert r.status_code == 202, r.text
        for _ in range(600):
            view = (await api.get(f"/v1/campaigns/{cid}")).json()
            if view["status"] != "running" and not view["run"]["active"] and view["pending"] == 0:
                return view
            await asyncio.sleep(0.02)
        raise AssertionError(view)

    view = await run_to_end()
    assert view["status"] == "budget_exhausted" and view["spend"] <= 0.1 + 1e-12
    assert (await api.post(f"/v1/campaigns/{cid}/run", json={})).status_code == 409  # ended: no run
    r = await api.patch(f"/v1/campaigns/{cid}", json={"budget": 0.2})
    assert r.status_code == 200 and r.json()["status"] == "running" and r.json()["run"]["active"] is False
    view = await run_to_end()
    assert view["status"] == "budget_exhausted" and 0.1 < view["spend"] <= 0.2 + 1e-12
    await replay_ok(api, cid)
