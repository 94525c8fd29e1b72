"""The ledger (service/money/ledger.py): a lying provider is charged at most what was reserved.

* usage figures are parsed with bounds: negative, fractional, absurdly large (1e16,
  1e400), NaN, strings: never an overflow, and a provider fault like the next item
  (charged at the bound, the figure stored, the campaign paused), never a free call;
* usage beyond the request's own bound (1e9 completion tokens with ``max_tokens: 100``
  was charged 10,000 USD on a 1 USD budget) is a provider fault: charged at the bound,
  the reported figure stored and shown on the duel and the dashboard, the campaign
  paused with a reason naming the model and the figure; a PATCH continues it;
* the same for an LLM judge whose model lies, on a request and in a background run.

Providers are stood in by respx; SQLite and PostgreSQL (the ``api`` fixture).
"""

from __future__ import annotations

import asyncio
import json
import time
import uuid

import httpx
import pytest
import respx
from sqlalchemy import func, select

from service.clients import usage
from service.models import Campaign, Charge, to_nusd
from service.money import ledger
from service.money.bounds import judge_bound_nusd, model_bound_nusd
from service.money.costs import cost_nusd

URL = "http://ledger.test/v1/chat/completions"
PRICE = {"input_per_1m": 1.0, "output_per_1m": 10.0}  # 1e9 output tokens = 10,000 USD
BUDGET = 1.0


def _model(tag: str, name: str) -> dict:
    return {
        "name": name,
        "cost": 0.001,
        "client": {
            "kind": "openai",
            "base_url": "http://ledger.test/v1",
            "model": f"{tag}-{name}",
            "price": PRICE,
            "params": {"max_tokens": 100},
        },
    }


def _body(tag: str, judge: dict | None = None, **extra) -> dict:
    return {
        "name": f"ledger {tag}",
        "models": [_model(tag, "honest"), _model(tag, "liar")],
        "prompts": ["what is two plus two?"],
        "judge": judge or {"kind": "human"},
        "budget": BUDGET,
        "seed": 1,
        "prompt_sampling": "with_replacement",
        **extra,
    }


def _raw_reply(text: str, usage: str) -> httpx.Response:
    """A chat completion whose usage is written verbatim into the JSON (``1e400`` reads as infinity)."""
    choices = json.dumps([{"message": {"role": "assistant", "content": text}}])
    raw = f'{{"choices": {choices}, "usage": {usage}}}'
    return httpx.Response(200, content=raw.encode(), headers={"content-type": "application/json"})


def _provider(tag: str, liar_usage: str, judge_usage: str = '{"prompt_tokens": 10, "completion_tokens": 3}'):
    def reply(request: httpx.Request) -> httpx.Response:
        body = request.content.decode()
        if f"{tag}-judge" in body:
            return _raw_reply("[[A]]", judge_usage)
        if f"{tag}-liar" in body:
            return _raw_reply(f"liar {uuid.uuid4().hex[:6]}", liar_usage)
        return _raw_reply(f"honest {uuid.uuid4().hex[:6]}", '{"prompt_tokens": 12, "completion_tokens": 50}')

    return reply


def _ledger_sum(svc, cid: int) -> int:
    with svc.db.read() as s:
        return int(
            s.execute(
                select(func.coalesce(func.sum(Charge.amount_nusd), 0)).where(Charge.campaign_id == cid)
            ).scalar_one()
        )


def _spend(svc, cid: int) -> int:
    with svc.db.read() as s:
        return int(s.get(Campaign, cid).spend_nusd)


# ---------------------------------------------------------------- the rules, without a database
@pytest.mark.parametrize("value,want", [(0, 0), (7, 7), (7.0, 7), (None, None), (10**12, 10**12)])
def test_usage_figures_in_range_parse(value, want):
    assert usage.parse_tokens(value, "completion_tokens") == want


@pytest.mark.parametrize(
    "value,words",
    [
        (-1, "negative"),
        (12.5, "whole number"),
        (1e16, "absurdly large"),
        (10**16, "absurdly large"),
        (float("inf"), "finite"),
        (float("nan"), "finite"),
        ("100", "not a number"),
        (True, "not a number"),
    ],
)
def test_usage_figures_out_of_range_are_refused(value, words):
    with pytest.raises(usage.UsageError, match=words):
        usage.parse_tokens(value, "completion_tokens")


