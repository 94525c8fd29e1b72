"""The LLM judge option ``orders: both | one`` through the service, against the fake provider:
validation, one judge call per duel, c_J per call, an order that varies and follows the secret draw key."""

from __future__ import annotations

import pytest
from service_helpers import all_duels, campaign_body

from service.campaigns.draws import draw_prompt_and_side, new_draw_key
from service.money.costs import judge_cost_per_duel
from service.stored_config import judge_orders, judges_both_orders

BASE = "http://fake.test/v1"


def llm_judge(**kw) -> dict:
    return {"kind": "llm", "client": {"kind": "openai", "base_url": BASE, "model": "fake-judge"}, "cost": 0.01, **kw}


@pytest.mark.parametrize(
    "patch, where",
    [
        ({"orders": "three"}, "Input should be 'both', 'one' or 'auto'"),
        ({"orders": "auto", "both_orders": True}, "contradicts both_orders"),
        ({"orders": "one", "both_orders": True}, "contradicts both_orders"),
        ({"orders": 1}, "orders"),
    ],
)
async def test_bad_orders_are_422_with_a_message(api, patch, where):
    r = await api.post("/v1/campaigns", json=campaign_body(judge=llm_judge(**patch)))
    assert r.status_code == 422, r.text
    assert where in r.text


async def _run(api, fake, names, orders, n_duels, seed=7, verdicts="fresh"):
    body = campaign_body(
        name=f"orders {orders}",
        costs=[0.001, 0.002, 0.003],
        clients=[{"kind": "openai", "base_url": BASE, "model": n} for n in names],
        judge=llm_judge(**({} if orders is None else {"orders": orders})),
        budget=10.0,
        seed=seed,
    )
    body["verdicts"] = verdicts
    body["prompt_sampling"] = "with_replacement"
    r = await api.post("/v1/campaigns", json=body)
    assert r.status_code == 201, r.text
    c = r.json()
    before = len(fake.state.provider.requests)
    for _ in range(n_duels):
        r = await api.post(f"/v1/campaigns/{c['id']}/duels")
        assert r.status_code == 201, r.text
        assert r.json()["status"] == "judged", r.json()
    judge_requests = [q for q in fake.state.provider.requests[before:] if q["kind"] == "judge"]
    return c, judge_requests, await all_duels(api, c["id"])


async def test_one_order_makes_one_judge_call_per_duel_and_halves_c_j(api, fake):
    names = ["ord1-small-q3", "ord1-mid-q4", "ord1-large-q5"]
    c, calls, duels = await _run(api, fake, names, "one", 16)
    assert c["judge"]["orders"] == "one" and c["judge"]["both_orders"] is False
    assert c["judge_cost"] == pytest.approx(0.01)  # c_J: one call per duel
    assert c["policy_judge_cost"] == pytest.approx(0.01)  # what the allocation uses
    assert len(calls) == 16  # counted at the provider
    for d in duels:
        assert [x["order"] for x in d["judge"]["calls"]] == ["ab"]
        assert d["judge"]["calls"][0]["cost"] == pytest.approx(0.01)
    view = (await api.get(f"/v1/campaigns/{c['id']}")).json()
    assert view["judge_spend"] == pytest.approx(16 * 0.01)
    assert (await api.get(f"/v1/campaigns/{c['id']}/replay")).json()["ok"] is True

    # both orders: two calls per duel, c_J twice the call's cost
    c2, calls2, _ = await _run(api, fake, ["ord2-small-q3", "ord2-mid-q4", "ord2-large-q5"], "both", 6)
    assert c2["judge"]["orders"] == "both" and c2["judge_cost"] == pytest.approx(0.02)
    assert len(calls2) == 12


def _first_shown(fake, names, calls, duels):
    """Per duel, the model index whose answer the judge read first (from the provider's view of the request)."""
    prov = fake.state.provider
    quality = {prov.quality(n): k for k, n in enumerate(names)}
    return [quality[prov.unseal(q["first"])] == min(d["model_a"], d["model_b"]) for q, d in zip(calls, duels)]


