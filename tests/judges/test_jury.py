"""A jury of LLM judges (kind ``jury``): validation, majority and mean, each juror paid for its own calls
once per verdict with reuse (counted at the fake provider), and its agreement shown."""

from __future__ import annotations

import pytest
from service_helpers import all_duels, campaign_body

from judges import JuryJudge, LLMJudge
from judges.jury import combine_jury
from service.cli.campaign_text import bias_lines
from service.clients import Completion

BASE = "http://fake.test/v1"
ALWAYS_A = {"a": "[[A]]", "b": "[[A]]", "tie": "[[A]]"}


def juror(model: str, cost: float, **params) -> dict:
    return {"client": {"kind": "openai", "base_url": BASE, "model": model, "params": params}, "cost": cost}


def jury(combine="majority", **kw) -> dict:
    return {
        "kind": "jury",
        "combine": combine,
        "judges": [
            juror("judge-one", 0.001),
            {"kind": "llm", **juror("judge-two", 0.002)},
            juror("judge-biased", 0.004, fake_verdicts=ALWAYS_A),
        ],
        **kw,
    }


def test_combine_rules():
    assert combine_jury([1.0, 1.0, 0.0], "majority") == 1.0
    assert combine_jury([0.75, 0.25, 0.5], "majority") == 0.5  # one vote each, one tie: a tie
    assert combine_jury([0.0, 0.5, 0.5], "majority") == 0.0  # ties do not vote
    assert combine_jury([1.0, 0.5, 0.25], "mean") == pytest.approx(0.5833333)
    with pytest.raises(ValueError):
        combine_jury([1.0], "vote")


class Scripted:
    """A judge model answering from a fixed list of replies (one per call, in order)."""

    def __init__(self, replies, cost=0.01):
        self.replies, self.cost, self.calls = list(replies), cost, 0

    async def complete(self, prompt):
        self.calls += 1
        return Completion(self.replies.pop(0), 10, 2, self.cost, 0.0, 1)

    async def aclose(self):
        pass


async def test_mean_jury_of_scripted_judges_and_a_failing_juror():
    cfg = {"kind": "llm", "orders": "one", "both_orders": False}
    a, b = Scripted(["[[A]]"]), Scripted(["[[C]]"])
    j = JuryJudge(
        {"kind": "jury", "combine": "mean"},
        ["x", "y"],
        jurors=[LLMJudge(cfg, ["x", "y"], client=a), LLMJudge(cfg, ["x", "y"], client=b)],
        names=["a", "b"],
    )
    v = await j.judge("q", "one", "two", model_a=0, model_b=1)
    assert v.choice == "a" and v.score == pytest.approx(0.75) and v.cost == pytest.approx(0.02)
    assert [c["juror"] for c in v.detail["calls"]] == ["a", "b"]
    assert [r["agrees"] for r in v.detail["jurors"]] == [True, False]
    # a juror without a readable verdict: a judge error, every call still paid
    bad = JuryJudge(
        {"kind": "jury"},
        ["x", "y"],
        jurors=[
            LLMJudge(cfg, ["x", "y"], client=Scripted(["[[A]]"])),
            LLMJudge(cfg, ["x", "y"], client=Scripted(["?"])),
        ],
        names=["a", "b"],
    )
    v = await bad.judge("q", "one", "two", model_a=0, model_b=1)
    assert v.choice is None and "juror b" in v.error and v.cost == pytest.approx(0.02)


@pytest.mark.parametrize(
    "judge, where",
    [
        ({"kind": "jury", "judges": [juror("judge-one", 0.1)]}, "2 to 9"),
        ({"kind": "jury", "judges": [{"kind": "human"}, juror("judge-one", 0.1)]}, "a juror is an LLM judge"),
        (jury(combine="vote"), "combine"),
        ({"kind": "jury", "judges": [juror("judge-one", 0.1), {"cost": 0.1}]}, "client"),
    ],
)
async def test_bad_jury_configs_are_422(api, judge, where):
    r = await api.post("/v1/campaigns", json=campaign_body(judge=judge))
    assert r.status_code == 422, r.text
    assert where in r.text


