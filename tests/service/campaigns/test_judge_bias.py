"""Judge bias measured and shown: a judge that always answers [[A]] (the measured case: 120 ties and
``undecidable`` with no hint) is flagged in GET .../judge-bias, the export's judge_bias.json and the
dashboard; an order-consistent judge is not. Wilson intervals checked against their closed forms."""

from __future__ import annotations

import json
import math

import pytest
from service_helpers import campaign_body

from service.campaigns.judge_bias import LIMITS, BiasTally, judge_bias, wilson

BASE = "http://fake.test/v1"
ALWAYS_A = {"a": "[[A]]", "b": "[[A]]", "tie": "[[A]]"}


def test_wilson_interval_closed_forms():
    z = 1.959963984540054
    n = 24
    lo, hi = wilson(0, n)
    assert lo == 0.0 and hi == pytest.approx(z * z / (n + z * z))  # k = 0: the upper end is z^2 / (n + z^2)
    lo, hi = wilson(n, n)
    assert hi == 1.0 and lo == pytest.approx(n / (n + z * z))
    lo, hi = wilson(30, 100)  # symmetric around the Wilson centre (k + z^2/2) / (n + z^2)
    centre = (30 + z * z / 2) / (100 + z * z)
    assert (lo + hi) / 2 == pytest.approx(centre)
    assert lo < 0.3 < hi
    assert wilson(0, 0) is None


class Row:
    def __init__(self, choice, detail, len_a=10, len_b=20):
        self.choice, self.judge_detail, self.len_a, self.len_b = choice, detail, len_a, len_b


def test_counts_from_the_verdict_details():
    judge = {"kind": "llm", "orders": "both", "both_orders": True}
    both_first = {"calls": [{"order": "ab", "verdict": "a"}, {"order": "ba", "verdict": "b"}]}  # first, twice
    agree = {"calls": [{"order": "ab", "verdict": "b"}, {"order": "ba", "verdict": "b"}]}  # second, then first
    reused = {**agree, "reused_verdict": 3}
    rows = [Row("tie", both_first)] * 12 + [Row("b", agree, 10, 20)] * 4 + [Row("b", reused)] * 5
    rep = judge_bias(rows, judge)
    assert rep["verdicts"] == 16  # a reused verdict is not a judgement
    assert rep["first_position"]["count"] == 24 + 4 and rep["first_position"]["of"] == 32
    assert rep["order_disagreement"]["count"] == 12 and rep["order_disagreement"]["of"] == 16
    assert rep["longer_wins"]["count"] == 4 and rep["longer_wins"]["of"] == 4
    assert any("first position in 88%" in w for w in rep["warnings"])
    assert any("orders disagree on 75%" in w for w in rep["warnings"])
    one = judge_bias([Row("a", {"calls": [{"order": "ab", "verdict": "a"}]})] * 3, {"kind": "llm", "orders": "one"})
    assert one["order_disagreement"] is None and one["warnings"] == []  # too few verdicts to warn
    human = judge_bias([Row("a", None)] * 9 + [Row("b", None)], {"kind": "human"})
    assert human["first_position"]["rate"] == 0.9 and human["orders"] is None
    # answer a is the shorter one (10 against 20 characters): a bias either way is past its limit
    assert len(human["warnings"]) == 2 and "the shorter answer won 90% of 10 decisive duels" in human["warnings"][1]
    assert "favour brevity" in human["warnings"][1]
    balanced = judge_bias([Row("a", None)] * 5 + [Row("b", None)] * 5, {"kind": "human"})
    assert balanced["warnings"] == []


class Duel:
    def __init__(self, choice, model_a, model_b):
        self.choice, self.model_a, self.model_b = choice, model_a, model_b
        self.judge_detail, self.len_a, self.len_b = None, 10, 10


def test_a_judge_that_is_also_a_contestant_is_named_with_its_measured_self_preference():
    gpt = {"kind": "openai", "model": "gpt-4.1", "api_key_env": "OPENAI_API_KEY"}
    models = [
        {"name": "gpt", "client": dict(gpt)},
        {"name": "claude", "client": {"kind": "anthropic", "model": "claude-sonnet-4-5"}},
        {"name": "gpt-local", "client": {**gpt, "base_url": "http://localhost:8000/v1"}},  # another server
    ]
    judge = {"kind": "llm", "client": {**gpt, "model": "GPT-4.1"}}
    rows = [Duel("a", 0, 1)] * 7 + [Duel("b", 0, 1)] * 1 + [Duel("b", 2, 0)] * 2 + [Duel("tie", 0, 1)] * 3
    rep = judge_bias(rows, judge, models)
    (own,) = rep["self_judging"]
    assert own["model"] == "gpt" and own["wins"]["count"] == 9 and own["wins"]["of"] == 10
    assert any(
        "the judge is also the contestant 'gpt' (it won 90% of its 10 decisive duels" in w for w in rep["warnings"]
    )
    jury = {
        "kind": "jury",
        "judges": [{"client": {"kind": "anthropic", "model": "claude-sonnet-4-5"}}, {"client": gpt}],
    }
    assert [o["model"] for o in judge_bias([], jury, models)["self_judging"]] == ["gpt", "claude"]
    assert judge_bias(rows, {"kind": "human"}, models)["self_judging"] == []


