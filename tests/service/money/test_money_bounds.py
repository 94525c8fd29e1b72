"""Money-like inputs have an upper bound the int64 nano-USD ledger can hold: an absurd cost, price,
fee, per-call cap, price-map entry or budget is a 422 naming the bound at create, never a 500 at
create or later (docs/reliability.md, Limits)."""

from __future__ import annotations

import json

import httpx
import pytest
from conftest import app_client
from service_helpers import campaign_body

from service.schemas import CampaignCreate

HUGE = 1e300


def _openai(model: str = "acme-model", **extra) -> dict:
    return {"kind": "openai", "model": model, "base_url": "http://models.invalid/v1", **extra}


def _msg(r: httpx.Response) -> str:
    return json.dumps(r.json()["detail"])


def _bodies() -> dict[str, dict]:
    priced = _openai(price={"input_per_1m": 1.0, "output_per_1m": 1.0})
    return {
        "max_cost_per_query with a budget": campaign_body(
            clients=[{**priced, "max_cost_per_query": HUGE}, {"kind": "simulated"}, {"kind": "simulated"}],
            budget=10.0,
        ),
        "client price without cost": {
            **campaign_body(
                clients=[_openai(price={"input_per_1m": HUGE, "output_per_1m": HUGE})] + [{"kind": "simulated"}] * 2
            ),
            "models": [
                {"name": "m0", "client": _openai(price={"input_per_1m": HUGE, "output_per_1m": HUGE})},
                {"name": "m1", "cost": 1.0, "client": {"kind": "simulated"}},
            ],
        },
        "price_map entry": {
            **campaign_body(),
            "models": [
                {"name": "m0", "client": _openai("acme-model")},
                {"name": "m1", "cost": 1.0, "client": {"kind": "simulated"}},
            ],
            "price_map": {"acme-model": {"input_cost_per_token": HUGE, "output_cost_per_token": HUGE}},
        },
        "llm judge cost": campaign_body(judge={"kind": "llm", "client": _openai("judge-model"), "cost": HUGE}),
        "model cost": campaign_body(costs=(2e6, 1.0, 1.0)),
        "human fee": campaign_body(judge={"kind": "human", "fee_per_vote": 2e6}),
        "budget": campaign_body(budget=2e9),
        "judge client price": campaign_body(
            judge={"kind": "llm", "client": _openai("judge-model", price={"input_per_1m": HUGE, "output_per_1m": 1.0})}
        ),
        "call bound from max_tokens": campaign_body(
            clients=[
                _openai(price={"input_per_1m": 100.0, "output_per_1m": 100.0}, params={"max_tokens": 10**15}),
                {"kind": "simulated"},
                {"kind": "simulated"},
            ]
        ),
        "judge call bound from max_tokens": campaign_body(
            judge={
                "kind": "llm",
                "client": _openai(
                    "j", price={"input_per_1m": 1.0, "output_per_1m": 100.0}, params={"max_tokens": 10**15}
                ),
            }
        ),
        "derived cost over the bound": {
            **campaign_body(),
            "models": [
                # both prices within bounds, but 10 million expected output tokens at 1e6 USD/M: 1e7 USD a query
                {"name": "m0", "client": _openai(price={"input_per_1m": 1e6, "output_per_1m": 1e6})},
                {"name": "m1", "cost": 1.0, "client": {"kind": "simulated"}},
            ],
            "expected_output_tokens": 10_000_000,
        },
    }


@pytest.mark.parametrize("case", list(_bodies()))
async def test_absurd_money_is_a_422_naming_the_bound(api, case):
    r = await api.post("/v1/campaigns", json=_bodies()[case])
    assert r.status_code == 422, (case, r.status_code, r.text)
    msg = _msg(r)
    assert any(bound in msg for bound in ("1e+06", "1e+09", "1000000")), msg


@pytest.mark.parametrize("bad", [float("nan"), float("inf")])
def test_nan_and_infinity_are_refused_everywhere(bad):
    for body in (
        campaign_body(costs=(bad, 1.0, 1.0)),
        campaign_body(judge={"kind": "human", "fee_per_vote": bad}),
        campaign_body(judge={"kind": "llm", "client": _openai("j"), "cost": bad}),
        campaign_body(clients=[_openai(price={"input_per_1m": 1.0, "output_per_1m": 1.0}, max_cost_per_query=bad)] * 3),
        campaign_body(budget=bad),
    ):
        with pytest.raises(ValueError):
            CampaignCreate.model_validate(body)


