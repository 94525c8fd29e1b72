"""Helpers shared by the service tests (not fixtures: plain functions)."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
import time
import uuid

import httpx
from conftest import ADMIN_KEY, REPO

from algorithms.instance import SYNTHETIC_PREFERENCE

SYNTHETIC_P = SYNTHETIC_PREFERENCE.tolist()


def campaign_body(
    name: str = "test campaign",
    costs=(4.0, 1.0, 1.0),
    judge: dict | None = None,
    clients: list[dict] | None = None,
    **extra,
) -> dict:
    """A campaign on the paper's synthetic instance with simulated models."""
    models = [
        {"name": f"m{n}", "cost": c, "client": (clients[n] if clients else {"kind": "simulated"})}
        for n, c in enumerate(costs)
    ]
    body = {
        "name": name,
        "models": models,
        "prompts": ["Say hello.", "Explain duels.", "Why is the sky blue?"],
        "judge": judge if judge is not None else {"kind": "human"},
        "seed": 7,
    }
    body.update(extra)
    return body


def simulated_judge(P=SYNTHETIC_P, **extra) -> dict:
    return {"kind": "simulated", "preference": P, **extra}


async def all_duels(api, cid: int) -> list[dict]:
    """Every duel of a campaign through the paginated audit log, oldest first."""
    items, offset = [], 0
    while offset is not None:
        page = (await api.get(f"/v1/campaigns/{cid}/duels", params={"limit": 1000, "offset": offset})).json()
        items += page["items"]
        offset = page["next_offset"]
    return items


def all_duels_sync(client, cid: int) -> list[dict]:
    """Every duel of a campaign through the paginated audit log, with a blocking ``httpx.Client``."""
    items, offset = [], 0
    while offset is not None:
        page = client.get(f"/v1/campaigns/{cid}/duels", params={"limit": 500, "offset": offset}).json()
        items += page["items"]
        offset = page["next_offset"]
    return items


def skew_clock(
    monkeypatch, seconds: float, modules=("service.campaigns.leases", "service.campaigns.lifecycle")
) -> None:
    """A worker whose clock runs ``seconds`` ahead (negative: behind): ``utcnow`` as the named
    modules see it is shifted (the hostile clock-skew mode of the lease tests)."""
    import datetime as dt
    import importlib

    from service.models import utcnow

    for name in modules:
        monkeypatch.setattr(importlib.import_module(name), "utcnow", lambda: utcnow() + dt.timedelta(seconds=seconds))


async def first_pregen_round(api, app, cid: int, timeout: float = 30.0) -> tuple[dict, dict, list[dict]]:
    """A human batch campaign's first pre-generation round: an annotator asks for its first duel,
    then the round's batches are waited for until none is still being gathered. Returns (the first
    duel, the annotator's headers, the campaign's batch job rows)."""
    import asyncio
    import time

    token = (await api.post(f"/v1/campaigns/{cid}/annotators", json={"label": "ann"})).json()["token"]
    who = {"Authorization": f"Bearer {token}"}
    first = await api.post(f"/v1/campaigns/{cid}/duels", headers=who)
    assert first.status_code == 201, first.text
    pregen, jobs = app.state.campaigns.pregen, app.state.campaigns.runs.batch_jobs
    deadline = time.monotonic() + timeout
    while cid in pregen.busy or not jobs.jobs_tx(cid):
        assert time.monotonic() < deadline, "no pre-generation batch"
        await asyncio.sleep(0.02)
    return first.json(), who, jobs.jobs_tx(cid)


async def run_to_end(api, cid: int, timeout_s: float = 240.0, **run) -> dict:
    """Start the campaign's background run (``run``: its options) and wait until it has ended, with no
    pending duel; its view."""
    r = await api.post(f"/v1/campaigns/{cid}/run", json=run or None)
    assert r.status_code == 202, r.text
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        view = (await api.get(f"/v1/campaigns/{cid}")).json()
        if view["status"] != "running" and view["pending"] == 0 and not view["run"]["active"]:
            return view
        await asyncio.sleep(0.2)
    raise AssertionError(f"campaign {cid} did not end: {view}")


# ---------------------------------------------------------------- batch campaigns on the fake provider
# (its batch routes: conftest's ``batch_fake``)
LIST_PRICE = {"input_cost_per_token": 2e-6, "output_cost_per_token": 2e-6}
HALF_PRICE = {"input_cost_per_token_batches": 1e-6, "output_cost_per_token_batches": 1e-6}


