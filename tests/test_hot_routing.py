"""The driver of a request is chosen before its transaction (service/hotpath/routing.py).

On SQLite and PostgreSQL, through the REST API: a plain human campaign's duels and votes
(the admin's and an annotator's) run on the hot path and never on the general
transaction; a campaign sampling without replacement, or with a hybrid judge, never
reaches the hot path, with a cold config cache (one small read) or a warm one.
"""

from __future__ import annotations

import asyncio

import pytest
from service_helpers import SYNTHETIC_P, campaign_body, simulated_judge

from service import hotpath
from service.auth import Principal
from service.hotpath import CampaignConfig
from service.models import Campaign, Duel

HOT = ("plan_duel", "plan_duel_async", "record_vote", "record_vote_async")


@pytest.fixture()
def calls(api, monkeypatch):
    """Counts the entries into the hot path's drivers and into the general transactions."""
    svc = api.app.state.campaigns.cycle
    used = {"hot": [], "general": []}

    def spy(kind, name, fn):
        if asyncio.iscoroutinefunction(fn):

            async def awrapper(*args, **kwargs):
                used[kind].append(name)
                return await fn(*args, **kwargs)

            return awrapper

        def wrapper(*args, **kwargs):
            used[kind].append(name)
            return fn(*args, **kwargs)

        return wrapper

    for name in HOT:
        monkeypatch.setattr(hotpath, name, spy("hot", name, getattr(hotpath, name)))
    for name in ("plan_duel_tx", "_record_vote_tx"):
        monkeypatch.setattr(svc, name, spy("general", name, getattr(svc, name)))
    return used


def _config(**changes) -> CampaignConfig:
    base = dict(
        models=[{"name": "m0"}, {"name": "m1"}],
        judge={"kind": "human"},
        tie_policy="half",
        seed=7,
        n_prompts=3,
        draw_key=None,
        max_pending_per_annotator=1,
    )
    return CampaignConfig(**{**base, **changes})


def test_handles_is_false_for_without_replacement_and_hybrid_only():
    assert hotpath.handles(_config())
    assert hotpath.handles(_config(judge=simulated_judge()))
    assert hotpath.handles(_config(prompt_sampling="with_replacement"))
    assert not hotpath.handles(_config(prompt_sampling="without_replacement"))
    assert not hotpath.handles(_config(judge={"kind": "hybrid", "llm": simulated_judge()}))


async def _annotator(api, cid: int, label: str = "ann") -> dict:
    token = (await api.post(f"/v1/campaigns/{cid}/annotators", json={"label": label})).json()["token"]
    return {"Authorization": f"Bearer {token}"}


@pytest.mark.parametrize("cold", [True, False])
async def test_a_plain_human_campaign_plans_and_votes_on_the_hot_path_only(api, calls, cold):
    svc = api.app.state.campaigns.cycle
    cid = (await api.post("/v1/campaigns", json=campaign_body())).json()["id"]
    ann = await _annotator(api, cid)
    for headers in ({}, ann):  # the admin, then an annotator
        if cold:
            svc.config_cache.clear()
        r = await api.post(f"/v1/campaigns/{cid}/duels", headers=headers)
        assert r.status_code == 201, r.text
        if cold:
            svc.config_cache.clear()
        v = await api.post(f"/v1/duels/{r.json()['id']}/vote", json={"choice": "a"}, headers=headers)
        assert v.status_code == 200, v.text
    assert calls["general"] == []
    assert len(calls["hot"]) == 4, calls  # two plans and two votes, each one transaction
    assert {n.removesuffix("_async") for n in calls["hot"]} == {"plan_duel", "record_vote"}
    assert (await api.get(f"/v1/campaigns/{cid}")).json()["duels"] == 2


@pytest.mark.parametrize("cold", [True, False])
async def test_a_without_replacement_campaign_never_reaches_the_hot_path(api, calls, cold):
    svc = api.app.state.campaigns.cycle
    body = campaign_body(judge=simulated_judge(), prompt_sampling="without_replacement", delta=0.05)
    cid = (await api.post("/v1/campaigns", json=body)).json()["id"]
    for _ in range(3):  # the admin's duels, judged at once by the automatic judge
        if cold:
            svc.config_cache.clear()
        r = await api.post(f"/v1/campaigns/{cid}/duels")
        assert r.status_code in (200, 201), r.text
    pending = await asyncio.to_thread(svc.plan_duel_tx, cid, None)  # a duel still pending
    if cold:
        svc.config_cache.clear()
    v = await api.post(f"/v1/duels/{pending.duel_id}/vote", json={"choice": "b"})  # the admin's vote on it
    assert v.status_code == 200, v.text
    assert calls["hot"] == []
    assert calls["general"].count("_record_vote_tx") == 1 and calls["general"].count("plan_duel_tx") >= 4
    assert (await api.get(f"/v1/campaigns/{cid}/replay")).json()["ok"] is True


async def test_a_hybrid_campaign_never_reaches_the_hot_path(api, calls):
    judge = {"kind": "hybrid", "llm": simulated_judge(SYNTHETIC_P), "human": {"fee_per_vote": 0.05}, "human_rate": 0.9}
    body = campaign_body(judge=judge, delta=0.05, budget=1000.0)
    r = await api.post("/v1/campaigns", json=body)
    assert r.status_code == 201, r.text
    cid = r.json()["id"]
    ann = await _annotator(api, cid)
    votes = 0
    for _ in range(20):
        assert (await api.post(f"/v1/campaigns/{cid}/duels")).status_code in (200, 201, 409)
        r = await api.post(f"/v1/campaigns/{cid}/duels", headers=ann)  # a selected duel, else 409
        if r.status_code == 409:
            continue
        assert r.status_code in (200, 201), r.text
        v = await api.post(f"/v1/duels/{r.json()['id']}/vote", json={"choice": "a"}, headers=ann)
        assert v.status_code == 200, v.text
        votes += 1
        if votes >= 2:
            break
    assert votes >= 2  # the annotator's requests and votes were made
    assert calls["hot"] == []
    assert calls["general"].count("_record_vote_tx") == votes


async def test_the_hot_path_refuses_a_campaign_it_does_not_handle_without_writing(api):
    """A caller that skipped the routing gets an internal error, never a duel planned
    without its positions."""
    svc = api.app.state.campaigns.cycle
    body = campaign_body(judge=simulated_judge(), prompt_sampling="without_replacement", delta=0.05)
    cid = (await api.post("/v1/campaigns", json=body)).json()["id"]
    with pytest.raises(RuntimeError, match="hotpath.handles"):
        await asyncio.to_thread(hotpath.plan_duel, svc, cid, Principal(admin=True))
    with svc.db.read() as s:
        assert s.get(Campaign, cid).duels_created == 0
        assert s.query(Duel).filter(Duel.campaign_id == cid).count() == 0
