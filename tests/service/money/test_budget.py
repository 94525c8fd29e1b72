"""The budget is never overrun: each duel reserves an upper bound of its charges.

Providers (respx stands in for the remote model API) report token usage whose
per-token cost is 2x and 100x the models' configured ``cost``; the reservation
uses ``max_tokens`` x output price + a bound of the input tokens, so the spend
stays within the budget under concurrent next-duel requests and a concurrent run.
"""

from __future__ import annotations

import asyncio

import httpx
import pytest
import respx

from service.clients.config import call_cost_bound, validate_client_config
from service.money import reserve
from service.money.bounds import model_bound_nusd

PRICE = {"input_per_1m": 1.0, "output_per_1m": 1000.0}  # 0.001 USD per output token
COST = 0.001  # configured expected cost per query


def _model(name: str, **extra) -> dict:
    client = {
        "kind": "openai",
        "base_url": "http://provider.test/v1",
        "model": name,
        "price": PRICE,
        "params": {"max_tokens": 200},
    }
    client.update(extra)
    return {"name": name, "cost": COST, "client": client}


def _provider(factor: int):
    """An OpenAI-compatible answer whose usage costs ``factor`` x the configured cost."""

    def answer(request: httpx.Request) -> httpx.Response:
        return httpx.Response(
            200,
            json={
                "choices": [{"message": {"role": "assistant", "content": "an answer"}}],
                "usage": {"prompt_tokens": 12, "completion_tokens": factor},  # factor x 0.001 USD
            },
        )

    return answer


def _judge_reply(request: httpx.Request) -> httpx.Response:
    return httpx.Response(
        200,
        json={
            "choices": [{"message": {"role": "assistant", "content": "verdict [[A]]"}}],
            "usage": {"prompt_tokens": 50, "completion_tokens": 5},
        },
    )


def test_bound_of_a_call_uses_max_tokens_prices_and_prompt_bytes():
    cfg = validate_client_config(_model("m")["client"])
    b = call_cost_bound(cfg, COST, input_bytes=100)
    assert b == pytest.approx((100 + 256) * 1.0 / 1e6 + 200 * 1000.0 / 1e6)
    assert call_cost_bound(validate_client_config({"kind": "simulated"}), 0.5, 10**6) == 0.5
    no_limit = validate_client_config({"kind": "openai", "model": "m", "price": PRICE})
    assert call_cost_bound(no_limit, COST, 10) is None
    capped = validate_client_config({"kind": "openai", "model": "m", "price": PRICE, "max_cost_per_query": 0.3})
    assert call_cost_bound(capped, COST, 10) == 0.3
    with pytest.raises(ValueError, match="max_cost_per_query"):
        validate_client_config({"kind": "openai", "model": "m", "max_cost_per_query": -1})


async def test_budget_without_a_derivable_bound_is_refused_with_422(api):
    body = {
        "name": "unbounded",
        "models": [_model("a", params={}), _model("b")],
        "prompts": ["q"],
        "judge": {"kind": "human"},
        "budget": 1.0,
    }
    r = await api.post("/v1/campaigns", json=body)
    assert r.status_code == 422, r.text
    assert "max_tokens" in r.text and "max_cost_per_query" in r.text
    body.pop("budget")  # without a budget nothing is reserved: accepted
    assert (await api.post("/v1/campaigns", json=body)).status_code == 201


@pytest.mark.parametrize("factor", [2, 100])
async def test_concurrent_next_duel_requests_never_overrun_the_budget(api, factor):
    budget = 1.0
    body = {
        "name": f"budget x{factor}",
        "models": [_model("a"), _model("b"), _model("c")],
        "prompts": [f"question {n}" for n in range(5)],
        "judge": {"kind": "human"},
        "budget": budget,
        "seed": 1,
        "answers": "fresh",  # every duel pays for both calls (reuse is tested in tests/e2e/test_reuse_e2e.py)
    }
    with respx.mock(assert_all_called=False) as mock:
        mock.post("http://provider.test/v1/chat/completions").mock(side_effect=_provider(factor))
        r = await api.post("/v1/campaigns", json=body)
        assert r.status_code == 201, r.text
        cid = r.json()["id"]
        rs = await asyncio.gather(*[api.post(f"/v1/campaigns/{cid}/duels") for _ in range(30)])
        codes = {x.status_code for x in rs}
        assert codes <= {201, 409, 410}, [x.text for x in rs if x.status_code not in (201, 409, 410)]
        assert 201 in codes
        c = (await api.get(f"/v1/campaigns/{cid}")).json()
    spent = c["spend"]
    assert spent <= budget + 1e-9, c
    created = sum(x.status_code == 201 for x in rs)
    # each created duel charged two calls of factor x 0.001 USD output + 12 input tokens x 1e-6 USD
    assert spent == pytest.approx(created * 2 * (factor * 0.001 + 12e-6), rel=1e-6)


async def test_concurrent_run_with_an_llm_judge_never_overruns_the_budget(api):
    budget = 0.5
    judge = {
        "kind": "llm",
        "client": {
            "kind": "openai",
            "base_url": "http://judge.test/v1",
            "model": "j",
            "price": {"input_per_1m": 0.0, "output_per_1m": 1000.0},
            "params": {"max_tokens": 10},
        },
    }
    body = {
        "name": "run budget",
        "models": [_model("a"), _model("b")],
        "prompts": [f"question {n}" for n in range(5)],
        "judge": judge,
        "budget": budget,
        "seed": 2,
    }
    with respx.mock(assert_all_called=False) as mock:
        mock.post("http://provider.test/v1/chat/completions").mock(side_effect=_provider(100))
        mock.post("http://judge.test/v1/chat/completions").mock(side_effect=_judge_reply)
        r = await api.post("/v1/campaigns", json=body)
        assert r.status_code == 201, r.text
        cid = r.json()["id"]
        r = await api.post(f"/v1/campaigns/{cid}/run", json={"concurrency": 8})
        assert r.status_code == 202, r.text
        for _ in range(600):
            c = (await api.get(f"/v1/campaigns/{cid}")).json()
            if c["status"] != "running":
                break
            await asyncio.sleep(0.05)
    assert c["status"] == "budget_exhausted", c
    assert 0 < c["spend"] <= budget + 1e-9, c


def test_reservation_covers_both_models_and_both_judge_orders():
    models = [validate_client_config(_model(n)["client"]) for n in "ab"]
    ms = [{"name": n, "cost": COST, "client": m} for n, m in zip("ab", models)]
    human = reserve.reserve_duel_nusd(ms, 0, 1, judge={"kind": "human"}, prompt="q", judge_spent_nusd=0, duels_done=0)
    assert human == 2 * model_bound_nusd(ms[0], "q") > 2 * 200 * 1000 * 1000  # > 0.4 USD in nano-USD
    judge = {
        "kind": "llm",
        "cost": 0.0,
        "both_orders": True,
        "client": validate_client_config({"kind": "openai", "model": "j", "price": PRICE, "max_cost_per_query": 0.01}),
    }
    assert (
        reserve.reserve_duel_nusd(ms, 0, 1, judge=judge, prompt="q", judge_spent_nusd=0, duels_done=0)
        == human + 2 * 10_000_000
    )
