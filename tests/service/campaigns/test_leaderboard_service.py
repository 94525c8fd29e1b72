"""A leaderboard campaign (``goal: top_k`` / ``ranking``) through the REST API: create, run, view, replay."""

from __future__ import annotations

import asyncio
import time

import pytest
from service_helpers import campaign_body, simulated_judge

# clear gaps, so the certificate comes within a few hundred duels
P4 = [[0.5, 0.8, 0.9, 0.95], [0.2, 0.5, 0.8, 0.9], [0.1, 0.2, 0.5, 0.8], [0.05, 0.1, 0.2, 0.5]]


async def run_to_end(api, cid: int, seconds: float = 120.0) -> dict:
    r = await api.post(f"/v1/campaigns/{cid}/run", json={"max_duels": 3000})
    assert r.status_code == 202, r.text
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        view = (await api.get(f"/v1/campaigns/{cid}")).json()
        if not view["run"]["active"]:
            return view
        await asyncio.sleep(0.05)
    raise AssertionError("the run did not end in time")


@pytest.mark.parametrize("goal, k", [("ranking", None), ("top_k", 2)])
async def test_a_leaderboard_campaign_certifies_its_order(api, goal, k):
    body = campaign_body(costs=(1.0, 1.0, 1.0, 1.0), judge=simulated_judge(P4), delta=0.1, goal=goal)
    if k is not None:
        body["k"] = k
    r = await api.post("/v1/campaigns", json=body)
    assert r.status_code == 201, r.text
    c = r.json()
    assert c["goal"] == goal and c["ranking"] == [["m0", "m1", "m2", "m3"]] and c["winner"] is None
    needed = 6 if goal == "ranking" else 4  # every pair; the top 2 against the other 2
    assert (c["pc_evidence"]["needed"], c["pc_evidence"]["certified"], c["pc_evidence"]["progress"]) == (needed, 0, 0)
    view = await run_to_end(api, c["id"])
    assert view["status"] == "certified", view["end_reason"]
    assert view["pc_evidence"]["needed"] == needed and view["pc_evidence"]["progress"] == 1.0
    assert view["pc_evidence"]["certified"] == (needed if goal == "ranking" else 4)
    if goal == "ranking":
        assert view["ranking"] == [["m0"], ["m1"], ["m2"], ["m3"]] and view["top_k"] is None
        assert view["winner"] == "m0"
        assert view["verdict"] == "certified order m0 > m1 > m2 > m3"
    else:
        assert view["top_k"] == ["m0", "m1"] and view["k"] == 2
        assert view["ranking"][-1] == ["m2", "m3"] or view["ranking"][-2:] == [["m2"], ["m3"]]
        assert view["verdict"].startswith("certified the best 2: m0, m1")
    assert all(t["status"] in ("ranked", "open") for t in view["ranking_tiers"])
    html = (await api.get(f"/campaigns/{view['id']}")).text
    assert 'id="leaderboard-section"' in html and 'id="ended"' not in html
    title = "Certified ranking" if goal == "ranking" else "Certified top 2"
    assert f"<h2>{title}</h2>" in html
    assert "<li>m0</li>" in html if goal == "ranking" else ("<li>m0, m1 <span" in html or "<li>m1</li>" in html)
    assert (await api.get(f"/v1/campaigns/{view['id']}/replay")).json()["ok"] is True


async def test_a_winner_campaign_reports_no_leaderboard(api):
    r = await api.post("/v1/campaigns", json=campaign_body(judge=simulated_judge()))
    c = r.json()
    assert c["goal"] == "winner" and c["ranking"] is None and c["top_k"] is None


@pytest.mark.parametrize(
    "extra, message",
    [
        ({"goal": "top_k"}, "needs k"),
        ({"goal": "top_k", "k": 3}, "must be in"),
        ({"goal": "ranking", "k": 1}, "goes with goal top_k"),
        ({"goal": "ranking", "algorithm": "dctas"}, "needs algorithm dctas-pc"),
        ({"goal": "best"}, "goal"),
    ],
)
async def test_bad_goals_are_422_with_a_message(api, extra, message):
    r = await api.post("/v1/campaigns", json=campaign_body(judge=simulated_judge(), **extra))
    assert r.status_code == 422 and message in r.text, r.text