async def _create_with_price_map_file(db_url: str, path, body: dict) -> httpx.Response:
    """POST ``body`` as a new campaign to an app whose LLMDUEL_PRICE_MAP is ``path``."""
    from service import pricing

    try:
        async with app_client(db_url, price_map=str(path)) as client:
            return await client.post("/v1/campaigns", json=body)
    finally:
        pricing.set_price_map_file(None)


async def test_a_price_map_file_nested_100000_deep_is_a_clear_422(db_url, tmp_path):
    """On main every create answered 500 (RecursionError in the JSON reader)."""
    path = tmp_path / "prices.json"
    path.write_text("[" * 100_000 + "]" * 100_000)
    body = {
        **campaign_body(),
        "models": [{"name": "m0", "client": _openai("acme-model")}, campaign_body()["models"][1]],
    }
    r = await _create_with_price_map_file(db_url, path, body)
    assert r.status_code == 422, r.text
    assert "LLMDUEL_PRICE_MAP" in _msg(r) and "nested too deeply" in _msg(r)


async def test_price_map_file_entry_over_the_bound_is_a_422(db_url, tmp_path):
    path = tmp_path / "prices.json"
    path.write_text(json.dumps({"acme-model": {"input_cost_per_token": HUGE, "output_cost_per_token": 1e-6}}))
    body = {
        **campaign_body(),
        "models": [
            {"name": "m0", "client": _openai("acme-model")},
            {"name": "m1", "cost": 1.0, "client": {"kind": "simulated"}},
        ],
    }
    r = await _create_with_price_map_file(db_url, path, body)
    assert r.status_code == 422, r.text
    assert "LLMDUEL_PRICE_MAP" in _msg(r) and "1" in _msg(r)


async def test_bounds_at_their_limit_are_accepted_and_duels_run(api):
    """The largest accepted values still run: a duel is reserved, judged and charged without overflow."""
    body = campaign_body(
        costs=(1e6, 1e6, 1e6),
        judge={"kind": "human", "fee_per_vote": 1e6},
        budget=1e9,
    )
    r = await api.post("/v1/campaigns", json=body)
    assert r.status_code == 201, r.text
    cid = r.json()["id"]
    d = await api.post(f"/v1/campaigns/{cid}/duels")
    assert d.status_code in (200, 201), d.text
    v = await api.post(f"/v1/duels/{d.json()['id']}/vote", json={"choice": "a"})
    assert v.status_code == 200, v.text
    c = (await api.get(f"/v1/campaigns/{cid}")).json()
    assert c["spend"] == pytest.approx(3e6)


async def test_a_policy_error_at_create_is_unprocessable(api):
    """Whatever slips past the schema, the policy's own refusal is a 422 (Unprocessable), not a 500."""
    from service.campaigns import Unprocessable

    body = CampaignCreate.model_validate(campaign_body())
    body.models[0].cost = 1e13  # above the policy's COST_MAX: bypasses the schema on purpose
    with pytest.raises(Unprocessable, match="cost"):
        api.app.state.campaigns.lifecycle.create_campaign(body)


async def test_a_row_stored_before_the_bounds_ends_for_its_budget_not_with_a_500(api):
    """A campaign stored by an older version with an absurd judge cost: asking for a duel no longer
    fails on converting its cost bound; the bound fits no budget, so the campaign ends for its budget."""
    from service.models import Campaign

    judge = {"kind": "llm", "client": _openai("judge-model"), "cost": 1.0}
    r = await api.post("/v1/campaigns", json=campaign_body(judge=judge))
    assert r.status_code == 201, r.text
    cid = r.json()["id"]
    db = api.app.state.db
    with db.write() as s:
        row = s.get(Campaign, cid)
        row.judge = {**row.judge, "cost": HUGE}
    d = await api.post(f"/v1/campaigns/{cid}/duels")
    assert d.status_code < 500, d.text
    c = (await api.get(f"/v1/campaigns/{cid}")).json()
    assert c["status"] == "budget_exhausted" and c["spend"] == 0.0, (c["status"], c["spend"])


@pytest.mark.parametrize("entry", ["cheap", 5, None, ["input_cost_per_token", 1e-6]])
async def test_a_malformed_price_map_entry_in_a_body_is_a_422(api, entry):
    """On main an entry that is not an object was skipped silently (the docs promise a 422)."""
    body = {**campaign_body(), "price_map": {"acme-model": entry}}
    r = await api.post("/v1/campaigns", json=body)
    assert r.status_code == 422, r.text
    assert "price_map['acme-model']" in _msg(r)