async def test_one_order_varies_across_duels_and_follows_the_secret_key(api, fake):
    names = ["ord3-small-q3", "ord3-mid-q4", "ord3-large-q5"]
    c1, calls1, duels1 = await _run(api, fake, names, "one", 24)
    c2, calls2, duels2 = await _run(api, fake, names, "one", 24)  # same body, same seed
    lower_first_1 = _first_shown(fake, names, calls1, duels1)
    lower_first_2 = _first_shown(fake, names, calls2, duels2)
    # the judge reads the duel's shown order (a first): it varies from duel to duel
    for d, q in zip(duels1, calls1):
        assert fake.state.provider.unseal(q["first"]) == fake.state.provider.quality(names[d["model_a"]])
    assert 0 < sum(lower_first_1) < len(lower_first_1)
    # the order is the keyed draw of the campaign's secret key, not a function of the public seed:
    # two campaigns with the same body and seed order their duels differently
    assert lower_first_1 != lower_first_2
    # no route shows the key
    for cid in (c1["id"], c2["id"]):
        text = (await api.get(f"/v1/campaigns/{cid}")).text + (await api.get(f"/v1/campaigns/{cid}/duels")).text
        assert "draw_key" not in text


def test_the_order_draw_is_keyed_hmac():
    key1, key2 = new_draw_key(), new_draw_key()
    sides1 = [draw_prompt_and_side(7, n, 3, key1)[1] for n in range(1, 65)]
    sides2 = [draw_prompt_and_side(7, n, 3, key2)[1] for n in range(1, 65)]
    assert sides1 != sides2 and 10 < sum(sides1) < 54


def test_c_j_counts_calls_per_duel_for_old_and_new_rows():
    base = {"kind": "llm", "client": {"kind": "openai", "model": "j"}, "cost": 0.5}
    assert judge_cost_per_duel(base) == pytest.approx(1.0)  # a row from before `orders`: both
    assert judge_cost_per_duel({**base, "both_orders": False}) == pytest.approx(0.5)
    assert judge_cost_per_duel({**base, "orders": "one", "both_orders": False}) == pytest.approx(0.5)
    assert judge_orders({**base, "orders": "both", "both_orders": True}) == 2


def test_verdict_keys_of_rows_stored_before_orders_are_unchanged():
    from service.campaigns import store_keys
    from service.judging import validate_judge_config

    old_row = validate_judge_config(llm_judge(both_orders=False))
    old_row.pop("orders")  # as a row stored before the field existed
    new_row = validate_judge_config(llm_judge(orders="one"))
    assert new_row["orders"] == "one" and new_row["both_orders"] is False
    assert store_keys.judge_key(old_row) == store_keys.judge_key(new_row)
    assert store_keys.judge_key(new_row) != store_keys.judge_key(validate_judge_config(llm_judge(orders="both")))
    assert store_keys.stored_order(new_row, "b", "a") == (False, "ab")  # one order: stored per presentation
    assert store_keys.stored_order(validate_judge_config(llm_judge(orders="both")), "b", "a") == (True, "both")


async def _auto_run(api, fake, names, n_duels, **client_params):
    judge = llm_judge(orders="auto")
    if client_params:
        judge["client"] = {**judge["client"], "params": client_params}
    body = campaign_body(
        name="orders auto",
        costs=[0.001, 0.002, 0.003],
        clients=[{"kind": "openai", "base_url": BASE, "model": n} for n in names],
        judge=judge,
        budget=10.0,
        seed=7,
        delta=1e-12,  # no certificate within the duels asked for
    )
    body["prompt_sampling"] = "with_replacement"
    body["verdicts"] = "fresh"  # every duel judged (a reused verdict repeats an earlier one)
    r = await api.post("/v1/campaigns", json=body)
    assert r.status_code == 201, r.text
    c = r.json()
    for _ in range(n_duels):
        r = await api.post(f"/v1/campaigns/{c['id']}/duels")
        assert r.status_code == 201 and r.json()["status"] == "judged", r.text
    bias = (await api.get(f"/v1/campaigns/{c['id']}/judge-bias")).json()
    return c, await all_duels(api, c["id"]), bias


