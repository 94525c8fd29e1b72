"""Pay once, end to end: the service (uvicorn) and the fake provider (uvicorn) over real HTTP.

Four fake-provider models, 50 prompts, an LLM judge in both orders, delta = 0.05,
a background run with concurrent duels. Everything is counted from the fake
provider's own request log (``GET /v1/requests``): every (model, prompt) answer is
requested at most once, every (question, first, second) judgement at most once,
the ledger equals the requests times their prices, the replay is exact, and a
second campaign on the same models and prompts pays nothing for the answers it
reuses. Runs on SQLite and PostgreSQL.
"""

from __future__ import annotations

import collections
import time

import httpx
import pytest
from conftest import ADMIN_KEY
from service_helpers import (
    FAKE_JUDGE_PRICE,
    FAKE_MODEL_PRICE,
    all_duels_sync,
    fake_provider_body,
    provider_requests,
    replay_ok,
    wait_campaign_end,
)

from service.campaigns import draws

pytestmark = pytest.mark.slow
FAKE_PROVIDER_ARGS = ("--latency", "0.02")  # the fake provider's options (conftest's fake_provider)

H = {"Authorization": f"Bearer {ADMIN_KEY}"}


def _nusd(tokens_in: int, tokens_out: int, price: dict) -> float:
    return (tokens_in * price["input_per_1m"] + tokens_out * price["output_per_1m"]) / 1e6


def _run(client: httpx.Client, body: dict) -> tuple[int, dict, list[dict]]:
    r = client.post("/v1/campaigns", json=body)
    assert r.status_code == 201, r.text
    cid = r.json()["id"]
    r = client.post(f"/v1/campaigns/{cid}/run", json={"concurrency": 4, "max_duels": 3000})
    assert r.status_code == 202, r.text
    view = wait_campaign_end(client, cid)
    return cid, view, all_duels_sync(client, cid)


def test_each_answer_and_verdict_is_paid_once_and_a_second_campaign_reuses_them(service, fake_provider, db_url):
    tag = f"t{time.monotonic_ns()}"  # models unique to this backend's run: the provider is shared
    prompts = [f"Reuse question {n}: explain topic {n * 7 % 13}." for n in range(50)]
    body = fake_provider_body(fake_provider, tag, prompts)
    before = len(provider_requests(fake_provider))
    with httpx.Client(base_url=service.url, headers=H, timeout=30) as client:
        cid, view, duels = _run(client, body)
        assert view["status"] == "certified", view
        assert view["winner"] == "large"
        assert view["answers"] == "reuse" and view["verdicts"] == "reuse"
        assert view["cost_model"] == "marginal given stored answers"
        # the policy ended with marginal costs: most answers of the first campaign were stored by then
        assert max(view["policy_costs"]) < 0.001 and view["policy_judge_cost"] < 2 * 0.0002
        reqs = [r for r in provider_requests(fake_provider)[before:] if r["model"].startswith(tag + "-")]

        # every (model, prompt) answer and every (question, first, second) judgement requested at most once
        answers = collections.Counter((r["model"], r["prompt"]) for r in reqs if r["kind"] == "answer")
        verdicts = collections.Counter((r["question"], r["first"], r["second"]) for r in reqs if r["kind"] == "judge")
        assert answers and max(answers.values()) == 1, answers.most_common(3)
        assert verdicts and max(verdicts.values()) == 1, verdicts.most_common(3)
        judged = [d for d in duels if d["status"] == "judged"]
        assert len(judged) == view["duels"]
        # more duels than paid answers would allow without reuse: answers were shared
        assert 2 * len(judged) > len(answers)

        # the ledger equals the provider's requests times their prices
        expected = sum(
            _nusd(
                r["prompt_tokens"],
                r["completion_tokens"],
                FAKE_JUDGE_PRICE if r["kind"] == "judge" else FAKE_MODEL_PRICE,
            )
            for r in reqs
        )
        charges = [ch for d in duels for ch in d["charges"]]
        assert view["spend"] == pytest.approx(sum(ch["amount"] for ch in charges), abs=1e-9)
        assert view["spend"] == pytest.approx(expected, abs=1e-9 * (len(reqs) + 1))
        paid_model = [ch for ch in charges if ch["kind"] == "model" and ch["amount"] > 0]
        assert len(paid_model) == len(answers)
        reused = [ch for ch in charges if ch["amount"] == 0 and ch.get("reuses_charge_id") is not None]
        assert len(reused) > 0
        paid_ids = {ch["id"] for ch in charges if ch["amount"] > 0}
        assert {ch["reuses_charge_id"] for ch in reused} <= paid_ids
        replay_ok(db_url, cid)
        replay = client.get(f"/v1/campaigns/{cid}/replay").json()
        assert replay["ok"], replay

        # a second campaign on the same models and prompts pays only for answers nobody stored yet
        before2 = len(provider_requests(fake_provider))
        cid2, view2, duels2 = _run(client, dict(body, name="reuse second", seed=12))
        assert view2["status"] == "certified", view2
        reqs2 = [r for r in provider_requests(fake_provider)[before2:] if r["model"].startswith(tag + "-")]
        answers2 = collections.Counter((r["model"], r["prompt"]) for r in reqs2 if r["kind"] == "answer")
        assert not set(answers2) & set(answers), "an answer stored by the first campaign was paid again"
        assert max(answers2.values(), default=1) == 1
        verdicts2 = {(r["question"], r["first"], r["second"]) for r in reqs2 if r["kind"] == "judge"}
        assert not verdicts2 & set(verdicts)
        charges2 = [ch for d in duels2 for ch in d["charges"]]
        paid2 = [ch for ch in charges2 if ch["kind"] == "model" and ch["amount"] > 0]
        assert len(paid2) == len(answers2)
        expected2 = sum(
            _nusd(
                r["prompt_tokens"],
                r["completion_tokens"],
                FAKE_JUDGE_PRICE if r["kind"] == "judge" else FAKE_MODEL_PRICE,
            )
            for r in reqs2
        )
        assert view2["spend"] == pytest.approx(expected2, abs=1e-9 * (len(reqs2) + 1))
        assert view2["spend"] < view["spend"]
        replay_ok(db_url, cid2)