def batch_body(base: str, name: str, batch, **extra) -> dict:
    tag = uuid.uuid4().hex[:6]
    models = [f"{tag}-m{q}-q{q}" for q in (1, 2, 3, 5)]
    judge = f"{tag}-judge"
    price_map = {m: {**LIST_PRICE, **HALF_PRICE} for m in models + [judge]}
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


async def wait_for_campaign(api, cid: int, predicate, timeout: float = 60) -> dict:
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


def provider_batch_inputs(base: str, prefix: str) -> list[list[str]]:
    """The bodies each of the campaign's batches at the provider asked for (one list per batch), read as a
    client reads them: the provider's list of batches (``GET /v1/batches``, every page) and each one's input
    file (``GET /v1/files/{id}/content``)."""
    import json

    out, after = [], None
    with httpx.Client(base_url=base, timeout=30) as http:
        while True:
            page = http.get("/batches", params={"limit": 100, **({"after": after} if after else {})}).json()
            for b in page["data"]:
                if b["metadata"].get("llmduel_key", "").startswith(prefix):
                    text = http.get(f"/files/{b['input_file_id']}/content").text
                    out.append([json.dumps(json.loads(x)["body"], sort_keys=True) for x in text.splitlines() if x])
            if not page["has_more"] or not page["data"]:
                return out
            after = page["data"][-1]["id"]


def human_batch_spec(base: str, name: str, batch: dict) -> dict:
    spec = batch_body(base, name, batch, judge={"kind": "human"})
    spec.pop("verdicts")
    return spec


# ---------------------------------------------------------------- hybrid campaigns
HYBRID_FEE = 0.05


def hybrid_judge(rate=0.5, fee=HYBRID_FEE, llm=None) -> dict:
    return {
        "kind": "hybrid",
        "llm": llm if llm is not None else simulated_judge(SYNTHETIC_P),
        "human": {"fee_per_vote": fee},
        "human_rate": rate,
    }


def ledger_rows(db, cid: int) -> list:
    """The campaign's ledger rows (kind, duel, amount, detail), read from the database."""
    from sqlalchemy import select

    from service.models import Charge

    with db.read() as s:
        return s.execute(
            select(Charge.kind, Charge.duel_id, Charge.amount_nusd, Charge.detail).where(Charge.campaign_id == cid)
        ).all()


def check_hybrid_ledger(duels: list[dict], rows: list, fee: float) -> int:
    """Every human fee in the ledger belongs to a duel a human voted on, and every such duel paid
    exactly one; returns the number of human votes."""
    fees: dict[int, list[int]] = {}
    for r in rows:
        if r.kind == "judge" and (r.detail or {}).get("human_fee"):
            fees.setdefault(int(r.duel_id), []).append(int(r.amount_nusd))
    humans = 0
    by_id = {d["id"]: d for d in duels}
    assert set(fees) <= set(by_id)
    for d in duels:
        voted = (d["judged_by"] or "").startswith("annotator:")
        h = (d["judge"] or {}).get("hybrid")
        assert fees.get(d["id"], []) == ([round(fee * 1e9)] if voted else []), d
        if voted:
            humans += 1
            assert h["selected"] and d["status"] == "judged"
        elif h is not None and h["selected"]:
            assert d["status"] in ("pending", "cancelled"), d  # no human saw it: never charged
    return humans


async def hybrid_campaign(api, monkeypatch, rate=0.5, **extra) -> tuple[int, list[dict]]:
    """A hybrid campaign with a fixed draw key and two annotators: (id, their auth headers)."""
    from service.campaigns import draws

    monkeypatch.setattr(draws, "new_draw_key", lambda: "3c" * 32)  # the same coins on every run
    r = await api.post("/v1/campaigns", json=campaign_body(judge=hybrid_judge(rate=rate), budget=100.0, **extra))
    assert r.status_code == 201, r.text
    cid = r.json()["id"]
    anns = []
    for label in ("p", "q"):
        token = (await api.post(f"/v1/campaigns/{cid}/annotators", json={"label": label})).json()["token"]
        anns.append({"Authorization": f"Bearer {token}"})
    return cid, anns


async def admin_duels_until_selected(api, cid: int, limit: int = 60) -> dict:
    """Admin duels until one is selected for a human; that duel (admin view)."""
    for _ in range(limit):
        d = (await api.post(f"/v1/campaigns/{cid}/duels")).json()
        full = (await api.get(f"/v1/duels/{d['id']}")).json()
        if full["judge"]["hybrid"]["selected"]:
            assert full["status"] == "pending" and full["choice"] is None
            return full
        assert full["status"] == "judged" and full["judged_by"] == "judge:hybrid"
    raise AssertionError("no duel was selected")


