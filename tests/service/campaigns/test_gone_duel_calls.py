"""A model call never outlives its duel: once the duel is gone (expired by another process, its
lease lapsed after its campaign ended, deleted), the process calling its models cancels the
calls still under way within a heartbeat, instead of letting them run to their own deadline
for answers nobody may charge. Nothing is charged beyond what the provider returned. The
provider is stood in by respx and never answers; SQLite and PostgreSQL."""

from __future__ import annotations

import asyncio
import time
import uuid

import httpx
import pytest
import respx
from conftest import app_client
from sqlalchemy import select, update

from service.auth import Principal
from service.campaigns.calls import CALL_DUEL_GONE
from service.models import Campaign, Charge, Duel

LEASE_S = 1.0
PRICE = {"input_per_1m": 1.0, "output_per_1m": 1000.0}


def _body(tag: str) -> dict:
    client = {"kind": "openai", "base_url": f"http://{tag}.test/v1", "price": PRICE, "params": {"max_tokens": 50}}
    return {
        "name": f"gone-{tag}",
        "models": [{"name": f"m{n}", "cost": 0.001, "client": {**client, "model": f"{tag}-{n}"}} for n in range(3)],
        "prompts": ["one question", "another question"],
        "judge": {"kind": "human"},
        "answers": "fresh",
        "seed": 3,
    }


@pytest.fixture
async def service(db_url):
    async with app_client(db_url, run_lease_seconds=LEASE_S, run_heartbeat_seconds=0.2) as client:
        yield client


async def _until(cond, timeout: float = 10.0) -> None:
    deadline = time.monotonic() + timeout
    while not cond():
        assert time.monotonic() < deadline, "condition not met in time"
        await asyncio.sleep(0.02)


@pytest.mark.parametrize("how", ["campaign stopped", "expired elsewhere"])
async def test_the_calls_of_a_gone_duel_are_cancelled(service, how):
    tag = "g" + uuid.uuid4().hex[:10]
    campaigns = service.app.state.campaigns
    svc = campaigns.cycle
    cid = (await service.post("/v1/campaigns", json=_body(tag))).json()["id"]
    ann = (await service.post(f"/v1/campaigns/{cid}/annotators", json={"label": "x"})).json()
    who = Principal(admin=False, campaign_id=cid, annotator_id=int(ann["id"]))
    sent: list[str] = []
    cancelled: list[str] = []
    never = asyncio.Event()

    async def hang(request: httpx.Request) -> httpx.Response:
        sent.append(request.content.decode())
        try:
            await never.wait()  # a provider that never answers (its own deadline is minutes away)
        except asyncio.CancelledError:
            cancelled.append(request.content.decode())
            raise
        return httpx.Response(500)

    with respx.mock(assert_all_called=False) as mock:
        mock.post(f"http://{tag}.test/v1/chat/completions").mock(side_effect=hang)
        # an annotator's duel (leased while called) or a background run's (not leased)
        plan = await svc.plan(cid, who if how == "campaign stopped" else None)
        task = asyncio.create_task(svc.execute(plan))
        await _until(lambda: len(sent) == 2)
        await asyncio.sleep(3 * LEASE_S)  # alive: its calls go on past the lease while the duel lives
        assert not task.done() and not cancelled
        if how == "campaign stopped":  # its lease is no longer renewed: it expires within the lease
            await campaigns.lifecycle.stop(cid)
        else:  # another process expired it (a take-over of the run, as service/campaigns/leases.py does)
            with svc.db.write() as s:
                now = svc.db.clock(s)
                s.execute(update(Duel).where(Duel.id == plan.duel_id).values(status="expired", expires_at=now))
        t0 = time.monotonic()
        outcome = await asyncio.wait_for(task, 10.0)  # before: still waiting on the provider
        took = time.monotonic() - t0
    assert len(cancelled) == 2 and took < LEASE_S + 2.0, (cancelled, took)
    with svc.db.read() as s:
        d = s.execute(select(Duel.status, Duel.completion_a, Duel.completion_b).where(Duel.id == plan.duel_id)).one()
        charges = s.execute(select(Charge.amount_nusd).where(Charge.campaign_id == cid)).scalars().all()
        spend = int(s.get(Campaign, cid).spend_nusd)
    assert d.status == ("cancelled" if how == "campaign stopped" else "expired"), d.status
    assert outcome.failed or outcome.status in ("cancelled", "expired")
    for info in (d.completion_a, d.completion_b):
        assert info and CALL_DUEL_GONE in (info.get("error") or ""), info
    assert charges == [] and spend == 0  # the provider returned nothing: nothing charged