def test_a_charge_never_exceeds_its_bound():
    ok = ledger.capped(0.002, 3_000_000, "model 'm'")
    assert (ok.amount_nusd, ok.fault) == (2_000_000, None)
    lie = ledger.capped(10_000.0, 3_000_000, "model 'm'")
    assert lie.amount_nusd == 3_000_000 and lie.reported_nusd == 10**13
    assert "model 'm' reported a cost of 10000 USD" in lie.fault
    huge = ledger.capped(float("inf"), 3_000_000, "model 'm'")  # a price times a lying usage
    assert huge.amount_nusd == 3_000_000 and huge.fault is not None
    unbounded = ledger.capped(1e300, None, "model 'm'")  # no bound derivable: the per-call ceiling
    assert unbounded.amount_nusd == ledger.MAX_CALL_NUSD and unbounded.fault is not None
    tokens = ledger.capped(0.0001, 3_000_000, "model 'm'", "500 output tokens for a request with max_tokens 100")
    assert tokens.amount_nusd == 100_000 and "500 output tokens" in tokens.fault


# ---------------------------------------------------------------- a client reading a lying reply
@pytest.mark.parametrize(
    "usage,words",
    [
        ('{"prompt_tokens": 5, "completion_tokens": 1e400}', "finite"),
        ('{"prompt_tokens": 5, "completion_tokens": 10000000000000000}', "absurdly large"),
        ('{"prompt_tokens": -3, "completion_tokens": 5}', "negative"),
        ('{"prompt_tokens": 3, "completion_tokens": 5.5}', "whole number"),
        ('{"prompt_tokens": 3, "completion_tokens": "many"}', "not a number"),
    ],
)
async def test_the_client_keeps_the_answer_and_names_an_impossible_usage(usage, words):
    from service.clients import build_client, parse_client_config

    cfg = parse_client_config(dict(_model("c", "m")["client"], max_attempts=1))
    client = build_client(cfg, model_name="m", fixed_cost=0.001)
    with respx.mock() as mock:
        mock.post(URL).mock(return_value=_raw_reply("hi", usage))
        completion = await client.complete("q")
    assert completion.text == "hi" and completion.output_tokens is None
    assert completion.usage_fault is not None and words in completion.usage_fault and "usage" in completion.usage_fault
    await client.aclose()


# ---------------------------------------------------------------- a campaign meeting a lying model
async def test_usage_above_max_tokens_is_charged_at_the_bound_and_pauses_the_campaign(api):
    svc = api.app.state.campaigns.cycle
    tag = "l" + uuid.uuid4().hex[:8]
    body = _body(tag)
    bound = model_bound_nusd(body["models"][1], body["prompts"][0])
    with respx.mock(assert_all_called=False) as mock:
        mock.post(URL).mock(side_effect=_provider(tag, '{"prompt_tokens": 12, "completion_tokens": 1000000000}'))
        cid = (await api.post("/v1/campaigns", json=body)).json()["id"]
        r = await api.post(f"/v1/campaigns/{cid}/duels")
        assert r.status_code == 201, r.text
        duel = r.json()
        assert duel["status"] == "failed" and "provider fault" in duel["error"], duel
        r = await api.post(f"/v1/campaigns/{cid}/duels")
        assert r.status_code == 409 and "stopped" in r.text, r.text  # paused: no further call to the liar
    view = (await api.get(f"/v1/campaigns/{cid}")).json()
    assert view["status"] == "stopped", view
    assert "'liar'" in view["end_reason"] and "1000000000 output tokens" in view["end_reason"], view["end_reason"]
    assert view["spend"] <= BUDGET
    # the liar's call is charged its bound, the honest one its usage; both in the ledger
    assert _spend(svc, cid) == _ledger_sum(svc, cid) <= bound + model_bound_nusd(body["models"][0], "")
    full = (await api.get(f"/v1/duels/{duel['id']}")).json()
    charged = [ch for ch in full["charges"] if ch["provider_fault"]]
    assert len(charged) == 1 and charged[0]["amount"] == pytest.approx(bound / 1e9), full["charges"]
    assert charged[0]["reported_cost"] == pytest.approx(10_000.0, rel=1e-3)
    faults = full["provider_faults"]
    assert len(faults) == 1 and faults[0]["output_tokens"] == 10**9, full
    assert faults[0]["reported_cost"] == pytest.approx(10_000.0, rel=1e-3)  # the reported figure is kept
    assert faults[0]["bound"] == pytest.approx(bound / 1e9)
    # the dashboard's duel list shows it
    page = await api.get(f"/campaigns/{cid}")
    assert page.status_code == 200 and "provider fault" in page.text and "1000000000 output tokens" in page.text
    # a PATCH continues the paused campaign
    r = await api.patch(f"/v1/campaigns/{cid}", json={"budget": BUDGET})
    assert r.status_code == 200, r.text
    assert (await api.get(f"/v1/campaigns/{cid}")).json()["status"] == "running"
    assert (await api.get(f"/v1/campaigns/{cid}/replay")).json()["ok"]


