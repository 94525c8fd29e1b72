"""An ended campaign sends nothing and charges nothing more.

Calls queued for a rate-limit slot (``rpm``) when the campaign is stopped are dropped unsent,
take no slot, and their duels stay cancelled (their reservations released); the calls already
sent when it stopped are charged when their answers arrive, and those charges, the only ones
dated after the campaign's end, say ``late: true``. The provider is stood in by respx (its
requests counted); SQLite and PostgreSQL.
"""

from __future__ import annotations

import asyncio
import time
import uuid

import httpx
import respx
from sqlalchemy import select

from service.clients.ratelimit import NOT_SENT, credential_key
from service.models import Campaign, Charge, Duel

PRICE = {"input_per_1m": 1.0, "output_per_1m": 1000.0}


def _body(tag: str) -> dict:
    client = {
        "kind": "openai",
        "base_url": f"http://{tag}.test/v1",
        "price": PRICE,
        "params": {"max_tokens": 200},
        "rpm": 2,
    }
    return {
        "name": f"stop-queued-{tag}",
        "models": [{"name": f"m{n}", "cost": 0.001, "client": {**client, "model": f"{tag}-{n}"}} for n in range(4)],
        "prompts": [f"question {n}" for n in range(8)],
        "judge": {"kind": "human"},
        "seed": 5,
        "answers": "fresh",
    }


async def _until(cond, timeout: float = 10.0) -> None:
    deadline = time.monotonic() + timeout
    while not cond():
        assert time.monotonic() < deadline, "condition not met in time"
        await asyncio.sleep(0.02)


async def test_stop_drops_calls_queued_for_a_rate_limit_slot_and_marks_late_charges(api):
    from service.schemas import CampaignCreate

    campaigns = api.app.state.campaigns
    svc, limiter = campaigns.cycle, campaigns.calls.rate_limiter
    tag = "q" + uuid.uuid4().hex[:10]
    cid = campaigns.lifecycle.create_campaign(CampaignCreate.model_validate(_body(tag)))
    release = asyncio.Event()
    sent: list[str] = []

    async def reply(request: httpx.Request) -> httpx.Response:
        sent.append(request.content.decode())
        await release.wait()  # the answers of the calls sent before the stop arrive after it
        return httpx.Response(
            200,
            json={
                "choices": [{"message": {"role": "assistant", "content": f"answer {len(sent)}"}}],
                "usage": {"prompt_tokens": 10, "completion_tokens": 20},
            },
        )

    with respx.mock(assert_all_called=False) as mock:
        mock.post(f"http://{tag}.test/v1/chat/completions").mock(side_effect=reply)
        plans = [await svc.plan(cid, None) for _ in range(3)]  # six calls, two slots a minute
        tasks = [asyncio.create_task(svc.execute(p)) for p in plans]
        waits = limiter.waits
        await _until(lambda: len(sent) == 2 and limiter.waits > waits)
        await campaigns.lifecycle.stop(cid)
        release.set()
        t0 = time.monotonic()
        await asyncio.wait_for(asyncio.gather(*tasks, return_exceptions=True), 10.0)
        took = time.monotonic() - t0
    assert len(sent) == 2, f"{len(sent)} requests sent; only the two sent before the stop may be"
    assert took < 5.0, f"the queued calls ran {took:.1f} s after the stop"
    # no slot taken by a dropped call: the two requests sent are the credential's whole window
    key = credential_key("openai", f"http://{tag}.test/v1", None)
    assert limiter.window(key)[0] == 2
    with svc.db.read() as s:
        c = s.get(Campaign, cid)
        assert c.status == "stopped" and c.ended_at is not None
        ended = c.ended_at
        rows = s.execute(
            select(Charge.created_at, Charge.detail, Charge.amount_nusd).where(Charge.campaign_id == cid)
        ).all()
        duels = s.execute(
            select(Duel.status, Duel.completion_a, Duel.completion_b).where(Duel.campaign_id == cid)
        ).all()
        spend = int(c.spend_nusd)
    assert len(rows) == 2  # the two calls sent before the end, answered after it
    for row in rows:
        assert row.created_at >= ended and (row.detail or {}).get("late") is True, (row.created_at, row.detail)
    assert spend == sum(int(r.amount_nusd) for r in rows)
    assert all(d.status == "cancelled" for d in duels), [d.status for d in duels]
    infos = [info for d in duels for info in (d.completion_a, d.completion_b) if info]
    assert sum(NOT_SENT in (info.get("error") or "") for info in infos) == 4  # the four queued calls
    assert sum(info.get("late") is True for info in infos) == 2  # the two answered after the end
