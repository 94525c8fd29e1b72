"""The driver of a request is chosen before its transaction (service/cycle/routing.py).

Every plan, every duel's answers and every verdict runs one sequence (service/cycle/plan.py,
answers.py, verdict.py) on one of two drivers; a duel's answers on the driver of its plan. On SQLite and PostgreSQL, through the REST API: a plain human
campaign's duels and votes (the admin's and an annotator's) run on the asyncpg driver on
PostgreSQL and on the SQLAlchemy driver on SQLite; a campaign sampling without replacement,
or with a hybrid judge, never reaches the asyncpg driver, with a cold config cache (one
small read) or a warm one.
"""

from __future__ import annotations

import asyncio

import pytest
from service_helpers import SYNTHETIC_P, campaign_body, simulated_judge

from service import cycle
from service.auth import Principal
from service.cycle import CampaignConfig
from service.models import Campaign, Duel

SQLALCHEMY = ("plan_duel", "store_answers", "record_vote", "record_verdict")
ASYNCPG = ("plan_duel_async", "store_answers_async", "record_vote_async")


@pytest.fixture()
def calls(api, monkeypatch):
    """Counts the entries into each driver ("hot": asyncpg, "general": SQLAlchemy)."""
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

    for names, kind in ((ASYNCPG, "hot"), (SQLALCHEMY, "general")):
        for name in names:
            monkeypatch.setattr(cycle, name, spy(kind, name, getattr(cycle, name)))
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
    assert cycle.handles(_config())
    assert cycle.handles(_config(judge=simulated_judge()))
    assert cycle.handles(_config(prompt_sampling="with_replacement"))
    assert not cycle.handles(_config(prompt_sampling="without_replacement"))
    assert not cycle.handles(_config(judge={"kind": "hybrid", "llm": simulated_judge()}))


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
    # two plans and two votes, each one transaction: asyncpg on PostgreSQL, else SQLAlchemy
    used, unused = ("hot", "general") if svc._on_loop else ("general", "hot")
    assert calls[unused] == []
    assert len(calls[used]) == 4, calls
    assert {n.removesuffix("_async") for n in calls[used]} == {"plan_duel", "record_vote"}
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
    pending = await asyncio.to_thread(svc.plan_duel, cid, None)  # a duel still pending
    if cold:
        svc.config_cache.clear()
    v = await api.post(f"/v1/duels/{pending.duel_id}/vote", json={"choice": "b"})  # the admin's vote on it
    assert v.status_code == 200, v.text
    assert calls["hot"] == []
    assert calls["general"].count("record_vote") == 1 and calls["general"].count("plan_duel") >= 3
    assert calls["general"].count("record_verdict") >= 3  # the automatic judge's verdicts
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
    assert calls["general"].count("record_vote") == votes


async def test_only_the_sqlalchemy_driver_plans_a_campaign_the_asyncpg_one_does_not_cover(api):
    """A caller that skipped the routing gets an internal error from the asyncpg driver, never a
    duel planned without its position; the SQLAlchemy driver plans it with one."""
    svc = api.app.state.campaigns.cycle
    body = campaign_body(judge=simulated_judge(), prompt_sampling="without_replacement", delta=0.05)
    cid = (await api.post("/v1/campaigns", json=body)).json()["id"]
    if svc._on_loop:  # PostgreSQL: the asyncpg driver exists here
        with pytest.raises(RuntimeError, match="cycle.handles"):
            await cycle.plan_duel_async(svc, cid, Principal(admin=True))
        with svc.db.read() as s:
            assert s.get(Campaign, cid).duels_created == 0
            assert s.query(Duel).filter(Duel.campaign_id == cid).count() == 0
    plan = await asyncio.to_thread(cycle.plan_duel, svc, cid, Principal(admin=True))
    with svc.db.read() as s:
        assert s.get(Duel, plan.duel_id).position == 0
    if svc._on_loop:  # nor are its answers stored there: refused before anything is written
        with svc.db.read() as s:
            before = s.get(Duel, plan.duel_id).cost_nusd, s.get(Campaign, cid).spend_nusd, s.get(Campaign, cid).version
        with pytest.raises(RuntimeError, match="cycle.handles"):
            await cycle.store_answers_async(svc, plan, plan.results)
        with svc.db.read() as s:
            after = s.get(Duel, plan.duel_id).cost_nusd, s.get(Campaign, cid).spend_nusd, s.get(Campaign, cid).version
        assert after == before


async def test_a_duels_answers_are_stored_on_the_driver_of_its_plan(api, fake, calls):
    """Models answering through a provider (their answers stored in a transaction of their own): a plain
    campaign's are stored on the asyncpg driver on PostgreSQL, a without-replacement campaign's on the
    SQLAlchemy driver, as their plans; SQLite has the SQLAlchemy driver only."""
    svc = api.app.state.campaigns.cycle
    clients = [{"kind": "openai", "base_url": "http://fake.test/v1", "model": f"routed-{n}-q{n + 1}"} for n in range(3)]
    for sampling in ("with_replacement", "without_replacement"):
        body = campaign_body(
            name=f"routed {sampling}", clients=clients, judge=simulated_judge(), prompt_sampling=sampling, delta=0.05
        )
        r = await api.post("/v1/campaigns", json=body)
        assert r.status_code == 201, r.text
        calls["hot"].clear()
        calls["general"].clear()
        d = await api.post(f"/v1/campaigns/{r.json()['id']}/duels")
        assert d.status_code == 201 and d.json()["status"] == "judged", d.text
        # the admin's duel, then the automatic judge's verdict (always the SQLAlchemy driver)
        if svc._on_loop and sampling == "with_replacement":
            assert calls == {"hot": ["plan_duel_async", "store_answers_async"], "general": ["record_verdict"]}
        else:
            assert calls == {"hot": [], "general": ["plan_duel", "store_answers", "record_verdict"]}, sampling


async def test_a_background_runs_answers_are_stored_on_the_sqlalchemy_driver(api, fake, calls):
    """A background run's duels (provider models, a campaign the asyncpg driver covers): plans, answers
    and verdicts all on the SQLAlchemy driver, on every backend."""
    clients = [{"kind": "openai", "base_url": "http://fake.test/v1", "model": f"run-{n}-q{n + 1}"} for n in range(3)]
    body = campaign_body(name="routed run", clients=clients, judge=simulated_judge(), delta=0.05)
    cid = (await api.post("/v1/campaigns", json=body)).json()["id"]
    assert (await api.post(f"/v1/campaigns/{cid}/run", json={"max_duels": 2, "concurrency": 1})).status_code == 202
    for _ in range(400):
        run = (await api.get(f"/v1/campaigns/{cid}")).json()["run"]
        if not run or not run.get("active"):
            break
        await asyncio.sleep(0.05)
    assert (await api.get(f"/v1/campaigns/{cid}")).json()["duels"] == 2
    assert calls["hot"] == []
    assert calls["general"].count("store_answers") == 2 and calls["general"].count("record_verdict") == 2
