"""The answer store's claims and single flight (service/campaigns/stores.py), on SQLite and PostgreSQL."""

from __future__ import annotations

import asyncio
import datetime as dt
import uuid

import pytest
from conftest import app_client

from service.campaigns import store_claims
from service.campaigns.types import DuelPlan
from service.clients import ClientError, Completion


@pytest.fixture
async def svc(db_url):
    async with app_client(db_url) as api:
        yield api.app.state.campaigns  # claims through its stores, single flight through its calls


def _plan(prompt: str, model: str) -> DuelPlan:
    m = {"name": "m", "cost": 0.001, "client": {"kind": "openai", "base_url": "http://x.test/v1", "model": model}}
    return DuelPlan(
        campaign_id=1,
        duel_id=1,
        number=1,
        i=0,
        j=1,
        a_is_i=True,
        prompt=prompt,
        models=[m, dict(m, name="n")],
        judge={"kind": "human"},
        tie_policy="drop",
        seed=0,
        answers="reuse",
    )


def test_claims_wait_take_over_and_become_ready(svc):
    key = uuid.uuid4().hex
    cols = {"model_key": "mk", "prompt_hash": "ph"}
    lease = dt.timedelta(seconds=60)
    status, row_id = svc.stores.claim_tx("answer", key, cols, lease)
    assert status == "claimed"
    assert svc.stores.claim_tx("answer", key, cols, lease) == ("wait", None)  # another caller: wait, do not pay
    status, again = svc.stores.claim_tx("answer", key, cols, dt.timedelta(0))  # the claim outlived its lease
    assert (status, again) == ("claimed", row_id)
    claim = store_claims.Claim("answer", row_id, key)
    with svc.db.write() as s:
        store_claims.finalize_answer(
            s, claim, Completion("stored text", 3, 4, 0.1, 0.0), text="stored text", amount_nusd=100, charge_id=7
        )
    status, stored = svc.stores.claim_tx("answer", key, cols, lease)
    assert status == "ready" and stored.text == "stored text" and stored.charge_id == 7
    svc.stores.release_tx(claim)  # never drops a ready answer
    assert svc.stores.claim_tx("answer", key, cols, lease)[0] == "ready"


def test_a_late_finisher_never_overwrites_a_stored_answer_or_verdict(svc):
    """A call that outlived its claim finishes after the caller that took the claim over
    stored its own result: the stored result stays (a ready row is never changed)."""
    lease = dt.timedelta(seconds=60)
    key = uuid.uuid4().hex
    cols = {"model_key": "mk", "prompt_hash": "ph"}
    _, row_id = svc.stores.claim_tx("answer", key, cols, lease)
    _, taken = svc.stores.claim_tx("answer", key, cols, dt.timedelta(0))  # taken over by a second caller
    assert taken == row_id
    with svc.db.write() as s:  # the taker stores first
        store_claims.finalize_answer(
            s,
            store_claims.Claim("answer", row_id, key),
            Completion("T2", 1, 2, 0.1, 0.0),
            text="T2",
            amount_nusd=100,
            charge_id=8,
        )
    with svc.db.write() as s:  # then the first caller, late
        store_claims.finalize_answer(
            s,
            store_claims.Claim("answer", row_id, key),
            Completion("T1", 1, 2, 0.1, 0.0),
            text="T1",
            amount_nusd=100,
            charge_id=9,
        )
    status, stored = svc.stores.claim_tx("answer", key, cols, lease)
    assert (status, stored.text, stored.charge_id) == ("ready", "T2", 8)

    vkey = uuid.uuid4().hex
    vcols = {"judge_key": "jk", "prompt_hash": "ph"}
    _, vrow = svc.stores.claim_tx("verdict", vkey, vcols, lease)
    svc.stores.claim_tx("verdict", vkey, vcols, dt.timedelta(0))
    with svc.db.write() as s:
        store_claims.finalize_verdict(
            s, store_claims.Claim("verdict", vrow, vkey), choice="a", detail={"n": 2}, amount_nusd=10, charge_id=11
        )
    with svc.db.write() as s:
        store_claims.finalize_verdict(
            s, store_claims.Claim("verdict", vrow, vkey), choice="b", detail={"n": 1}, amount_nusd=10, charge_id=12
        )
    status, stored = svc.stores.claim_tx("verdict", vkey, vcols, lease)
    assert (status, stored.choice, stored.charge_id) == ("ready", "a", 11)


def test_a_released_claim_lets_the_next_caller_pay(svc):
    key = uuid.uuid4().hex
    cols = {"model_key": "mk", "prompt_hash": "ph"}
    status, row_id = svc.stores.claim_tx("answer", key, cols, dt.timedelta(seconds=60))
    svc.stores.release_tx(store_claims.Claim("answer", row_id, key))
    assert svc.stores.claim_tx("answer", key, cols, dt.timedelta(seconds=60))[0] == "claimed"


async def test_single_flight_in_one_process_and_failures_are_not_stored(svc):
    calls = []
    fail = {"on": True}

    async def call(plan, idx, turns=None):
        calls.append(plan.prompt)
        await asyncio.sleep(0.2)
        if fail["on"]:
            return ClientError("provider down", status_code=503, attempts=1)
        return Completion("the answer", 3, 4, 0.1, 0.2)

    svc.calls.call_model = call
    prompt, model = f"q {uuid.uuid4().hex}", f"m-{uuid.uuid4().hex[:8]}"

    async def duel():
        plan = _plan(prompt, model)
        res = await svc.calls.answer(plan, 0)
        if 0 in plan.claims and isinstance(res, Completion):
            with svc.db.write() as s:  # what store_answers_tx does for a paid answer
                store_claims.finalize_answer(s, plan.claims[0], res, text=res.text, amount_nusd=100, charge_id=None)
        await svc.calls.settle_claims(plan, [0])
        return res

    # a failed call is not stored: the waiting duel calls again (and fails again), nothing is stored
    out = await asyncio.gather(duel(), duel())
    assert all(isinstance(r, ClientError) for r in out) and len(calls) == 2
    fail["on"] = False
    calls.clear()
    out = await asyncio.gather(*(duel() for _ in range(5)))
    assert len(calls) == 1  # five duels needing the same missing answer at once: one call
    assert sum(isinstance(r, Completion) for r in out) == 1
    assert all(r.text == "the answer" for r in out)
    assert sum(isinstance(r, store_claims.Stored) for r in out) == 4
    again = await duel()
    assert isinstance(again, store_claims.Stored) and len(calls) == 1
