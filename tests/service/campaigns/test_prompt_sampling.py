"""The campaign setting ``prompt_sampling`` (docs/reuse.md, "In the service"): its validity rules
(each a 422 naming the reason), ``auto`` resolution, the tie policy's default, the campaign file
field, and the pure rules behind the draw (secret permutation, lowest free position, in-order
release). The service runs of campaigns sampling without replacement are in
tests/e2e/test_wor_e2e.py."""

from __future__ import annotations

import random

import pytest
from service_helpers import campaign_body, simulated_judge

from algorithms.vocabulary import PromptSampling, TiePolicy
from service.campaign_files import read_campaign_file
from service.campaigns.draws import new_draw_key
from service.campaigns.sampling import free_position, next_in_order, prompt_permutation, resolve_prompt_sampling
from service.schemas import CampaignCreate

LLM_JUDGE = {"kind": "llm", "client": {"kind": "openai", "base_url": "http://127.0.0.1:9/v1", "model": "j"}}


def _body(**extra) -> dict:
    return campaign_body(name="sampling", judge=extra.pop("judge", LLM_JUDGE), **extra)


# ---------------------------------------------------------------- the pure rules
def test_the_permutation_is_a_keyed_permutation_of_the_prompt_indices():
    key_a, key_b = new_draw_key(), new_draw_key()
    perm = prompt_permutation(key_a, 50)
    assert sorted(perm) == list(range(50))
    assert perm == prompt_permutation(key_a, 50)  # deterministic under the key
    assert perm != prompt_permutation(key_b, 50)  # another key, another order (chance 1/50!)
    assert perm != list(range(50))
    assert prompt_permutation(key_a, 1) == [0]


def test_the_first_position_is_uniform_over_keys():
    # a rough check of the keyed draw: over 4000 keys each of 4 prompts comes first about 1000 times
    firsts = [prompt_permutation(new_draw_key(), 4)[0] for _ in range(4000)]
    counts = [firsts.count(k) for k in range(4)]
    assert all(880 < n < 1120 for n in counts), counts


def test_free_position_is_the_lowest_one_not_taken():
    assert free_position([], 3) == 0
    assert free_position([0, 1], 3) == 2
    assert free_position([1, 2], 3) == 0  # position 0 failed: it is used again first
    assert free_position([0, 2], 3) == 1
    assert free_position([0, 1, 2], 3) is None


def test_held_outcomes_are_released_in_position_order_up_to_the_first_gap():
    assert next_in_order(0, {}) == []
    assert next_in_order(0, {1: "q1", 2: "q2"}) == []  # position 0 still in flight
    assert next_in_order(0, {0: "q0", 1: "q1", 3: "q3"}) == ["q0", "q1"]
    assert next_in_order(2, {2: "q2", 3: "q3", 4: "q4"}) == ["q2", "q3", "q4"]
    # any arrival order gives the same recorded order
    order = list(range(10))
    for _ in range(20):
        random.shuffle(order)
        held, recorded, seen = {}, 0, []
        for q in order:
            held[q] = q
            out = next_in_order(recorded, held)
            for r in out:
                del held[r]
            recorded += len(out)
            seen += out
        assert seen == list(range(10))


@pytest.mark.parametrize(
    "algorithm, answers, verdicts, judge, tie, resolved, tie_resolved",
    [
        ("dctas-pc", "reuse", "reuse", "llm", None, "without_replacement", "half"),
        ("dctas-pc", "reuse", "reuse", "llm", "random", "with_replacement", "random"),
        ("dctas-pc", "reuse", "reuse", "llm", "half", "without_replacement", "half"),
        ("dctas-pc", "reuse", "reuse", "llm", "drop", "with_replacement", "drop"),
        ("dctas-pc", "reuse", "fresh", "llm", None, "with_replacement", "drop"),
        ("dctas-pc", "fresh", "reuse", "llm", None, "with_replacement", "drop"),
        ("dctas-pc", "reuse", "reuse", "simulated", None, "with_replacement", "drop"),
        ("dctas-pc", "reuse", "reuse", "human", None, "with_replacement", "drop"),
        ("dctas", "reuse", "reuse", "llm", None, "with_replacement", "drop"),
        ("dctas", "reuse", "reuse", "llm", "half", "with_replacement", "half"),
    ],
)
def test_auto_resolution(algorithm, answers, verdicts, judge, tie, resolved, tie_resolved):
    got = resolve_prompt_sampling(
        "auto", tie, algorithm=algorithm, answers=answers, verdicts=verdicts, judge_kind=judge
    )
    assert got == (resolved, tie_resolved)


def test_explicit_values_resolve_to_themselves():
    kw = dict(algorithm="dctas-pc", answers="reuse", verdicts="fresh")
    assert resolve_prompt_sampling("without_replacement", None, judge_kind="simulated", **kw) == (
        "without_replacement",
        "half",
    )
    assert resolve_prompt_sampling("with_replacement", None, judge_kind="llm", **kw) == (
        "with_replacement",
        "drop",
    )
    assert resolve_prompt_sampling("with_replacement", "half", judge_kind="llm", **kw) == (
        "with_replacement",
        "half",
    )


