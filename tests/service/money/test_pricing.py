"""Prices from the price map: lookup (exact, provider alias, user overrides), the derived
cost per query, unknown models refused with 422, the observed-versus-expected warning."""

from __future__ import annotations

import json

import httpx
import pytest
import respx
from service_helpers import campaign_body, simulated_judge

from service import pricing
from service.clients.config import validate_client_config
from service.schemas import CampaignCreate

PROMPTS = ["x" * 400, "y" * 800]  # mean 600 characters = 150 tokens


def _client(model: str, kind: str = "openai", **extra) -> dict:
    return validate_client_config({"kind": kind, "model": model, **extra})


def test_bundled_map_has_common_models_with_litellm_fields():
    m = pricing.bundled_map()
    assert len(m) >= 30
    for key in ("gpt-4o", "claude-sonnet-4-5", "gemini/gemini-2.5-pro", "deepseek/deepseek-chat"):
        assert m[key]["input_cost_per_token"] > 0 and m[key]["output_cost_per_token"] > 0
    # the facts as LiteLLM's map (2026-07-24) states them: gpt-4o costs 2.5 / 10 USD per million tokens
    assert m["gpt-4o"]["input_cost_per_token"] == pytest.approx(2.5e-6)
    assert m["gpt-4o"]["output_cost_per_token"] == pytest.approx(1e-5)
    assert m["gpt-4o"]["litellm_provider"] == "openai"


def test_lookup_exact_alias_and_provider_from_host():
    exact = pricing.lookup_price(_client("gpt-4o"))
    assert (exact.input_per_1m, exact.output_per_1m, exact.key, exact.source) == (
        pytest.approx(2.5),
        pytest.approx(10.0),
        "gpt-4o",
        "bundled",
    )
    assert exact.max_output_tokens == 16384
    # LiteLLM's provider-prefixed spelling
    assert pricing.lookup_price(_client("openai/gpt-4o")).key == "gpt-4o"
    # the Gemini API names models "models/<id>"; LiteLLM keys them "gemini/<id>"
    gem = pricing.lookup_price(_client("models/gemini-2.5-pro", kind="gemini"))
    assert gem.key == "gemini/gemini-2.5-pro"
    # an OpenAI-compatible host names the provider
    ds = pricing.lookup_price(_client("deepseek-chat", base_url="https://api.deepseek.com/v1"))
    assert ds.key == "deepseek/deepseek-chat"
    # LiteLLM keys deepseek-coder only under its provider: a local server of that name is not DeepSeek's API
    assert pricing.lookup_price(_client("deepseek-coder", base_url="https://api.deepseek.com")).key == (
        "deepseek/deepseek-coder"
    )
    assert pricing.lookup_price(_client("deepseek-coder", base_url="http://localhost:8000/v1")) is None
    assert pricing.lookup_price(_client("no-such-model")) is None
    # the client's own price wins over every map
    own = pricing.lookup_price(_client("gpt-4o", price={"input_per_1m": 1.0, "output_per_1m": 2.0}))
    assert (own.source, own.input_per_1m) == ("client", 1.0)


def test_user_maps_win_over_the_bundled_one(tmp_path, monkeypatch):
    path = tmp_path / "prices.json"
    path.write_text(
        json.dumps(
            {
                "gpt-4o": {"input_cost_per_token": 1e-6, "output_cost_per_token": 2e-6},
                "my-local-llama": {"input_cost_per_token": 0, "output_cost_per_token": 1e-7},
            }
        )
    )
    monkeypatch.setattr(pricing, "_price_map_file", str(path))
    p = pricing.lookup_price(_client("gpt-4o"))
    assert (p.source, p.input_per_1m, p.output_per_1m) == ("file", pytest.approx(1.0), pytest.approx(2.0))
    assert pricing.lookup_price(_client("my-local-llama", base_url="http://localhost:8000/v1")).source == "file"
    body_map = pricing.normalise_price_map(
        {"gpt-4o": {"input_cost_per_token": 3e-6, "output_cost_per_token": 4e-6}}, "x"
    )
    p = pricing.lookup_price(_client("gpt-4o"), body_map)
    assert (p.source, p.input_per_1m) == ("price_map", pytest.approx(3.0))
    # the file is re-read when it changes
    path.write_text(json.dumps({"gpt-4o": {"input_cost_per_token": 5e-6, "output_cost_per_token": 5e-6}}))
    import os

    os.utime(path, (1, 1))
    assert pricing.lookup_price(_client("gpt-4o")).input_per_1m == pytest.approx(5.0)


