"""``Idempotency-Key`` on the POST and PATCH routes that create or spend (service/api/idempotency.py).

The same key and request again returns the first response and does nothing again (one
campaign, one duel, one vote, one annotator, one run); the same key with another request is
a 422 naming the key; two callers never share a key; a malformed key is a 422. SQLite and
PostgreSQL, through the ASGI app.
"""

from __future__ import annotations

import uuid

from service_helpers import campaign_body
from sqlalchemy import func, select

from service.models import Annotator, Campaign, Duel


def _key() -> dict:
    return {"Idempotency-Key": f"k-{uuid.uuid4()}"}


def _count(api, model, **where) -> int:
    with api.app.state.db.read() as s:
        q = select(func.count()).select_from(model)
        for name, value in where.items():
            q = q.where(getattr(model, name) == value)
        return int(s.execute(q).scalar_one())


async def test_a_repeated_create_returns_the_first_response_and_creates_nothing(api):
    name = f"idem-{uuid.uuid4().hex[:8]}"
    body = campaign_body(name)
    key = _key()
    first = await api.post("/v1/campaigns", json=body, headers=key)
    assert first.status_code == 201, first.text
    again = await api.post("/v1/campaigns", json=body, headers=key)
    assert again.status_code == 201 and again.json() == first.json()
    assert again.headers.get("idempotent-replayed") == "true"
    assert _count(api, Campaign, name=name) == 1
    # the same key with another body: 422 naming the key, nothing created
    other = await api.post("/v1/campaigns", json={**body, "seed": 8}, headers=key)
    assert other.status_code == 422 and key["Idempotency-Key"] in other.json()["detail"]
    assert "another request" in other.json()["detail"]
    assert _count(api, Campaign, name=name) == 1
    # without a key, or with a new one, a request runs again
    assert (await api.post("/v1/campaigns", json=body, headers=_key())).status_code == 201
    assert _count(api, Campaign, name=name) == 2


async def test_a_retried_duel_vote_and_annotator_are_made_and_paid_once(api):
    r = await api.post("/v1/campaigns", json=campaign_body(f"idem-votes-{uuid.uuid4().hex[:8]}"))
    cid = r.json()["id"]
    key = _key()
    made = [await api.post(f"/v1/campaigns/{cid}/annotators", json={"label": "x"}, headers=key) for _ in range(2)]
    assert [m.status_code for m in made] == [201, 201] and made[0].json() == made[1].json()
    assert _count(api, Annotator, campaign_id=cid) == 1
    who = {"Authorization": f"Bearer {made[0].json()['token']}"}
    key = _key()
    duels = [await api.post(f"/v1/campaigns/{cid}/duels", headers={**who, **key}) for _ in range(2)]
    assert [d.status_code for d in duels] == [201, 201] and duels[0].json()["id"] == duels[1].json()["id"]
    assert _count(api, Duel, campaign_id=cid) == 1
    duel_id = duels[0].json()["id"]
    key = _key()
    votes = [await api.post(f"/v1/duels/{duel_id}/vote", json={"choice": "a"}, headers={**who, **key}) for _ in "12"]
    assert [v.status_code for v in votes] == [200, 200] and votes[0].json() == votes[1].json()
    # a vote sent again with a new key is the duplicate it is (409), not a second vote
    dup = await api.post(f"/v1/duels/{duel_id}/vote", json={"choice": "a"}, headers={**who, **_key()})
    assert dup.status_code == 409
    campaign = (await api.get(f"/v1/campaigns/{cid}")).json()
    assert campaign["duels_counted"] == 1 and campaign["duels_created"] == 1
    # the admin's key space is not the annotator's: the same key on another caller runs
    r = await api.post(f"/v1/campaigns/{cid}/annotators", json={"label": "y"}, headers=key)
    assert r.status_code == 201 and _count(api, Annotator, campaign_id=cid) == 2


async def test_a_repeated_run_and_continue_are_answered_from_the_first(api):
    from service_helpers import simulated_judge

    body = campaign_body(f"idem-run-{uuid.uuid4().hex[:8]}", judge=simulated_judge(), max_duels=3)
    cid = (await api.post("/v1/campaigns", json=body)).json()["id"]
    key = _key()
    runs = [await api.post(f"/v1/campaigns/{cid}/run", json={"concurrency": 1}, headers=key) for _ in "12"]
    assert [r.status_code for r in runs] == [202, 202] and runs[0].json() == runs[1].json()
    key = _key()
    patches = [await api.patch(f"/v1/campaigns/{cid}", json={"max_duels": 50}, headers=key) for _ in "12"]
    assert patches[0].status_code == 200 and patches[1].status_code == 200
    assert patches[1].headers.get("idempotent-replayed") == "true"


async def test_a_malformed_key_is_a_422(api):
    for bad in ("", "x" * 256, "with space", "caf\u00e9".encode()):
        r = await api.post("/v1/campaigns", json=campaign_body("bad key"), headers={"Idempotency-Key": bad})
        assert r.status_code == 422 and "Idempotency-Key" in r.json()["detail"], (bad, r.text)