def test_fresh_answers_pay_per_duel(service, fake_provider, db_url):
    tag = f"f{time.monotonic_ns()}"
    prompts = [f"Fresh question {n}." for n in range(5)]
    body = fake_provider_body(fake_provider, tag, prompts, answers="fresh", verdicts="fresh", max_duels=30)
    before = len(provider_requests(fake_provider))
    with httpx.Client(base_url=service.url, headers=H, timeout=30) as client:
        cid, view, duels = _run(client, body)
        assert view["cost_model"] == "per query"
        reqs = [r for r in provider_requests(fake_provider)[before:] if r["model"].startswith(tag + "-")]
    answers = collections.Counter((r["model"], r["prompt"]) for r in reqs if r["kind"] == "answer")
    # 5 prompts, 30 duels: fresh answers repeat
    assert max(answers.values()) > 1
    assert sum(answers.values()) == 2 * len([d for d in duels if d["status"] in ("judged", "failed", "cancelled")])
    replay_ok(db_url, cid)


async def test_answers_are_pre_generated_for_annotators(api, fake_provider, monkeypatch):
    """Human judge + reuse: after a next-duel, the next planned duels' answers are generated in the
    background and charged to the campaign; the next duel takes them from the store."""
    import asyncio

    from service.campaigns.pregeneration import PREGEN_DUELS, planned_prompts

    draw_key = "5e" * 32
    monkeypatch.setattr(draws, "new_draw_key", lambda: draw_key)  # the test predicts the campaign's draws
    tag = f"p{time.monotonic_ns()}"
    prompts = [f"Pregen question {n}." for n in range(10)]
    body = fake_provider_body(fake_provider, tag, prompts)
    body["models"] = body["models"][:3]
    body["judge"] = {"kind": "human"}
    r = await api.post("/v1/campaigns", json=body)
    assert r.status_code == 201, r.text
    cid = r.json()["id"]
    token = (await api.post(f"/v1/campaigns/{cid}/annotators", json={"label": "ann"})).json()["token"]
    who = {"Authorization": f"Bearer {token}"}
    r = await api.post(f"/v1/campaigns/{cid}/duels", headers=who)
    assert r.status_code == 201, r.text
    first = r.json()
    models = [m["client"]["model"] for m in body["models"]]
    wanted = {
        (m, prompts[i]) for i in planned_prompts(11, 1, len(prompts), PREGEN_DUELS, draw_key=draw_key) for m in models
    }
    deadline = time.monotonic() + 60
    while True:
        asked = {(q["model"], q["prompt"]) for q in provider_requests(fake_provider) if q["kind"] == "answer"}
        if wanted <= asked or time.monotonic() > deadline:
            break
        await asyncio.sleep(0.1)
    assert wanted <= asked, wanted - asked
    await asyncio.sleep(0.5)  # the last pre-generated answer's transaction
    n_before = len(provider_requests(fake_provider))
    assert (await api.post(f"/v1/duels/{first['id']}/vote", headers=who, json={"choice": "a"})).status_code == 200
    r = await api.post(f"/v1/campaigns/{cid}/duels", headers=who)
    assert r.status_code == 201, r.text
    second = (await api.get(f"/v1/duels/{r.json()['id']}")).json()
    # both answers came from the store: zero-cost reuse rows, no new answer request for its prompt
    model_charges = [ch for ch in second["charges"] if ch["kind"] == "model"]
    assert len(model_charges) == 2 and all(ch["reused"] and ch["amount"] == 0 for ch in model_charges)
    new = [
        q
        for q in provider_requests(fake_provider)[n_before:]
        if q["kind"] == "answer" and q["prompt"] == second["prompt"]
    ]
    assert new == []
    # the pre-generated answers are charged to the campaign: spend = the provider's requests x prices
    await asyncio.sleep(1.0)
    mine = [q for q in provider_requests(fake_provider) if q["model"].startswith(tag + "-")]
    view = (await api.get(f"/v1/campaigns/{cid}")).json()
    assert view["spend"] == pytest.approx(
        sum(_nusd(q["prompt_tokens"], q["completion_tokens"], FAKE_MODEL_PRICE) for q in mine),
        abs=1e-9 * (len(mine) + 1),
    )
    assert (await api.get(f"/v1/campaigns/{cid}/replay")).json()["ok"]


async def test_two_models_with_one_generation_config_do_not_wait_for_each_other(api, fake_provider):
    """Same provider model and parameters under two names: one duel needs the same stored answer
    twice; it must not wait for itself (the second call is charged, not stored)."""
    import asyncio

    tag = f"d{time.monotonic_ns()}"
    body = fake_provider_body(fake_provider, tag, ["Twin question."], judge={"kind": "human"})
    body["models"] = [dict(body["models"][0], name="one"), dict(body["models"][0], name="two")]
    cid = (await api.post("/v1/campaigns", json=body)).json()["id"]
    r = await asyncio.wait_for(api.post(f"/v1/campaigns/{cid}/duels"), timeout=30)
    assert r.status_code == 201, r.text
    duel = (await api.get(f"/v1/duels/{r.json()['id']}")).json()
    assert duel["status"] == "pending" and duel["answer_a"] == duel["answer_b"]
    assert (await api.get(f"/v1/campaigns/{cid}/replay")).json()["ok"]