async def test_auto_goes_to_one_order_for_a_consistent_judge(api, fake):
    c, duels, bias = await _auto_run(api, fake, ["auto1-small-q3", "auto1-mid-q4", "auto1-large-q5"], 40)
    assert c["judge"]["orders"] == "auto" and c["judge"]["both_orders"] is False
    assert c["judge_cost"] == pytest.approx(0.02)  # reserved and told as two calls: the mode it starts in
    n_calls = [len(d["judge"]["calls"]) for d in duels]
    # the orders agree on every duel (no flip, no tie): one order is cheaper, after min_pairs duels in both
    assert n_calls[:8] == [2] * 8
    assert n_calls[8:].count(1) >= 28
    assert [d["judge"]["orders"] for d in duels] == ["both" if n == 2 else "one" for n in n_calls]
    assert bias["orders"] == "auto" and bias["modes"] == {"both": n_calls.count(2), "one": n_calls.count(1)}
    assert bias["order_disagreement"]["rate"] == 0.0 and bias["one_order_cheaper"] is True
    assert (await api.get(f"/v1/campaigns/{c['id']}/replay")).json()["ok"] is True
    # the dashboard and `campaign show` say which mode ran
    page = (await api.get(f"/campaigns/{c['id']}")).text
    assert 'id="judge-orders"' in page
    assert f"{n_calls.count(2)} verdicts read both orders, {n_calls.count(1)} one order" in page
    from service.cli.campaign_text import bias_lines

    line = f"orders auto: {n_calls.count(2)} duels in both, {n_calls.count(1)} in one; one order cheaper"
    assert any(line in x for x in bias_lines(bias))


async def test_auto_stays_in_both_orders_for_a_judge_that_reads_the_position(api, fake):
    # a judge that always answers [[A]]: every duel's two orders disagree (flip rate 1)
    c, duels, bias = await _auto_run(
        api, fake, ["auto2-small-q3", "auto2-mid-q4", "auto2-large-q5"], 20, fake_verdicts={"a": "[[A]]", "b": "[[A]]"}
    )
    assert [len(d["judge"]["calls"]) for d in duels] == [2] * 20
    assert bias["modes"] == {"both": 20, "one": 0} and bias["one_order_cheaper"] is False
    assert bias["order_disagreement"]["rate"] == 1.0
    view = (await api.get(f"/v1/campaigns/{c['id']}")).json()
    assert view["judge_spend"] == pytest.approx(40 * 0.01)


@pytest.mark.parametrize("where", ["jury", "hybrid"])
async def test_auto_is_refused_for_jurors_and_a_hybrids_judge_whose_default_is_both(api, where):
    juror = {"client": {"kind": "openai", "base_url": BASE, "model": "fake-judge"}, "cost": 0.01}
    if where == "jury":
        judge = {"kind": "jury", "judges": [{**juror, "orders": "auto"}, juror]}
        ok = {"kind": "jury", "judges": [juror, juror]}
    else:
        judge = {"kind": "hybrid", "llm": {"kind": "llm", **juror, "orders": "auto"}}
        ok = {"kind": "hybrid", "llm": {"kind": "llm", **juror}}
    r = await api.post("/v1/campaigns", json=campaign_body(judge=judge))
    assert r.status_code == 422 and "auto is for a campaign's own llm judge" in r.text, r.text
    r = await api.post("/v1/campaigns", json=campaign_body(judge=ok))
    assert r.status_code == 201, r.text
    stored = r.json()["judge"]
    members = stored["judges"] if where == "jury" else [stored["llm"]]
    assert all(m["orders"] == "both" for m in members)


def test_auto_verdicts_have_their_own_key_and_are_stored_per_presentation():
    from service.campaigns import store_keys
    from service.judging import validate_judge_config

    auto, both = validate_judge_config(llm_judge(orders="auto")), validate_judge_config(llm_judge(orders="both"))
    assert auto["orders"] == "auto" and judge_orders(auto) == 2 and not judges_both_orders(auto)
    assert store_keys.judge_key(auto) != store_keys.judge_key(both)
    assert store_keys.judge_key(auto) != store_keys.judge_key(validate_judge_config(llm_judge(orders="one")))
    assert store_keys.stored_order(auto, "b", "a") == (False, "ab")