def test_derived_cost_from_price_and_expected_tokens():
    body = campaign_body(
        prompts=PROMPTS,
        expected_output_tokens=400,
        clients=[
            {"kind": "openai", "model": "gpt-4o"},
            {"kind": "openai", "model": "gpt-4o-mini"},
            {"kind": "simulated"},
        ],
    )
    body["models"][0].pop("cost")
    body["models"][1].pop("cost")
    body["models"][1]["expected_output_tokens"] = 100
    c = CampaignCreate.model_validate(body)
    stored = [m.stored() for m in c.models]
    # gpt-4o: (150 * 2.5 + 400 * 10) / 1e6
    assert stored[0]["cost"] == pytest.approx((150 * 2.5 + 400 * 10.0) / 1e6)
    assert stored[0]["pricing"]["cost_source"] == "derived"
    assert stored[0]["pricing"]["price_key"] == "gpt-4o"
    assert stored[0]["client"]["price"] == {"input_per_1m": pytest.approx(2.5), "output_per_1m": pytest.approx(10.0)}
    # a model's own expected_output_tokens wins: gpt-4o-mini (150 * 0.15 + 100 * 0.6) / 1e6
    assert stored[1]["cost"] == pytest.approx((150 * 0.15 + 100 * 0.6) / 1e6)
    # a configured cost is kept; simulated clients have no price
    assert stored[2]["cost"] == 1.0 and stored[2]["pricing"]["cost_source"] == "configured"
    assert stored[2]["pricing"]["price"] is None


async def test_unknown_model_without_cost_is_422_naming_it(api):
    body = campaign_body(clients=[{"kind": "openai", "model": "mystery-9000", "base_url": "http://h.test/v1"}] * 3)
    body["models"][1].pop("cost")
    r = await api.post("/v1/campaigns", json=body)
    assert r.status_code == 422, r.text
    msg = json.dumps(r.json())
    assert "models['m1']" in msg and "mystery-9000" in msg and "price_map" in msg and "cost" in msg
    # a simulated model has no price to look up: it needs its cost
    body = campaign_body()
    body["models"][0].pop("cost")
    r = await api.post("/v1/campaigns", json=body)
    assert r.status_code == 422 and "models['m0']" in r.text
    # a malformed price map is refused with its key named
    body = campaign_body(price_map={"x": {"input_cost_per_token": -1, "output_cost_per_token": 0}})
    r = await api.post("/v1/campaigns", json=body)
    assert r.status_code == 422 and "price_map['x'].input_cost_per_token" in r.text


async def test_price_map_in_the_body_prices_an_unknown_model(api):
    body = campaign_body(
        clients=[{"kind": "openai", "model": "house-model", "base_url": "http://h.test/v1"}] * 3,
        price_map={"house-model": {"input_cost_per_token": 1e-6, "output_cost_per_token": 3e-6}},
        prompts=PROMPTS,
    )
    for m in body["models"]:
        m.pop("cost")
    r = await api.post("/v1/campaigns", json=body)
    assert r.status_code == 201, r.text
    m0 = r.json()["models"][0]
    assert m0["cost"] == pytest.approx((150 * 1.0 + 500 * 3.0) / 1e6)  # default 500 output tokens
    assert m0["cost_source"] == "derived" and m0["price"]["source"] == "price_map"
    assert m0["calls"] == 0 and m0["observed_cost"] is None and m0["cost_warning"] is None
    page = (await api.get(f"/campaigns/{r.json()['id']}")).text
    models_table = page.split('id="models-section"')[1].split("</table>")[0]
    assert "derived" in models_table and "house-model" in models_table
    # annotators see neither prices nor observed costs
    cid = r.json()["id"]
    token = (await api.post(f"/v1/campaigns/{cid}/annotators", json={})).json()["token"]
    seen = (await api.get(f"/v1/campaigns/{cid}", headers={"Authorization": f"Bearer {token}"})).json()
    assert seen["id"] == cid and not {"cost_warnings", "models"} & set(seen)  # the annotator view has no models


