"""The voting page annotators like (issue 25, item 6): votes done and remaining,
guidelines rendered safely, a skip that hands the duel to another annotator (not
counted, shown per annotator), a comment stored with the vote and exported, and the
fake provider's markers shown as text, not as links. SQLite and PostgreSQL."""

from __future__ import annotations

import json
import re

from service_helpers import campaign_body

GUIDELINES = "Prefer the **correct** answer.\n\n<script>alert('x')</script> [bad](javascript:alert(1))"
JSON_HDR = {"X-Llmduel": "1"}


async def _campaign(api, **extra) -> dict:
    body = campaign_body(judge={"kind": "human", "guidelines": GUIDELINES}, **extra)
    r = await api.post("/v1/campaigns", json=body)
    assert r.status_code == 201, r.text
    return r.json()


async def _annotator(api, cid: int, label: str) -> tuple[dict, str, int]:
    r = await api.post(f"/v1/campaigns/{cid}/annotators", json={"label": label})
    assert r.status_code == 201, r.text
    token = r.json()["token"]
    return {"Authorization": f"Bearer {token}"}, token, r.json()["id"]


async def _next(api, cid: int, hdr: dict) -> dict:
    r = await api.post(f"/v1/campaigns/{cid}/duels", headers=hdr)
    assert r.status_code in (200, 201), r.text
    return r.json()


async def test_skip_hands_the_duel_to_another_annotator(api):
    c = await _campaign(api)
    cid = c["id"]
    alice, _, alice_id = await _annotator(api, cid, "alice")
    bob, _, bob_id = await _annotator(api, cid, "bob")
    first = await _next(api, cid, alice)
    assert first["status"] == "pending"
    # bob cannot skip (or read) alice's duel: the same 404 as a missing id
    assert (await api.post(f"/v1/duels/{first['id']}/skip", headers=bob)).status_code == 404
    assert (await api.post("/v1/duels/999999999/skip", headers=bob)).status_code == 404
    r = await api.post(f"/v1/duels/{first['id']}/skip", headers=alice)
    assert r.status_code == 204, r.text
    # skipped twice: it is no longer hers
    assert (await api.post(f"/v1/duels/{first['id']}/skip", headers=alice)).status_code == 404
    # in the pool nobody owns it: no annotator reads or votes on it by id
    assert (await api.get(f"/v1/duels/{first['id']}", headers=bob)).status_code == 404
    vote = await api.post(f"/v1/duels/{first['id']}/vote", headers=bob, json={"choice": "a"})
    assert vote.status_code == 404
    # alice gets a new duel, never the one she skipped
    second = await _next(api, cid, alice)
    assert second["id"] != first["id"]
    # bob is handed the pooled duel before any new one
    handed = await _next(api, cid, bob)
    assert handed["id"] == first["id"]
    assert handed["answer_a"] == first["answer_a"] and handed["answer_b"] == first["answer_b"]
    # nothing was counted or charged again by the skip
    view = (await api.get(f"/v1/campaigns/{cid}")).json()
    assert view["duels"] == 0
    admin_duel = (await api.get(f"/v1/duels/{first['id']}", params={"charges": "true"})).json()
    assert admin_duel["choice"] is None and admin_duel["counted"] is False
    r = await api.post(f"/v1/duels/{first['id']}/vote", headers=bob, json={"choice": "tie"})
    assert r.status_code == 200, r.text
    # skips per annotator
    rows = {a["id"]: a for a in (await api.get(f"/v1/campaigns/{cid}/annotators")).json()}
    assert rows[alice_id]["skips"] == 1 and rows[alice_id]["votes"] == 0
    assert rows[bob_id]["skips"] == 0 and rows[bob_id]["votes"] == 1
    # an admin does not skip
    assert (await api.post(f"/v1/duels/{second['id']}/skip")).status_code == 403


async def test_comment_is_stored_with_the_vote_and_exported(api):
    c = await _campaign(api)
    cid = c["id"]
    alice, _, _ = await _annotator(api, cid, "alice")
    duel = await _next(api, cid, alice)
    too_long = await api.post(
        f"/v1/duels/{duel['id']}/vote", headers=alice, json={"choice": "a", "comment": "x" * 2001}
    )
    assert too_long.status_code == 422
    assert (await api.get(f"/v1/duels/{duel['id']}")).json()["choice"] is None  # nothing was written
    note = "A is right; B misreads the question."
    r = await api.post(f"/v1/duels/{duel['id']}/vote", headers=alice, json={"choice": "a", "comment": note})
    assert r.status_code == 200, r.text
    assert r.json()["comment"] == note
    assert (await api.get(f"/v1/duels/{duel['id']}", headers=alice)).json()["comment"] == note
    assert (await api.get(f"/v1/duels/{duel['id']}")).json()["comment"] == note
    files = (await api.get(f"/v1/campaigns/{cid}/export")).json()["files"]
    battles = [json.loads(line) for line in files["battles.jsonl"].splitlines()]
    assert [b.get("comment") for b in battles if b["duel_id"] == duel["id"]] == [note]
    (mine,) = [b for b in battles if b["duel_id"] == duel["id"]]
    assert mine["annotator"] == "alice" and mine["judge"].startswith("annotator:")  # label beside the stable id


