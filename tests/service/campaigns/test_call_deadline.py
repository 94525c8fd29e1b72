"""A model call or a judgement that outlives its duel's reservation is abandoned.

A duel's budget reservation lapses when the duel expires (``LLMDUEL_CALL_TIMEOUT_SECONDS``
while its models are called, ``LLMDUEL_DUEL_EXPIRY_SECONDS`` while it waits for its
verdict), and so does a pre-generation hold. A call still running then must not be
charged later (the budget would be exceeded): it is abandoned as failed before its
reservation lapses (``service.campaigns.expiry.call_deadline``). Providers are stood in
by respx; SQLite and PostgreSQL.
"""

from __future__ import annotations

import asyncio
import datetime as dt
import time

import httpx
import pytest
import respx
from conftest import app_client
from service_helpers import RESERVE_URL, reserve_human_body, reserve_model, reserve_reply, reserve_tag
from sqlalchemy import func, select

from service.campaigns.calls import CALL_OUTLIVED_EXPIRY, JUDGE_OUTLIVED_EXPIRY
from service.campaigns.expiry import call_deadline
from service.models import BudgetHold, Charge, Duel

# A provider that answers after SLOW seconds; an abandoned call returns long before (about 1 s), a call
# that is waited for after SLOW: BOUND sits between, far from both, so a loaded machine cannot flip it.
SLOW = 30.0
BOUND = 12.0


def test_the_deadline_leaves_a_margin_before_the_expiry():
    t0 = time.monotonic()
    assert 0.89 < call_deadline(dt.timedelta(seconds=1)) - t0 < 0.91  # 10% of a short expiry
    assert 594.9 < call_deadline(dt.timedelta(seconds=600)) - t0 < 595.1  # at most 5 s


@pytest.fixture
async def quick(db_url):
    """A service whose calls expire after 1 s (and pending duels after 1.5 s)."""
    async with app_client(db_url, call_timeout_seconds=1.0, duel_expiry_seconds=1.5) as client:
        yield client.app.state.campaigns


def _slow(seconds: float, tokens: int = 100):
    async def answer(request: httpx.Request) -> httpx.Response:
        await asyncio.sleep(seconds)
        return reserve_reply(tokens)(request)

    return answer


def _charged(svc, cid: int) -> int:
    with svc.db.read() as s:
        return int(
            s.execute(
                select(func.coalesce(func.sum(Charge.amount_nusd), 0)).where(Charge.campaign_id == cid)
            ).scalar_one()
        )


async def test_a_model_call_past_the_duel_expiry_is_abandoned_and_not_charged(quick):
    from service.schemas import CampaignCreate

    svc, create = quick.cycle, quick.lifecycle.create_campaign
    tag = reserve_tag()
    judge = {"kind": "llm", "client": reserve_model(tag, "judge")["client"], "both_orders": False}
    body = {**reserve_human_body(tag, ["a question"], 5.0), "judge": judge, "budget": None}
    cid = create(CampaignCreate.model_validate(body))
    with respx.mock(assert_all_called=False) as mock:
        mock.post(RESERVE_URL).mock(side_effect=_slow(SLOW))
        t0 = time.monotonic()
        plan = await svc.plan(cid, None)
        outcome = await svc.execute(plan)
        took = time.monotonic() - t0
    assert took < BOUND, f"the calls ran {took:.2f} s, past the duel's 1 s expiry"
    assert outcome.status == "failed" and CALL_OUTLIVED_EXPIRY in (outcome.error or "")
    assert _charged(svc, cid) == 0  # nothing charged for the abandoned calls
    with svc.db.read() as s:
        assert s.get(Duel, plan.duel_id).status == "failed"


async def test_a_judgement_past_the_pending_expiry_is_abandoned_as_a_judge_error(quick):
    from service.schemas import CampaignCreate

    svc, create = quick.cycle, quick.lifecycle.create_campaign
    tag = reserve_tag()
    judge = {"kind": "llm", "client": reserve_model(tag, "judge")["client"], "both_orders": False}
    body = {**reserve_human_body(tag, ["another question"], 5.0), "judge": judge, "budget": None}
    cid = create(CampaignCreate.model_validate(body))
    judge_url = RESERVE_URL
    answers = {"n": 0}

    async def reply(request: httpx.Request) -> httpx.Response:
        if b"judge" in request.content or answers["n"] >= 2:  # the judge's request: too slow
            await asyncio.sleep(SLOW)
        answers["n"] += 1
        return reserve_reply(10)(request)

    with respx.mock(assert_all_called=False) as mock:
        mock.post(judge_url).mock(side_effect=reply)
        plan = await svc.plan(cid, None)
        t0 = time.monotonic()
        outcome = await svc.execute(plan)
        took = time.monotonic() - t0
    assert took < BOUND, f"the judge ran {took:.2f} s, past the pending duel's 1.5 s expiry"
    with svc.db.read() as s:
        d = s.get(Duel, plan.duel_id)
        assert d.status == "failed" and d.choice is None and JUDGE_OUTLIVED_EXPIRY in (d.error or ""), (
            d.status,
            d.error,
        )
    assert outcome.status == "failed"


async def test_a_pre_generation_call_past_its_hold_is_abandoned_and_the_hold_released(quick):
    from service.schemas import CampaignCreate

    svc, pregen, create = quick.cycle, quick.pregen, quick.lifecycle.create_campaign
    tag = reserve_tag()
    cid = create(CampaignCreate.model_validate(reserve_human_body(tag, [f"q{n}" for n in range(4)], 5.0)))
    with respx.mock(assert_all_called=False) as mock:
        mock.post(RESERVE_URL).mock(side_effect=_slow(SLOW))
        t0 = time.monotonic()
        assert await pregen.pregenerate(cid) == -1  # the call failed (abandoned)
        assert time.monotonic() - t0 < BOUND
    assert _charged(svc, cid) == 0
    with svc.db.read() as s:
        assert (
            s.execute(select(func.count()).select_from(BudgetHold).where(BudgetHold.campaign_id == cid)).scalar_one()
            == 0
        )