def _usage_reply(completion_tokens: int):
    def answer(request: httpx.Request) -> httpx.Response:
        return httpx.Response(
            200,
            json={
                "choices": [{"message": {"role": "assistant", "content": "an answer"}}],
                "usage": {"prompt_tokens": 0, "completion_tokens": completion_tokens},
            },
        )

    return answer


def test_cost_warning_rule():
    assert pricing.cost_warning("m", 0.01, 0.03, pricing.COST_CHECK_MIN_CALLS) is not None
    assert pricing.cost_warning("m", 0.01, 0.003, pricing.COST_CHECK_MIN_CALLS) is not None
    assert pricing.cost_warning("m", 0.01, 0.019, 100) is None
    assert pricing.cost_warning("m", 0.01, 0.03, pricing.COST_CHECK_MIN_CALLS - 1) is None
    assert pricing.cost_warning("m", 0.01, None, 100) is None


async def test_observed_cost_three_times_the_configured_one_warns(api):
    """Model m0's provider charges 3x its configured cost per call; m1 and m2 as configured."""
    price = {"input_per_1m": 0.0, "output_per_1m": 1000.0}  # 0.001 USD per output token
    clients = [
        {"kind": "openai", "base_url": f"http://p{n}.test/v1", "model": f"house-{n}", "price": price} for n in range(3)
    ]
    even = [[0.5] * 3 for _ in range(3)]  # nobody can be certified: the campaign runs on
    body = campaign_body(
        costs=(0.01, 0.01, 0.01), clients=clients, judge=simulated_judge(even), max_duels=200, answers="fresh"
    )
    with respx.mock(assert_all_called=False) as mock:
        mock.post("http://p0.test/v1/chat/completions").mock(side_effect=_usage_reply(30))  # 0.03 USD
        mock.post("http://p1.test/v1/chat/completions").mock(side_effect=_usage_reply(10))
        mock.post("http://p2.test/v1/chat/completions").mock(side_effect=_usage_reply(10))
        cid = (await api.post("/v1/campaigns", json=body)).json()["id"]
        for _ in range(200):  # until m0 has been called enough (the policy picks the pairs)
            r = await api.post(f"/v1/campaigns/{cid}/duels")
            if r.status_code != 201:
                break
            view = (await api.get(f"/v1/campaigns/{cid}")).json()
            if view["models"][0]["calls"] >= pricing.COST_CHECK_MIN_CALLS:
                break
    view = (await api.get(f"/v1/campaigns/{cid}")).json()
    by_name = {m["name"]: m for m in view["models"]}
    assert by_name["m0"]["calls"] >= pricing.COST_CHECK_MIN_CALLS, by_name
    assert by_name["m0"]["observed_cost"] == pytest.approx(0.03)
    assert by_name["m0"]["cost_warning"] and "3 times" in by_name["m0"]["cost_warning"]
    assert by_name["m1"]["cost_warning"] is None
    assert view["cost_warnings"] == [by_name["m0"]["cost_warning"]]
    # the dashboard shows the observed mean beside the expected cost, and the warning
    page = await api.get(f"/campaigns/{cid}")
    assert page.status_code == 200, page.text
    assert 'id="cost-warnings"' in page.text and "3 times the expected cost per query" in page.text
    assert "derived" not in page.text.split('id="models-section"')[1].split("</table>")[0]  # all configured here
    assert "0.03" in page.text and f"{by_name['m0']['calls']} calls" in page.text


