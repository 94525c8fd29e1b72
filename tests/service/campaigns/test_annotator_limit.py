"""One annotator cannot hoard duels: at most ``max_pending_per_annotator`` in flight
(default 1); asking again hands back its oldest such duel (200, no new charge).
On SQLite and PostgreSQL, on the hot path and the general path, sequentially and
with concurrent requests (in process and over real HTTP to two server processes)."""

from __future__ import annotations

import asyncio

import httpx
import pytest
from conftest import ADMIN_KEY
from service_helpers import campaign_body

from service import cycle

ADMIN = {"Authorization": f"Bearer {ADMIN_KEY}"}


async def _campaign(api, **extra) -> int:
    r = await api.post("/v1/campaigns", json=campaign_body(name="hoarding", **extra))
    assert r.status_code == 201, r.text
    return r.json()["id"]


async def _token(api, cid: int) -> dict:
    r = await api.post(f"/v1/campaigns/{cid}/annotators", json={"label": "x"})
    assert r.status_code == 201, r.text
    return {"Authorization": f"Bearer {r.json()['token']}"}


@pytest.mark.parametrize("path", ["hot", "general"])
async def test_repeated_requests_hand_back_the_same_duel(api, monkeypatch, path):
    if path == "general":
        monkeypatch.setattr(cycle, "ENABLED", False)
    # A budget of 8 USD (2 models at 1 USD each; a duel in flight is charged and reserved): a hoarder could take it all.
    cid = await _campaign(api, costs=(1.0, 1.0), budget=8.0)
    view = (await api.get(f"/v1/campaigns/{cid}")).json()
    assert view["max_pending_per_annotator"] == 1
    hoarder, honest = await _token(api, cid), await _token(api, cid)
    first = await api.post(f"/v1/campaigns/{cid}/duels", headers=hoarder)
    assert first.status_code == 201, first.text
    for _ in range(100):
        again = await api.post(f"/v1/campaigns/{cid}/duels", headers=hoarder)
        assert again.status_code == 200 and again.json() == first.json()
    view = (await api.get(f"/v1/campaigns/{cid}")).json()
    assert view["duels_created"] == 1 and view["pending"] == 1 and view["spend"] == 2.0
    # The honest annotator is not locked out.
    other = await api.post(f"/v1/campaigns/{cid}/duels", headers=honest)
    assert other.status_code == 201 and other.json()["id"] != first.json()["id"]
    # Once it voted, the hoarder gets a new duel.
    assert (await api.post(f"/v1/duels/{first.json()['id']}/vote", json={"choice": "a"}, headers=hoarder)).is_success
    nxt = await api.post(f"/v1/campaigns/{cid}/duels", headers=hoarder)
    assert nxt.status_code == 201 and nxt.json()["id"] not in (first.json()["id"], other.json()["id"])


async def test_a_larger_limit_allows_that_many_then_hands_back_the_oldest(api):
    cid = await _campaign(api, max_pending_per_annotator=3)
    tok = await _token(api, cid)
    ids = []
    for _ in range(3):
        r = await api.post(f"/v1/campaigns/{cid}/duels", headers=tok)
        assert r.status_code == 201
        ids.append(r.json()["id"])
    for _ in range(5):
        r = await api.post(f"/v1/campaigns/{cid}/duels", headers=tok)
        assert r.status_code == 200 and r.json()["id"] == min(ids)
    assert (await api.get(f"/v1/campaigns/{cid}")).json()["duels_created"] == 3
    assert (await api.post(f"/v1/duels/{min(ids)}/vote", json={"choice": "b"}, headers=tok)).is_success
    r = await api.post(f"/v1/campaigns/{cid}/duels", headers=tok)  # 2 in flight: room for a third
    assert r.status_code == 201 and r.json()["id"] not in ids
    r = await api.post(f"/v1/campaigns/{cid}/duels", headers=tok)
    assert r.status_code == 200 and r.json()["id"] == sorted(ids)[1]


@pytest.mark.parametrize("bad", [0, -1, 101, "two", None])
async def test_limit_is_validated(api, bad):
    r = await api.post("/v1/campaigns", json=campaign_body(max_pending_per_annotator=bad))
    assert r.status_code == 422, r.text


@pytest.mark.parametrize("limit", [1, 2])
async def test_concurrent_requests_from_one_token_create_at_most_the_limit(api, limit):
    cid = await _campaign(api, max_pending_per_annotator=limit)
    tok = await _token(api, cid)
    rs = await asyncio.gather(*(api.post(f"/v1/campaigns/{cid}/duels", headers=tok) for _ in range(20)))
    assert all(r.status_code in (200, 201) for r in rs), [r.text for r in rs]
    assert sum(r.status_code == 201 for r in rs) == limit
    assert len({r.json()["id"] for r in rs}) == limit
    assert (await api.get(f"/v1/campaigns/{cid}")).json()["duels_created"] == limit


async def test_concurrent_requests_over_http_to_two_processes(live_server):
    async with httpx.AsyncClient(base_url=live_server.url, headers=ADMIN, timeout=30) as c:
        r = await c.post("/v1/campaigns", json=campaign_body(name="hoarding over http", max_pending_per_annotator=2))
        assert r.status_code == 201, r.text
        cid = r.json()["id"]
        tok = await _token(c, cid)
        rs = await asyncio.gather(*(c.post(f"/v1/campaigns/{cid}/duels", headers=tok) for _ in range(30)))
        assert all(r.status_code in (200, 201) for r in rs), [r.text for r in rs]
        assert sum(r.status_code == 201 for r in rs) == 2 and len({r.json()["id"] for r in rs}) == 2
        assert (await c.get(f"/v1/campaigns/{cid}")).json()["duels_created"] == 2


async def test_voting_page_double_request_waits_for_the_duel_in_flight(api):
    slow = [{"kind": "simulated", "latency_s": 0.5}] * 3
    cid = await _campaign(api, clients=slow)
    token = (await api.post(f"/v1/campaigns/{cid}/annotators", json={})).json()["token"]
    hdr = {"X-Llmduel": "1"}
    first, second = await asyncio.gather(
        api.post(f"/annotate/{token}/next", headers=hdr),
        api.post(f"/annotate/{token}/next", headers=hdr),
    )
    states = sorted([first.json()["state"], second.json()["state"]])
    assert states == ["duel", "wait"], (first.json(), second.json())
    waiting = first.json() if first.json()["state"] == "wait" else second.json()
    assert "still answering" in waiting["html"]
    assert (await api.get(f"/v1/campaigns/{cid}")).json()["duels_created"] == 1
    again = (await api.post(f"/annotate/{token}/next", headers=hdr)).json()
    assert again["state"] == "duel" and again["duel_id"] in (first.json()["duel_id"], second.json()["duel_id"])