@pytest.mark.parametrize(
    "usage,figure",
    [
        ('{"prompt_tokens": 12, "completion_tokens": 10000000000000000}', "1e+16"),
        ('{"prompt_tokens": 12, "completion_tokens": 1e30}', "1e+30"),
        ('{"prompt_tokens": 12, "completion_tokens": 1e400}', "inf"),
        ('{"prompt_tokens": 12, "completion_tokens": NaN}', "nan"),
        ('{"prompt_tokens": 12, "completion_tokens": -5}', "-5"),
        ('{"prompt_tokens": 12, "completion_tokens": 5.5}', "5.5"),
        ('{"prompt_tokens": 12, "completion_tokens": "lots"}', "lots"),
    ],
)
async def test_an_impossible_usage_is_charged_at_the_bound_and_pauses_the_campaign(api, usage, figure):
    """On main such a call failed uncharged and the campaign ran on: a provider reporting 1e16 tokens
    got every call answered for free."""
    svc = api.app.state.campaigns.cycle
    tag = "u" + uuid.uuid4().hex[:8]
    body = _body(tag)
    bound = model_bound_nusd(body["models"][1], body["prompts"][0])
    with respx.mock(assert_all_called=False) as mock:
        mock.post(URL).mock(side_effect=_provider(tag, usage))
        cid = (await api.post("/v1/campaigns", json=body)).json()["id"]
        r = await api.post(f"/v1/campaigns/{cid}/duels")
        assert r.status_code == 201, r.text
        duel = r.json()
        assert duel["status"] == "failed" and "provider fault" in duel["error"], duel
        r = await api.post(f"/v1/campaigns/{cid}/duels")
        assert r.status_code == 409 and "stopped" in r.text, r.text  # paused: nothing more is sent
    view = (await api.get(f"/v1/campaigns/{cid}")).json()
    assert view["status"] == "stopped", view
    assert "'liar'" in view["end_reason"] and figure in view["end_reason"], view["end_reason"]
    full = (await api.get(f"/v1/duels/{duel['id']}")).json()
    charged = [ch for ch in full["charges"] if ch["provider_fault"]]
    assert len(charged) == 1 and charged[0]["amount"] == pytest.approx(bound / 1e9), full["charges"]
    assert figure in charged[0]["provider_fault"]  # the reported figure is stored with the charge
    assert bound < _spend(svc, cid) == _ledger_sum(svc, cid) <= to_nusd(BUDGET)
    assert (await api.get(f"/v1/campaigns/{cid}/replay")).json()["ok"]


def _llm_judge(tag: str) -> dict:
    return {
        "kind": "llm",
        "client": {
            "kind": "openai",
            "base_url": "http://ledger.test/v1",
            "model": f"{tag}-judge",
            "price": {"input_per_1m": 0.01, "output_per_1m": 10.0},  # the bound covers two answers of 400 kB
            "params": {"max_tokens": 10},
        },
    }


