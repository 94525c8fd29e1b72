"""The campaign objects: built once per app by build_campaigns, each with its collaborators,
each app with its own; the routes use the app's objects; closing stops every task.

SQLite and PostgreSQL (the ``db_url`` fixture), real HTTP through httpx on the ASGI app.
"""

from __future__ import annotations

import asyncio
import dataclasses
import inspect

import pytest
from conftest import app_client, make_settings
from service_helpers import campaign_body

from service.app import create_app
from service.campaigns.tasks import Background, Keeper
from service.container import build_campaigns
from service.db import Database


def test_each_object_gets_the_collaborators_built_once(db_url):
    db = Database(db_url)
    try:
        c = build_campaigns(make_settings(db_url), db)
        assert c.results.views is c.views and c.annotators.views is c.views and c.webhooks.views is c.views
        assert c.annotators.tokens is c.tokens
        assert c.runs.cycle is c.cycle and c.runs.leases is c.leases and c.runs.stores is c.stores
        assert c.runs.keeper is c.keeper and c.keeper.beats == [
            c.runs.beat,
            c.calls.drop_gone_calls,
            c.pregen.recover.__self__.beat,
        ]
        # the recovery of pre-generation batches a process gone left open: at each heartbeat, and before pre-generating
        recovery = c.pregen.recover.__self__
        assert recovery.pregen is c.pregen and recovery.calls is c.calls and recovery.jobs.owner_id == c.leases.owner_id
        # one identity per process: the run leases, the cycle's fencing and the webhook claims agree
        assert c.cycle.owner_id == c.leases.owner_id == c.webhooks.owner_id
        # the cycle's collaborators are one frozen dataclass of the objects themselves (no copied methods)
        deps = c.cycle.deps
        assert deps.stores is c.stores and deps.views is c.views and deps.webhooks is c.webhooks
        assert deps.leases is c.leases and deps.endings is c.pregen.endings and deps.prompts is c.calls.prompts
        with pytest.raises(dataclasses.FrozenInstanceError):
            deps.views = None  # type: ignore[misc]
        assert [k for k, v in vars(c.cycle).items() if inspect.ismethod(v)] == []  # no operation copied onto it
        assert c.calls.ensure_keeper.__self__ is c.keeper and c.lifecycle.leases is c.leases
        assert c.calls.claim_tx.__self__ is c.stores and c.calls.release_tx.__self__ is c.stores
        # the cycle holds its calls and its pre-generation by reference; the runs renew the calls' claims
        assert deps.calls is c.calls and c.pregen.calls is c.calls and c.runs.calls is c.calls
        assert deps.pregen is c.pregen and c.pregen.background is c.background
        assert c.runs.lifecycle is c.lifecycle and c.lifecycle.views is c.views
        assert c.lifecycle.finish.__self__ is c.pregen.endings and c.lifecycle.webhooks is c.webhooks

        other = build_campaigns(make_settings(db_url), db)  # another worker: nothing shared
        assert other.leases.owner_id != c.leases.owner_id
        assert other.stores._store_costs is not c.stores._store_costs
        assert other.tokens.entries is not c.tokens.entries
        assert other.background.tasks is not c.background.tasks
    finally:
        db.dispose()


async def test_routes_and_pages_use_the_apps_objects(db_url):
    seen: list[str] = []
    async with app_client(db_url) as api:
        campaigns = api.app.state.campaigns
        real_get, real_ranking = campaigns.views.get_campaign, campaigns.results.ranking

        def get_campaign(campaign_id, *args, **kwargs):
            seen.append("views")
            return real_get(campaign_id, *args, **kwargs)

        def ranking(campaign_id, *args, **kwargs):
            seen.append("results")
            return real_ranking(campaign_id, *args, **kwargs)

        campaigns.views.get_campaign = get_campaign
        campaigns.results.ranking = ranking
        r = await api.post("/v1/campaigns", json=campaign_body(name="container"))
        assert r.status_code == 201, r.text
        cid = r.json()["id"]
        assert seen == ["views"]  # the create route reads the view through the app's Views
        assert (await api.get(f"/v1/campaigns/{cid}")).json()["id"] == cid
        assert seen == ["views", "views"]
        r = await api.get(f"/campaigns/{cid}")  # the dashboard: views and results
        assert r.status_code == 200, r.text
        assert "results" in seen


async def test_the_keeper_beats_until_stopped_and_closing_cancels_every_task(db_url):
    background = Background()
    keeper = Keeper(0.01, background)
    beats: list[float] = []

    async def beat() -> None:
        beats.append(asyncio.get_running_loop().time())

    keeper.beats.append(beat)
    keeper.ensure()
    keeper.ensure()  # once: a second call starts no second task
    assert len(background.tasks) == 1
    await asyncio.sleep(0.2)
    assert len(beats) >= 3
    keeper.stop()
    await asyncio.sleep(0.05)
    n = len(beats)
    await asyncio.sleep(0.1)
    assert len(beats) == n  # stopped

    app = create_app(make_settings(db_url))
    campaigns = app.state.campaigns
    campaigns.keeper.ensure()
    sleeper = campaigns.background.spawn(asyncio.sleep(3600))
    await campaigns.aclose()
    await asyncio.gather(sleeper, return_exceptions=True)
    await asyncio.sleep(0.01)  # the tasks' done callbacks
    assert sleeper.cancelled() and not campaigns.background.tasks
    app.state.db.dispose()