def test_the_request_model_stores_resolved_values():
    body = CampaignCreate.model_validate(_body())
    assert body.prompt_sampling == PromptSampling.WITHOUT_REPLACEMENT and body.tie_policy == TiePolicy.HALF
    body = CampaignCreate.model_validate(_body(tie_policy="drop"))
    assert body.prompt_sampling == PromptSampling.WITH_REPLACEMENT and body.tie_policy == TiePolicy.DROP
    body = CampaignCreate.model_validate(_body(judge={"kind": "human"}))
    assert body.prompt_sampling == PromptSampling.WITH_REPLACEMENT and body.tie_policy == TiePolicy.DROP
    body = CampaignCreate.model_validate(_body(judge=simulated_judge(), prompt_sampling="without_replacement"))
    assert body.prompt_sampling == PromptSampling.WITHOUT_REPLACEMENT and body.tie_policy == TiePolicy.HALF


# ---------------------------------------------------------------- through the API
INVALID = [
    ({"algorithm": "dctas"}, "needs algorithm dctas-pc"),
    ({"algorithm": "tas"}, "needs algorithm dctas-pc"),
    ({"answers": "fresh"}, "needs answers: reuse"),
    ({"judge": {"kind": "human"}}, "needs an automatic judge"),
    ({"tie_policy": "drop"}, "needs tie_policy half, got drop"),
    ({"tie_policy": "random"}, "needs tie_policy half, got random"),
    ({"judge": simulated_judge(), "tie_policy": "random"}, "it would certify the coin"),
    ({"judge": simulated_judge(), "tie_policy": "drop"}, "population of decisive prompts is unknown"),
]


@pytest.mark.parametrize("extra, message", INVALID)
async def test_invalid_combinations_are_422_naming_the_reason(api, extra, message):
    r = await api.post("/v1/campaigns", json=_body(prompt_sampling="without_replacement", **extra))
    assert r.status_code == 422, r.text
    detail = r.json()["detail"]
    assert any(message in d["msg"] for d in detail), detail


async def test_an_unknown_value_is_422(api):
    r = await api.post("/v1/campaigns", json=_body(prompt_sampling="sometimes"))
    assert r.status_code == 422
    assert "prompt_sampling" in str(r.json()["detail"])


async def test_with_replacement_resolutions_are_stored_and_shown(api):
    # an explicit tie_policy drop: auto gives with replacement
    view = (await api.post("/v1/campaigns", json=_body(tie_policy="drop"))).json()
    assert view["prompt_sampling"] == "with_replacement" and view["tie_policy"] == "drop"
    assert view["population"] is None and view["exact"] is None
    # a human judge: with replacement, tie policy drop by default
    view = (await api.post("/v1/campaigns", json=_body(judge={"kind": "human"}))).json()
    assert view["prompt_sampling"] == "with_replacement" and view["tie_policy"] == "drop"
    # a simulated judge: auto keeps with replacement
    view = (await api.post("/v1/campaigns", json=_body(judge=simulated_judge()))).json()
    assert view["prompt_sampling"] == "with_replacement" and view["tie_policy"] == "drop"
    # explicit with_replacement on an LLM judge, tie policy absent: drop
    view = (await api.post("/v1/campaigns", json=_body(prompt_sampling="with_replacement"))).json()
    assert view["prompt_sampling"] == "with_replacement" and view["tie_policy"] == "drop"
    page = await api.get(f"/campaigns/{view['id']}")
    assert 'id="prompt-sampling">with replacement' in page.text


async def test_the_field_is_documented_in_openapi(api):
    spec = (await api.get("/openapi.json")).json()
    props = spec["components"]["schemas"]["CampaignCreate"]["properties"]
    text = str(props["prompt_sampling"])
    assert "without_replacement" in text and "auto" in text and "undecidable" in text
    assert "half for a campaign" in str(props["tie_policy"])


def test_campaign_files_carry_the_setting(tmp_path):
    p = tmp_path / "c.yaml"
    p.write_text(
        "name: wor\n"
        "prompt_sampling: without_replacement\n"
        "tie_policy: half\n"
        "models:\n  - {name: a, cost: 1, client: {kind: simulated}}\n  - {name: b, cost: 1, client: {kind: simulated}}\n"
        "prompts: [one, two]\n"
        "judge: {kind: simulated, preference: [[0.5, 0.6], [0.4, 0.5]]}\n"
    )
    body = read_campaign_file(p)
    assert body["prompt_sampling"] == "without_replacement"
    parsed = CampaignCreate.model_validate(body)
    assert parsed.prompt_sampling == "without_replacement" and parsed.tie_policy == "half"
    for refused in ("drop", "random"):
        p.write_text(p.read_text().replace("tie_policy: half", f"tie_policy: {refused}"))
        with pytest.raises(ValueError, match=f"needs tie_policy half, got {refused}"):
            CampaignCreate.model_validate(read_campaign_file(p))
        p.write_text(p.read_text().replace(f"tie_policy: {refused}", "tie_policy: half"))
