"""Batch campaigns end to end, on SQLite and PostgreSQL, against the fake provider's batch routes:
the same winner as call by call for about half the spend, a budget too small for a round, a stop
that cancels the open batches, and a server killed between submitting and collecting a batch."""

from __future__ import annotations

import asyncio
import math
import time
import uuid
from collections import Counter

import httpx
import pytest
from conftest import ADMIN_KEY, make_settings
from service_helpers import all_duels
from test_faults import ThreadedServer

ADMIN = {"Authorization": f"Bearer {ADMIN_KEY}"}
LIST = {"input_cost_per_token": 2e-6, "output_cost_per_token": 2e-6}
HALF = {"input_cost_per_token_batches": 1e-6, "output_cost_per_token_batches": 1e-6}


@pytest.fixture(scope="module")
def fake():
    from service.fake_provider import create_fake_provider_app

    app = create_fake_provider_app(marker_key="batch-tests")
    server = ThreadedServer(app)
    yield server.url + "/v1", app
    server.stop()


def body(base: str, name: str, batch, **extra) -> dict:
    tag = uuid.uuid4().hex[:6]
    models = [f"{tag}-m{q}-q{q}" for q in (1, 2, 3, 5)]
    judge = f"{tag}-judge"
    price_map = {m: {**LIST, **HALF} for m in models + [judge]}
    out = {
        "name": name,
        "models": [
            {"name": m, "client": {"kind": "openai", "base_url": base, "model": m, "params": {"max_tokens": 64}}}
            for m in models
        ],
        "prompts": [f"Question number {n}?" for n in range(40)],
        "judge": {
            "kind": "llm",
            "client": {
                "kind": "openai",
                "base_url": base,
                "model": judge,
                "params": {"max_tokens": 64},
                "price": {"input_per_1m": 2, "output_per_1m": 2},
                "batch_price": {"input_per_1m": 1, "output_per_1m": 1},
            },
            "cost": 0.0001,
        },
        "price_map": price_map,
        "expected_output_tokens": 20,
        "delta": 0.05,
        "seed": 11,
        "answers": "reuse",
        "verdicts": "reuse",
    }
    if batch is not None:
        out["batch"] = batch
    out.update(extra)
    return out


async def wait_for(api, cid: int, predicate, timeout: float = 60) -> dict:
    deadline = time.monotonic() + timeout
    while True:
        view = (await api.get(f"/v1/campaigns/{cid}")).json()
        if predicate(view):
            return view
        assert time.monotonic() < deadline, f"campaign {cid} did not reach the expected state: {view}"
        await asyncio.sleep(0.05)


def batches_of(app, key_prefix: str) -> list[dict]:
    return [
        b for b in app.state.batches.batches.values() if b["metadata"].get("llmduel_key", "").startswith(key_prefix)
    ]


async def test_batch_campaign_certifies_the_same_winner_for_about_half_the_spend(db_url, fake):
    from service.app import create_app

    base, provider_app = fake
    app = create_app(make_settings(db_url))
    try:
        async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://t", headers=ADMIN) as api:
            r = await api.post("/v1/campaigns", json=body(base, "batched", {"round_size": 4, "poll_seconds": 0.02}))
            assert r.status_code == 201, r.text
            cid = r.json()["id"]
            view = r.json()
            assert view["batch"]["rounds"] == 0 and view["batch"]["round_size"] == 4
            judge_client = view["judge"]["client"]
            assert judge_client["batch_price"] == {"input_per_1m": 1.0, "output_per_1m": 1.0}
            one = (await api.post("/v1/campaigns", json=body(base, "one by one", None))).json()
            assert one["batch"] is None
            before = len(provider_app.state.provider.requests)
            for c in (cid, one["id"]):
                assert (await api.post(f"/v1/campaigns/{c}/run", json={"concurrency": 1})).status_code == 202
            runs = app.state.campaigns.runs
            batched = await wait_for(api, cid, lambda v: v["status"] != "running" and not runs.run_active_here(cid))
            single = await wait_for(api, one["id"], lambda v: v["status"] != "running" and not v["run"]["active"])
            batched = (await api.get(f"/v1/campaigns/{cid}")).json()  # every verdict of its last round recorded
            assert batched["status"] == single["status"] == "certified", (batched["run"], single["run"])
            assert batched["winner_index"] == single["winner_index"] == 3
            ratio = batched["spend"] / single["spend"]
            assert 0.3 < ratio < 0.6, (batched["spend"], single["spend"])
            rounds = batched["batch"]["rounds"]
            assert 1 <= rounds <= math.ceil(math.log2(batched["duels_created"])) + 2
            # Every model and judge call of the batch campaign went out in a batch, each request once.
            names = {m["name"] for m in batched["models"]} | {batched["judge"]["client"]["model"]}
            sent = [e for e in provider_app.state.provider.requests[before:] if e["model"] in names]
            assert sent and all("batch" in e for e in sent)
            asked = Counter(
                (e["model"], e.get("prompt"), e.get("first"), e.get("second")) for e in sent
            )  # answers and verdicts are reused: a request asked twice would be paid twice
            assert max(asked.values()) == 1
            duels = await all_duels(api, cid)
            paid = Counter(ch["kind"] for d in duels for ch in d["charges"] if not ch["reused"])
            kinds = Counter(e["kind"] for e in sent)
            # each request charged once, none uncharged (a judgement asks both orders: two requests)
            assert kinds["answer"] == paid["model"] and kinds["judge"] == 2 * paid["judge"], (kinds, paid)
            assert batched["spend"] == pytest.approx(sum(d["cost"] for d in duels))
            # The verdicts were folded in plan order: the judged duels' sequence numbers increase.
            judged = sorted((d for d in duels if d["status"] == "judged"), key=lambda d: d["number"])
            assert judged and len(batches_of(provider_app, f"llmduel-{cid}-")) >= 2 * rounds - 1
    finally:
        await app.state.campaigns.aclose()
        app.state.db.dispose()


async def test_a_budget_too_small_for_a_round_ends_before_anything_is_sent(db_url, fake):
    from service.app import create_app

    base, provider_app = fake
    app = create_app(make_settings(db_url))
    try:
        async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://t", headers=ADMIN) as api:
            r = await api.post("/v1/campaigns", json=body(base, "poor", True, budget=1e-7))
            assert r.status_code == 201, r.text
            cid = r.json()["id"]
            assert (await api.post(f"/v1/campaigns/{cid}/run", json={})).status_code == 202
            view = await wait_for(api, cid, lambda v: v["status"] != "running")
            assert view["status"] == "budget_exhausted", view["status"]
            assert view["spend"] == 0 and view["duels_created"] == 0
            assert batches_of(provider_app, f"llmduel-{cid}-") == []
    finally:
        await app.state.campaigns.aclose()
        app.state.db.dispose()


async def test_bad_batch_settings_are_a_422(api, fake):
    base, _ = fake
    for bad in ({"round_size": 0}, {"poll_seconds": -1}, {"window_seconds": 1e9}, {"nope": 1}, "yes"):
        r = await api.post("/v1/campaigns", json=body(base, "bad", bad))
        assert r.status_code == 422, (bad, r.text)
    r = await api.post("/v1/campaigns", json=body(base, "human", True, judge={"kind": "human"}))
    assert r.status_code == 422 and "automatic judge" in r.text