async def _campaign(api, tag, verdicts, n_duels):
    body = campaign_body(
        name=f"jury {tag}",
        costs=[0.001, 0.002, 0.003],
        clients=[{"kind": "openai", "base_url": BASE, "model": f"{tag}-{n}-q{n + 2}"} for n in range(3)],
        judge=jury(),
        budget=10.0,
    )
    body["verdicts"] = verdicts
    body["prompt_sampling"] = "with_replacement"  # prompts repeat: verdicts are reused under reuse
    r = await api.post("/v1/campaigns", json=body)
    assert r.status_code == 201, r.text
    c = r.json()
    for _ in range(n_duels):
        r = await api.post(f"/v1/campaigns/{c['id']}/duels")
        assert r.status_code == 201, r.text
        assert r.json()["status"] == "judged", r.json()
    return c, await all_duels(api, c["id"])


@pytest.mark.parametrize("verdicts", ["fresh", "reuse"])
async def test_majority_jury_through_the_service(api, fake, verdicts):
    before = {m: 0 for m in ("judge-one", "judge-two", "judge-biased")}
    for q in fake.state.provider.requests:
        if q["model"] in before:
            before[q["model"]] += 1
    c, duels = await _campaign(api, f"jury-{verdicts}", verdicts, 12)
    assert c["judge_cost"] == pytest.approx(2 * (0.001 + 0.002 + 0.004))  # c_J: every juror's two calls
    prov = fake.state.provider
    for d in duels:
        # the two honest jurors agree (the better answer); the biased one says A in both orders -> a tie:
        # the majority is the honest jurors'
        better_a = prov.quality(f"jury-{verdicts}-{d['model_a']}-q{d['model_a'] + 2}") > prov.quality(
            f"jury-{verdicts}-{d['model_b']}-q{d['model_b'] + 2}"
        )
        assert d["choice"] == ("a" if better_a else "b")
        assert sorted({c["juror"] for c in d["judge"]["calls"]}) == ["judge-biased", "judge-one", "judge-two"]
    paid = [d for d in duels if "reused_verdict" not in d["judge"]]
    assert len(paid) == 12 if verdicts == "fresh" else 0 < len(paid) < 12
    after = {m: 0 for m in before}
    for q in prov.requests:
        if q["model"] in after:
            after[q["model"]] += 1
    # each juror is paid once per verdict (two orders), none again for a reused verdict
    assert {m: after[m] - before[m] for m in after} == {m: 2 * len(paid) for m in after}
    view = (await api.get(f"/v1/campaigns/{c['id']}")).json()
    assert view["judge_spend"] == pytest.approx(len(paid) * 2 * 0.007)
    assert (await api.get(f"/v1/campaigns/{c['id']}/replay")).json()["ok"] is True

    bias = (await api.get(f"/v1/campaigns/{c['id']}/judge-bias")).json()
    agreement = {j["name"]: j["agreement"] for j in bias["jury"]["jurors"]}
    assert agreement["judge-one"]["rate"] == 1.0 and agreement["judge-two"]["rate"] == 1.0
    assert agreement["judge-biased"]["rate"] == 0.0 and agreement["judge-biased"]["of"] == len(paid)
    assert bias["jury"]["combine"] == "majority"
    first = {j["name"]: j["first_position"] for j in bias["jury"]["jurors"]}
    assert first["judge-biased"]["rate"] == 1.0 and first["judge-biased"]["of"] == 2 * len(paid)
    assert first["judge-one"]["rate"] == 0.5  # the same answer wins in both orders: once first, once second
    assert any(line.startswith("  juror      judge-biased: agrees with the jury 0% of") for line in bias_lines(bias))
    page = await api.get(f"/campaigns/{c['id']}")
    assert 'id="jury-agreement"' in page.text and "judge-biased" in page.text