async def _campaign(api, tag, verdicts=None, n_duels=12):
    params = {"fake_verdicts": verdicts} if verdicts else {}
    body = campaign_body(
        name=f"bias {tag}",
        costs=[0.001, 0.002, 0.003],
        clients=[{"kind": "openai", "base_url": BASE, "model": f"{tag}-{n}-q{n + 2}"} for n in range(3)],
        judge={
            "kind": "llm",
            "cost": 0.001,
            "orders": "both",
            "client": {"kind": "openai", "base_url": BASE, "model": "fake-judge", "params": params},
        },
        budget=10.0,
        tie_policy="drop",
    )
    body["prompt_sampling"] = "with_replacement"
    body["verdicts"] = "fresh"
    r = await api.post("/v1/campaigns", json=body)
    assert r.status_code == 201, r.text
    cid = r.json()["id"]
    for _ in range(n_duels):
        r = await api.post(f"/v1/campaigns/{cid}/duels")
        assert r.status_code == 201, r.text
    return cid


async def test_a_judge_that_always_answers_A_is_flagged(api, fake):
    cid = await _campaign(api, "always-a", ALWAYS_A)
    r = await api.get(f"/v1/campaigns/{cid}/judge-bias")
    assert r.status_code == 200, r.text
    b = r.json()
    assert b["verdicts"] == 12 and b["orders"] == "both"
    fp = b["first_position"]
    assert (fp["count"], fp["of"], fp["rate"], fp["high"]) == (24, 24, 1.0, 1.0)
    assert fp["low"] == pytest.approx(24 / (24 + 1.959963984540054**2), abs=1e-4)
    assert b["order_disagreement"]["rate"] == 1.0 and b["order_disagreement"]["of"] == 12
    assert b["longer_wins"]["of"] == 0  # every duel is a tie: no decisive verdict
    assert any("first position in 100% of its 24 decisive verdicts" in w for w in b["warnings"])
    assert b["limits"]["first_position"] == LIMITS["first_position"]
    # the export carries the same report
    files = (await api.get(f"/v1/campaigns/{cid}/export")).json()["files"]
    assert json.loads(files["judge_bias.json"]) == b
    # the dashboard shows the section and the warning
    page = await api.get(f"/campaigns/{cid}")
    assert page.status_code == 200, page.text
    assert 'id="judge-bias-section"' in page.text and "first position in 100%" in page.text


async def test_an_order_consistent_judge_is_not_flagged(api, fake):
    cid = await _campaign(api, "consistent")  # the fake judge reads the answers' quality: no position bias
    b = (await api.get(f"/v1/campaigns/{cid}/judge-bias")).json()
    fp = b["first_position"]
    assert fp["of"] == 24 and fp["rate"] == 0.5  # each duel: the same answer wins, once first and once second
    assert b["order_disagreement"]["rate"] == 0.0
    assert not any("position" in w for w in b["warnings"])
    assert fp["low"] < 0.5 < fp["high"] and math.isclose(fp["low"] + fp["high"], 1.0, abs_tol=1e-3)


async def test_judge_bias_of_an_unknown_campaign_is_404(api):
    r = await api.get("/v1/campaigns/987654/judge-bias")
    assert r.status_code == 404 and "not found" in r.text


def test_a_grouped_count_equals_the_duels_counted_one_by_one():
    judge = {"kind": "simulated"}
    models = [{"name": f"m{k}", "client": {"kind": "simulated"}} for k in range(3)]
    rows = [Row("a", None, 10, 20), Row("b", None, 30, 20), Row("a", None, 5, 5), Row("b", {"reused_verdict": 4})]
    for r, (a, b) in zip(rows, [(0, 1), (1, 2), (2, 0), (0, 2)]):
        r.model_a, r.model_b = a, b
    one_by_one = BiasTally(judge, models)
    for r in rows * 3:
        one_by_one.add(r)
    grouped = BiasTally(judge, models)
    for r in rows:
        grouped.count(r.choice, r.judge_detail, lengths=(r.len_a, r.len_b), shown=(r.model_a, r.model_b), n=3)
    assert grouped.report() == one_by_one.report() == judge_bias(rows * 3, judge, models)
    assert one_by_one.report()["verdicts"] == 9 and one_by_one.report()["longer_wins"]["of"] == 6
    with pytest.raises(ValueError):  # an LLM judge's calls are read duel by duel
        BiasTally({"kind": "llm"}).count("a", None, lengths=(1, 2), n=2)


async def test_a_simulated_judges_report_is_read_grouped_and_follows_each_duel(api, monkeypatch):
    """The dashboard's and the API's report of a judge that is not an LLM comes from one grouped read of the
    log (results.GROUPED_BIAS_JUDGES): the same report as the duel-by-duel count, and a new one after a duel."""
    from service_helpers import simulated_judge

    from service.campaigns import results as results_module

    P = [[0.5, 0.9, 0.8], [0.1, 0.5, 0.6], [0.2, 0.4, 0.5]]
    body = campaign_body(name="grouped bias", costs=[1.0, 1.0, 1.0], judge=simulated_judge(P), delta=1e-6)
    r = await api.post("/v1/campaigns", json=body)
    assert r.status_code == 201, r.text
    cid = r.json()["id"]
    results = api.app.state.campaigns.results
    reports = []
    for duels in (6, 4):
        for _ in range(duels):
            assert (await api.post(f"/v1/campaigns/{cid}/duels")).status_code == 201
        grouped = (await api.get(f"/v1/campaigns/{cid}/judge-bias")).json()
        window = results.judge_bias(cid, last=5)
        monkeypatch.setattr(results_module, "GROUPED_BIAS_JUDGES", ())
        results.__dict__.pop("_bias_cache", None)  # the same version, counted duel by duel
        assert results.judge_bias(cid) == grouped and results.judge_bias(cid, last=5) == window
        monkeypatch.setattr(results_module, "GROUPED_BIAS_JUDGES", ("simulated", "human"))
        reports.append(grouped)
    assert [rep["verdicts"] for rep in reports] == [6, 10] and window["first_position"]["of"] <= 5
    page = await api.get(f"/campaigns/{cid}")
    assert page.status_code == 200 and 'id="judge-bias-section"' in page.text
