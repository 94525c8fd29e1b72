"""Annotator management over the API (SQLite and PostgreSQL): create with an absolute
voting link, list with votes and agreement, revoke (token refused on the API and the
web page, pending duels released); the agreement rule on its own."""

from __future__ import annotations

import pytest
from service_helpers import campaign_body

from service.campaigns.annotators import agreement, outcome


def test_agreement_rule():
    # item (prompt 0, models 0/1): A1 votes m0 twice, A2 m0, A3 m1; A4 votes alone on another item
    votes = [
        (1, 0, 0, 1, "i"),
        (1, 0, 0, 1, "i"),
        (2, 0, 0, 1, "i"),
        (3, 0, 0, 1, "j"),
        (4, 1, 0, 1, "none"),
    ]
    got = agreement(votes)
    assert got[1] == (0.5, 1)  # the others split 1-1: each of A1's votes scores 1/2
    assert got[2] == (1.0, 1)  # the others: m0 twice, m1 once
    assert got[3] == (0.0, 1)
    assert got[4] == (None, 0)  # no shared item
    assert outcome("a", True) == "i" and outcome("a", False) == "j" and outcome("b", False) == "i"
    assert outcome("tie", True) == outcome("both_bad", False) == "none"


async def _vote_for(api, token: str, cid: int, model: int) -> dict:
    """The annotator (``token``) asks for a duel and votes for ``model`` (looked up as admin)."""
    who = {"Authorization": f"Bearer {token}"}
    r = await api.post(f"/v1/campaigns/{cid}/duels", headers=who)
    assert r.status_code == 201, r.text
    duel_id = r.json()["id"]
    full = (await api.get(f"/v1/duels/{duel_id}")).json()
    choice = "a" if full["model_a"] == model else "b"
    r = await api.post(f"/v1/duels/{duel_id}/vote", json={"choice": choice}, headers=who)
    assert r.status_code == 200, r.text
    return r.json()


async def test_create_list_and_revoke_annotators(api):
    body = campaign_body("annotators", costs=(1.0, 1.0), delta=1e-6)
    body["prompts"] = ["The one prompt."]
    r = await api.post("/v1/campaigns", json=body)
    assert r.status_code == 201, r.text
    cid = r.json()["id"]

    made = []
    for label in ("alice", "bob", "carol", None):
        r = await api.post(f"/v1/campaigns/{cid}/annotators", json={"label": label} if label else None)
        assert r.status_code == 201, r.text
        out = r.json()
        assert out["url"] == f"http://testserver/annotate/{out['token']}" and out["label"] == label
        assert r.headers["cache-control"] == "no-store"
        made.append(out)
    alice, bob, carol, dave = made

    await _vote_for(api, alice["token"], cid, 0)
    await _vote_for(api, alice["token"], cid, 0)
    await _vote_for(api, bob["token"], cid, 0)
    await _vote_for(api, carol["token"], cid, 1)

    r = await api.get(f"/v1/campaigns/{cid}/annotators")
    assert r.status_code == 200, r.text
    rows = {a["label"]: a for a in r.json()}
    assert [a["id"] for a in r.json()] == [a["id"] for a in made]
    assert (rows["alice"]["votes"], rows["alice"]["agreement"], rows["alice"]["shared_items"]) == (2, 0.5, 1)
    assert (rows["bob"]["votes"], rows["bob"]["agreement"]) == (1, 1.0)
    assert (rows["carol"]["votes"], rows["carol"]["agreement"]) == (1, 0.0)
    assert (rows[None]["votes"], rows[None]["agreement"], rows[None]["shared_items"]) == (0, None, 0)
    assert all(a["revoked_at"] is None and a["created_at"] for a in r.json())
    assert "token" not in r.text and alice["token"] not in r.text

    # dave asks for a duel, then is revoked: the token is refused, the duel released
    dave_h = {"Authorization": f"Bearer {dave['token']}"}
    r = await api.post(f"/v1/campaigns/{cid}/duels", headers=dave_h)
    assert r.status_code == 201, r.text
    dave_duel = r.json()["id"]
    r = await api.delete(f"/v1/campaigns/{cid}/annotators/{dave['id']}")
    assert r.status_code == 200, r.text
    assert r.json()["id"] == dave["id"] and r.json()["revoked_at"] is not None
    again = await api.delete(f"/v1/campaigns/{cid}/annotators/{dave['id']}")  # idempotent
    assert again.status_code == 200 and again.json()["revoked_at"] == r.json()["revoked_at"]
    for method, path in (("GET", f"/v1/campaigns/{cid}"), ("POST", f"/v1/campaigns/{cid}/duels")):
        assert (await api.request(method, path, headers=dave_h)).status_code == 401, path
    r = await api.post(f"/v1/duels/{dave_duel}/vote", json={"choice": "a"}, headers=dave_h)
    assert r.status_code == 401
    released = (await api.get(f"/v1/duels/{dave_duel}")).json()
    assert released["status"] == "expired" and "revoked" in released["error"]
    page = await api.get(f"/annotate/{dave['token']}", headers={"Authorization": ""})
    assert page.status_code == 403 and "not valid" in page.text
    # the others still work
    await _vote_for(api, bob["token"], cid, 0)

    # errors: unknown campaign or annotator, an annotator of another campaign, annotators are not admins
    assert (await api.get("/v1/campaigns/987654321/annotators")).status_code == 404
    assert (await api.delete(f"/v1/campaigns/{cid}/annotators/987654321")).status_code == 404
    other = (await api.post("/v1/campaigns", json=campaign_body("other"))).json()["id"]
    assert (await api.delete(f"/v1/campaigns/{other}/annotators/{alice['id']}")).status_code == 404
    alice_h = {"Authorization": f"Bearer {alice['token']}"}
    assert (await api.get(f"/v1/campaigns/{cid}/annotators", headers=alice_h)).status_code == 403
    assert (await api.delete(f"/v1/campaigns/{cid}/annotators/{bob['id']}", headers=alice_h)).status_code == 403
    r = await api.post(f"/v1/campaigns/{cid}/annotators", json={"label": "x", "admin": True})
    assert r.status_code == 422


@pytest.mark.parametrize("label", ["", "x" * 201])
async def test_bad_labels_are_refused(api, label):
    cid = (await api.post("/v1/campaigns", json=campaign_body("labels"))).json()["id"]
    r = await api.post(f"/v1/campaigns/{cid}/annotators", json={"label": label})
    assert r.status_code == 422, r.text
