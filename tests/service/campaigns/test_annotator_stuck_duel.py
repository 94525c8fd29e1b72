"""An annotator's own duel stuck in ``calling`` after the process calling its models died is freed
within the take-over bound (the run lease), not the call timeout: while its models are called, an
annotator's duel holds a lease the calling process renews every heartbeat. Here the process's
death is its call task cancelled (nothing renews the lease any more, nothing is written, as after
SIGKILL); the provider is stood in by respx and never answers. SQLite and PostgreSQL.
"""

from __future__ import annotations

import asyncio
import time
import uuid

import httpx
import pytest
import respx
from conftest import app_client
from sqlalchemy import select

from service.auth import Principal
from service.campaigns.types import HeldDuel
from service.models import Duel

LEASE_S = 1.0


def _body(tag: str) -> dict:
    client = {"kind": "openai", "base_url": f"http://{tag}.test/v1", "params": {"max_tokens": 50}}
    return {
        "name": f"stuck-{tag}",
        "models": [{"name": f"m{n}", "cost": 0.001, "client": {**client, "model": f"{tag}-{n}"}} for n in range(3)],
        "prompts": ["one question", "another question"],
        "judge": {"kind": "human"},
        "answers": "fresh",
        "seed": 2,
    }


@pytest.fixture
async def service(db_url):
    async with app_client(db_url, run_lease_seconds=LEASE_S, run_heartbeat_seconds=0.2) as client:
        yield client


async def _held(svc, cid: int, who: Principal) -> int | None:
    """The duel the annotator gets back (HeldDuel), or None when it would get a new one."""
    try:
        await svc.plan(cid, who)
    except HeldDuel as held:
        return held.duel_id
    return None


async def test_an_annotators_duel_whose_caller_died_is_freed_within_the_lease(service):
    tag = "s" + uuid.uuid4().hex[:10]
    cid = (await service.post("/v1/campaigns", json=_body(tag))).json()["id"]
    ann = (await service.post(f"/v1/campaigns/{cid}/annotators", json={"label": "x"})).json()
    who = Principal(admin=False, campaign_id=cid, annotator_id=int(ann["id"]))
    svc = service.app.state.campaigns.cycle
    never = asyncio.Event()

    async def hang(request: httpx.Request) -> httpx.Response:
        await never.wait()
        return httpx.Response(500)

    with respx.mock(assert_all_called=False) as mock:
        mock.post(f"http://{tag}.test/v1/chat/completions").mock(side_effect=hang)
        plan = await svc.plan(cid, who)
        task = asyncio.create_task(svc.execute(plan))
        # alive: its lease is renewed, the annotator gets its own duel back past the lease
        t0 = time.monotonic()
        while time.monotonic() - t0 < 3 * LEASE_S:
            assert await _held(svc, cid, who) == plan.duel_id
            await asyncio.sleep(0.2)
        task.cancel()  # the process calling the models dies
        with pytest.raises(asyncio.CancelledError):
            await task
        t0 = time.monotonic()
        while await _held(svc, cid, who) == plan.duel_id:
            assert time.monotonic() - t0 < 3 * LEASE_S, "the dead caller's duel was still handed back"
            await asyncio.sleep(0.1)
        freed = time.monotonic() - t0
    with svc.db.read() as s:
        status = s.execute(select(Duel.status).where(Duel.id == plan.duel_id)).scalar_one()
    assert status == "expired" and freed < 2 * LEASE_S, (status, freed)
