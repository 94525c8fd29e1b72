"""Annotation integrity: an annotator reads and votes only on the duels handed to it; the admin,
who is not blind, cannot vote on a hybrid campaign's selected duels; a skipped duel goes back to
the pool, its skipper included when no other annotator can take it. SQLite and PostgreSQL, through
the ASGI app."""

from __future__ import annotations

from conftest import app_client
from service_helpers import admin_duels_until_selected, campaign_body, hybrid_campaign


async def _annotator(api, cid: int, label: str) -> dict:
    r = await api.post(f"/v1/campaigns/{cid}/annotators", json={"label": label})
    assert r.status_code == 201, r.text
    return {"Authorization": f"Bearer {r.json()['token']}"}


async def test_an_annotator_cannot_read_or_vote_on_a_duel_not_handed_to_it(api):
    cid = (await api.post("/v1/campaigns", json=campaign_body("integrity"))).json()["id"]
    ann = await _annotator(api, cid, "x")
    admin_duel = (await api.post(f"/v1/campaigns/{cid}/duels")).json()  # the admin's own duel
    assert (await api.get(f"/v1/duels/{admin_duel['id']}", headers=ann)).status_code == 404
    r = await api.post(f"/v1/duels/{admin_duel['id']}/vote", json={"choice": "a"}, headers=ann)
    assert r.status_code == 404 and r.json()["detail"] == f"duel {admin_duel['id']} not found"
    assert (await api.get(f"/v1/duels/{admin_duel['id']}")).json()["status"] == "pending"  # not voted
    # the duel handed to it: readable and votable
    mine = (await api.post(f"/v1/campaigns/{cid}/duels", headers=ann)).json()
    assert (await api.get(f"/v1/duels/{mine['id']}", headers=ann)).status_code == 200
    assert (await api.post(f"/v1/duels/{mine['id']}/vote", json={"choice": "b"}, headers=ann)).status_code == 200


async def test_an_annotator_cannot_read_duels_the_hybrid_judge_settled_alone(api, monkeypatch):
    cid, (p, _) = await hybrid_campaign(api, monkeypatch)
    sel = await admin_duels_until_selected(api, cid)
    page = (await api.get(f"/v1/campaigns/{cid}/duels", params={"status": "judged"})).json()
    judged = [d["id"] for d in page["items"]]
    assert judged
    for duel_id in judged:  # settled by the judge alone: the same 404 as a missing id
        r = await api.get(f"/v1/duels/{duel_id}", headers=p)
        assert r.status_code == 404, r.text
    # a selected duel not yet handed to p: 404 too (no 404 tells which duels went to humans)
    assert (await api.get(f"/v1/duels/{sel['id']}", headers=p)).status_code == 404


async def test_the_admin_cannot_vote_on_a_hybrid_campaigns_selected_duel(api, monkeypatch):
    cid, (p, _) = await hybrid_campaign(api, monkeypatch)
    sel = await admin_duels_until_selected(api, cid)
    r = await api.post(f"/v1/duels/{sel['id']}/vote", json={"choice": "a"})
    assert r.status_code == 403 and "blind" in r.json()["detail"], r.text
    after = (await api.get(f"/v1/duels/{sel['id']}")).json()
    assert after["status"] == "pending" and after["choice"] is None
    # an annotator still gets it and votes
    assert (await api.post(f"/v1/campaigns/{cid}/duels", headers=p)).json()["id"] == sel["id"]
    assert (await api.post(f"/v1/duels/{sel['id']}/vote", json={"choice": "a"}, headers=p)).status_code == 200


async def test_a_hybrid_campaign_with_one_annotator_does_not_stall_on_a_skip(api, monkeypatch):
    """The skipped duel goes back to the pool behind the others, and to its skipper when no other
    annotator can take it (before, it stayed in the pool for 30 days and every later duel of its
    pair waited behind it: votes charged, none counted)."""
    cid, (p, _) = await hybrid_campaign(api, monkeypatch, rate=1.0)
    listed = (await api.get(f"/v1/campaigns/{cid}/annotators")).json()
    rows = listed["items"] if isinstance(listed, dict) else listed
    q_id = next(a["id"] for a in rows if a["label"] == "q")
    assert (await api.delete(f"/v1/campaigns/{cid}/annotators/{q_id}")).status_code == 200  # p alone now
    first = await admin_duels_until_selected(api, cid)
    second = await admin_duels_until_selected(api, cid)
    assert (await api.post(f"/v1/campaigns/{cid}/duels", headers=p)).json()["id"] == first["id"]
    assert (await api.post(f"/v1/duels/{first['id']}/skip", headers=p)).status_code in (200, 204)
    # the duel p did not skip comes first, then the skipped one comes back to p
    for expected in (second["id"], first["id"]):
        r = await api.post(f"/v1/campaigns/{cid}/duels", headers=p)
        assert r.status_code in (200, 201) and r.json()["id"] == expected, r.text
        assert (await api.post(f"/v1/duels/{expected}/vote", json={"choice": "a"}, headers=p)).status_code == 200
    view = (await api.get(f"/v1/campaigns/{cid}")).json()
    assert view["hybrid"]["human_votes"] == 2 and view["hybrid"]["human_votes_waiting"] == 0
    assert view["t"] == 2  # both counted
    assert (await api.get(f"/v1/campaigns/{cid}/replay")).json()["ok"] is True


async def test_skips_are_limited_per_annotator(db_url):
    """Past LLMDUEL_MAX_SKIPS_PER_ANNOTATOR skips of one campaign an annotator must vote (409), even
    when others took every duel it skipped (before, it could skip without end and pick its duels)."""
    async with app_client(db_url, max_skips_per_annotator=2) as api:
        cid = (await api.post("/v1/campaigns", json=campaign_body("skip limit"))).json()["id"]
        x, y = await _annotator(api, cid, "x"), await _annotator(api, cid, "y")
        for n in range(3):
            duel = (await api.post(f"/v1/campaigns/{cid}/duels", headers=x)).json()
            r = await api.post(f"/v1/duels/{duel['id']}/skip", headers=x)
            if n < 2:
                assert r.status_code == 204, r.text
                taken = (await api.post(f"/v1/campaigns/{cid}/duels", headers=y)).json()
                assert taken["id"] == duel["id"]  # y takes the skipped duel from the pool, and votes
                assert (await api.post(f"/v1/duels/{duel['id']}/vote", json={"choice": "a"}, headers=y)).is_success
            else:
                assert r.status_code == 409 and "LLMDUEL_MAX_SKIPS_PER_ANNOTATOR=2" in r.json()["detail"], r.text
                assert (await api.post(f"/v1/duels/{duel['id']}/vote", json={"choice": "b"}, headers=x)).is_success


async def test_requests_are_limited_per_annotator_token(db_url):
    async with app_client(db_url, annotator_requests_per_minute=5) as api:
        cid = (await api.post("/v1/campaigns", json=campaign_body("request limit"))).json()["id"]
        x, y = await _annotator(api, cid, "x"), await _annotator(api, cid, "y")
        codes = [(await api.get(f"/v1/campaigns/{cid}", headers=x)).status_code for _ in range(6)]
        assert codes == [200] * 5 + [429]
        r = await api.get(f"/v1/campaigns/{cid}", headers=x)
        assert r.status_code == 429 and int(r.headers["retry-after"]) >= 1 and "annotator" in r.json()["detail"]
        assert (await api.get(f"/v1/campaigns/{cid}", headers=y)).status_code == 200  # another token: its own
        assert [(await api.get(f"/v1/campaigns/{cid}")).status_code for _ in range(8)] == [200] * 8  # admin: no limit