async def test_annotator_campaign_view_has_guidelines_and_progress(api):
    c = await _campaign(api, max_duels=10)
    cid = c["id"]
    alice, _, _ = await _annotator(api, cid, "alice")
    view = (await api.get(f"/v1/campaigns/{cid}", headers=alice)).json()
    assert view["guidelines"] == GUIDELINES
    assert view["votes_counted"] == 0 and view["max_duels"] == 10
    duel = await _next(api, cid, alice)
    assert (await api.post(f"/v1/duels/{duel['id']}/vote", headers=alice, json={"choice": "b"})).status_code == 200
    view = (await api.get(f"/v1/campaigns/{cid}", headers=alice)).json()
    assert view["votes_counted"] == 1
    assert "models" not in view and "spend" not in view  # still blind


async def test_voting_page_shows_progress_guidelines_and_skips(api):
    c = await _campaign(api, max_duels=10)
    cid = c["id"]
    _, token, _ = await _annotator(api, cid, "alice")
    page = (await api.get(f"/annotate/{token}")).text
    # guidelines rendered as Markdown, without script or javascript: links
    assert "<strong>correct</strong>" in page
    assert "<script>alert" not in page and 'href="javascript' not in page
    assert "&lt;script&gt;alert" in page  # shown as text
    r = await api.post(f"/annotate/{token}/next", headers=JSON_HDR)
    panel = r.json()
    assert panel["state"] == "duel"
    html = panel["html"]
    assert 'id="skip"' in html and 'name="comment"' in html
    assert re.search(r'id="my-votes">0<', html) and re.search(r'id="votes-remaining">10<', html)
    duel_id = panel["duel_id"]
    r = await api.post(
        f"/annotate/{token}/vote", headers=JSON_HDR, data={"duel_id": duel_id, "choice": "a", "comment": "ok"}
    )
    html = r.json()["html"]
    assert re.search(r'id="my-votes">1<', html) and re.search(r'id="votes-remaining">9<', html)
    assert (await api.get(f"/v1/duels/{duel_id}")).json()["comment"] == "ok"
    shown = r.json()["duel_id"]
    r = await api.post(f"/annotate/{token}/skip", headers=JSON_HDR, data={"duel_id": shown})
    body = r.json()
    assert body["state"] == "duel" and body["duel_id"] != shown
    assert "Skipped" in body["html"] and re.search(r'id="my-skips">1<', body["html"])
    # a skip of a duel that is not hers changes nothing and says so
    r = await api.post(f"/annotate/{token}/skip", headers=JSON_HDR, data={"duel_id": shown})
    assert "was not skipped" in r.json()["html"]
    # the dashboard's annotator table shows the skip
    dash = (await api.get(f"/campaigns/{cid}")).text
    assert re.search(r'class="num annotator-skips">1<', dash)


def test_fake_provider_markers_are_text_not_links():
    from service.web.markdown import render_markdown

    out = str(render_markdown("answer <<fake:00ff>> and <https://example.org> and <mailto:x@y.z>"))
    assert "fake:00ff" in out and 'href="fake:' not in out and "&lt;&lt;fake:00ff&gt;&gt;" in out
    assert 'href="https://example.org"' in out and 'href="mailto:x@y.z"' in out


async def test_skips_are_bounded_so_an_annotator_cannot_make_the_campaign_pay_without_voting(api):
    """Each skip makes the skipper's next request plan a new, paid duel: at most
    max_pending_per_annotator of its skipped duels may wait in the pool at once."""
    c = await _campaign(api)
    cid = c["id"]
    alice, _, _ = await _annotator(api, cid, "alice")
    bob, _, _ = await _annotator(api, cid, "bob")
    first = await _next(api, cid, alice)
    assert (await api.post(f"/v1/duels/{first['id']}/skip", headers=alice)).status_code == 204
    second = await _next(api, cid, alice)
    r = await api.post(f"/v1/duels/{second['id']}/skip", headers=alice)
    assert r.status_code == 409 and "still waiting" in r.json()["detail"], r.text
    before = (await api.get(f"/v1/campaigns/{cid}")).json()["spend"]
    assert (await _next(api, cid, alice))["id"] == second["id"]  # still hers: nothing new planned
    assert (await api.get(f"/v1/campaigns/{cid}")).json()["spend"] == before
    # once another annotator takes the pooled duel, alice may skip again
    assert (await _next(api, cid, bob))["id"] == first["id"]
    assert (await api.post(f"/v1/duels/{second['id']}/skip", headers=alice)).status_code == 204