# ---------------------------------------------------------------- a provider stood in by respx at reserve.test
RESERVE_PRICE = {"input_per_1m": 1.0, "output_per_1m": 1000.0}  # 0.001 USD per output token
RESERVE_URL = "http://reserve.test/v1/chat/completions"


def reserve_model(tag: str, name: str) -> dict:
    return {
        "name": name,
        "cost": 0.001,
        "client": {
            "kind": "openai",
            "base_url": "http://reserve.test/v1",
            "model": f"{tag}-{name}",
            "price": RESERVE_PRICE,
            "params": {"max_tokens": 200},
        },
    }


def reserve_reply(tokens: int = 100):
    def answer(request: httpx.Request) -> httpx.Response:
        return httpx.Response(
            200,
            json={
                "choices": [{"message": {"role": "assistant", "content": f"answer {uuid.uuid4().hex[:6]}"}}],
                "usage": {"prompt_tokens": 12, "completion_tokens": tokens},  # about tokens x 0.001 USD
            },
        )

    return answer


def reserve_tag() -> str:
    return "r" + uuid.uuid4().hex[:10]  # models unique to a test: the stores are shared by the database


def reserve_human_body(tag: str, prompts: list[str], budget: float) -> dict:
    return {
        "name": "pregen budget",
        "models": [reserve_model(tag, n) for n in "abc"],
        "prompts": prompts,
        "judge": {"kind": "human"},
        "budget": budget,
        "seed": 6,
    }


# ---------------------------------------------------------------- the service and the fake provider over real HTTP
# (conftest's ``service`` and ``fake_provider``)
def wait_campaign_end(client: httpx.Client, cid: int, timeout: float = 240.0) -> dict:
    return wait_campaigns_end(client, [cid], timeout)[0]


def wait_campaigns_end(client: httpx.Client, ids: list[int], timeout: float = 240.0) -> list[dict]:
    """The views of the campaigns ``ids`` once each has ended, has no pending duel, and its spend stood still for
    a second (duels cancelled at the end may still be settling their calls' charges). One second of stillness
    covers them all: the campaigns are watched together, not one after the other."""
    deadline = time.monotonic() + timeout

    def views() -> list[dict]:
        return [client.get(f"/v1/campaigns/{cid}").json() for cid in ids]

    now = views()
    while not all(v["status"] != "running" and v["pending"] == 0 for v in now):
        assert time.monotonic() < deadline, f"a campaign did not end: {now}"
        time.sleep(0.3)
        now = views()
    last = None
    while (spends := [v["spend"] for v in now]) != last:
        assert time.monotonic() < deadline, f"the spend did not stand still: {now}"
        last = spends
        time.sleep(1.0)
        now = views()
    return now


FAKE_MODEL_PRICE = {"input_per_1m": 1.0, "output_per_1m": 2.0}


FAKE_JUDGE_PRICE = {"input_per_1m": 3.0, "output_per_1m": 6.0}


def provider_requests(fake: str) -> list[dict]:
    return httpx.get(fake + "/v1/requests", timeout=30).json()["requests"]


def fake_provider_body(fake: str, tag: str, prompts: list[str], **extra) -> dict:
    names = ["small-q1", "mid-q2", "good-q3", "large-q5"]
    models = [
        {
            "name": f"{n.split('-')[0]}",
            "cost": 0.001,
            "client": {
                "kind": "openai",
                "base_url": fake + "/v1",
                "model": f"{tag}-{n}",
                "price": FAKE_MODEL_PRICE,
                "params": {"max_tokens": 200},
            },
        }
        for n in names
    ]
    judge_client = {
        "kind": "openai",
        "base_url": fake + "/v1",
        "model": f"{tag}-judge",
        "price": FAKE_JUDGE_PRICE,
        "params": {"max_tokens": 200},
    }
    return {
        "name": f"reuse {tag}",
        "delta": 0.05,
        "models": models,
        "prompts": prompts,
        "judge": {"kind": "llm", "client": judge_client, "cost": 0.0002, "both_orders": True},
        "seed": 11,
        # mode (b) of docs/reuse.md: uniform draws with replacement (tests/e2e/test_wor_e2e.py: without)
        "prompt_sampling": "with_replacement",
        **extra,
    }


def replay_ok(db_url: str, cid: int) -> None:
    env = dict(os.environ, DATABASE_URL=db_url, LLMDUEL_API_KEY=ADMIN_KEY)
    rep = subprocess.run(
        [sys.executable, "-m", "service.cli", "replay", str(cid)],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert rep.returncode == 0, rep.stdout + rep.stderr