async def test_reused_answers_are_not_calls_of_the_observed_cost(api):
    """With answer reuse, a model is paid once per prompt; the zero-cost reuse rows are no calls,
    so the observed mean stays the price of a call (and raises no false warning)."""
    price = {"input_per_1m": 0.0, "output_per_1m": 1000.0}
    clients = [
        {"kind": "openai", "base_url": f"http://r{n}.test/v1", "model": f"reused-{n}", "price": price} for n in range(3)
    ]
    even = [[0.5] * 3 for _ in range(3)]
    body = campaign_body(costs=(0.03, 0.01, 0.01), clients=clients, judge=simulated_judge(even), max_duels=30)
    with respx.mock(assert_all_called=False) as mock:
        for n, tokens in enumerate((30, 10, 10)):
            mock.post(f"http://r{n}.test/v1/chat/completions").mock(side_effect=_usage_reply(tokens))
        cid = (await api.post("/v1/campaigns", json=body)).json()["id"]
        for _ in range(30):
            if (await api.post(f"/v1/campaigns/{cid}/duels")).status_code != 201:
                break
        paid = mock.calls.call_count
    view = (await api.get(f"/v1/campaigns/{cid}")).json()
    m0 = view["models"][0]
    assert view["duels"] >= 20 and paid <= 3 * len(body["prompts"])  # answers were reused
    assert sum(m["calls"] for m in view["models"]) == paid and m0["calls"] <= len(body["prompts"])
    assert m0["observed_cost"] == pytest.approx(0.03) and view["cost_warnings"] == []


async def test_budget_reserves_with_the_price_maps_output_limit(api):
    """A model priced from the map needs no max_tokens under a budget: the map's max_output_tokens bounds a call."""
    from service.models import Campaign
    from service.money.bounds import model_bound_nusd

    body = campaign_body(clients=[{"kind": "openai", "model": "gpt-4o"}] * 3, budget=10.0, prompts=PROMPTS)
    for m in body["models"]:
        m.pop("cost")
    r = await api.post("/v1/campaigns", json=body)
    assert r.status_code == 201, r.text
    cid = r.json()["id"]
    svc = api.app.state.campaigns.cycle

    def stored_models():
        with svc.db.read() as s:
            return s.get(Campaign, cid).models

    stored = await svc.in_thread(stored_models)
    assert stored[0]["pricing"]["max_output_tokens"] == 16384 and "max_tokens" not in stored[0]["client"]["params"]
    # the bound: input bytes + template overhead at 2.5 USD/M, 16384 output tokens at 10 USD/M
    bound = model_bound_nusd(stored[0], "x" * 100)
    assert bound == pytest.approx(((100 + 256) * 2.5 + 16384 * 10.0) / 1e6 * 1e9, rel=1e-6)
    # a price without any output limit cannot be reserved against: adding a budget later is refused
    own = {
        "kind": "openai",
        "model": "house",
        "base_url": "http://h.test/v1",
        "price": {"input_per_1m": 1, "output_per_1m": 1},
    }
    cid = (await api.post("/v1/campaigns", json=campaign_body(clients=[own] * 3))).json()["id"]
    r = await api.patch(f"/v1/campaigns/{cid}", json={"budget": 5.0})
    assert r.status_code == 422 and "max_tokens" in r.text


async def test_unreadable_price_map_file_is_a_clear_422(api, monkeypatch, tmp_path):
    monkeypatch.setattr(pricing, "_price_map_file", str(tmp_path / "missing.json"))
    body = campaign_body(clients=[{"kind": "openai", "model": "gpt-4o"}] * 3)
    r = await api.post("/v1/campaigns", json=body)
    assert r.status_code == 422 and pricing.PRICE_MAP_ENV in r.text and "cannot read" in r.text
    (tmp_path / "bad.json").write_text("{not json")
    monkeypatch.setattr(pricing, "_price_map_file", str(tmp_path / "bad.json"))
    r = await api.post("/v1/campaigns", json=body)
    assert r.status_code == 422 and "not a readable JSON file" in r.text
    # simulated models never look prices up: unaffected
    assert (await api.post("/v1/campaigns", json=campaign_body())).status_code == 201