async def test_a_lying_llm_judge_is_charged_at_its_bound(api):
    svc = api.app.state.campaigns.cycle
    tag = "j" + uuid.uuid4().hex[:8]
    body = _body(tag, judge=_llm_judge(tag))
    body["models"][1] = _model(tag, "second")  # both models honest
    honest = '{"prompt_tokens": 12, "completion_tokens": 50}'
    with respx.mock(assert_all_called=False) as mock:
        lie = '{"prompt_tokens": 10, "completion_tokens": 1000000000}'
        mock.post(URL).mock(side_effect=_provider(tag, honest, judge_usage=lie))
        cid = (await api.post("/v1/campaigns", json=body)).json()["id"]
        r = await api.post(f"/v1/campaigns/{cid}/duels")
        assert r.status_code == 201, r.text
        duel = r.json()
    assert duel["status"] == "failed" and "provider fault" in duel["error"], duel
    view = (await api.get(f"/v1/campaigns/{cid}")).json()
    assert view["status"] == "stopped" and f"judge model '{tag}-judge'" in view["end_reason"], view
    assert view["duels"] == 0  # the lying judge's verdict is not counted
    judge_bound = judge_bound_nusd(body["judge"], body["prompts"][0])
    assert _spend(svc, cid) == _ledger_sum(svc, cid) <= judge_bound + 2 * model_bound_nusd(body["models"][0], "")
    assert view["spend"] <= BUDGET
    full = (await api.get(f"/v1/duels/{duel['id']}")).json()
    assert [f["side"] for f in full["provider_faults"]] == ["judge"], full


async def test_a_run_with_a_judge_reporting_1e16_tokens_is_paused_and_charged_the_bound(api):
    """On main the judge's calls failed uncharged until the failure cap paused the run."""
    svc = api.app.state.campaigns.cycle
    tag = "r" + uuid.uuid4().hex[:8]
    body = _body(tag, judge=_llm_judge(tag))
    body["models"][1] = _model(tag, "second")
    honest = '{"prompt_tokens": 12, "completion_tokens": 50}'
    with respx.mock(assert_all_called=False) as mock:
        lie = '{"prompt_tokens": 10, "completion_tokens": 10000000000000000}'
        mock.post(URL).mock(side_effect=_provider(tag, honest, judge_usage=lie))
        cid = (await api.post("/v1/campaigns", json=body)).json()["id"]
        r = await api.post(f"/v1/campaigns/{cid}/run", json={"concurrency": 1})
        assert r.status_code == 202, r.text
        deadline = time.monotonic() + 60
        while (view := (await api.get(f"/v1/campaigns/{cid}")).json())["run"]["active"]:
            assert time.monotonic() < deadline, view
            await asyncio.sleep(0.05)
    assert view["status"] == "stopped" and "absurdly large" in view["end_reason"], view
    assert f"judge model '{tag}-judge'" in view["end_reason"]
    assert view["duels"] == 0 and view["duels_failed"] == 1
    judge_bound = judge_bound_nusd(body["judge"], body["prompts"][0])
    assert judge_bound < _spend(svc, cid) == _ledger_sum(svc, cid) <= to_nusd(BUDGET)


def test_tokens_past_max_tokens_are_a_fault_unless_the_price_has_a_ceiling():
    from service.clients import Completion, compute_cost

    model = _model("t", "m")
    price = model["client"]["price"]
    over = Completion("t", 12, 110, compute_cost(price, 12, 110, 0.001), 0.1)  # 110 > max_tokens 100
    fault = ledger.model_charge(model, "q", over)
    assert fault.fault is not None and "110 output tokens for a request with max_tokens 100" in fault.fault
    assert fault.amount_nusd == cost_nusd(over.cost)  # under the cost bound: charged what it reported
    # with max_cost_per_query the ceiling is the bound (providers bill hidden reasoning tokens as output)
    capped_model = dict(model, client=dict(model["client"], max_cost_per_query=0.01))
    ok = ledger.model_charge(capped_model, "q", over)
    assert ok.fault is None and ok.amount_nusd == cost_nusd(over.cost)
