"""A configured LLM judge through the service: template, system prompt, strengths and
the fake provider's judge, on SQLite and PostgreSQL; bad judge configs are 422."""

from __future__ import annotations

import pytest
from service_helpers import all_duels, campaign_body

BASE = "http://fake.test/v1"
TEMPLATE = (
    "Which reply answers better?\n## Question\n{question}\n## Reference\n{reference}\n"
    "## Reply A\n{answer_a}\n## Reply B\n{answer_b}\nEnd with [[A>>B]], [[A>B]], [[A=B]], [[B>A]] or [[B>>A]]."
)
SCORES = {"A>>B": 1.0, "A>B": 0.75, "A=B": 0.5, "B>A": 0.25, "B>>A": 0.0}
VERDICTS = {"a": "[[A>B]]", "b": "[[B>A]]", "tie": "[[A=B]]", "a_strong": "[[A>>B]]", "b_strong": "[[B>>A]]"}


def judge_config(**kw) -> dict:
    return {
        "kind": "llm",
        "client": {"kind": "openai", "base_url": BASE, "model": "fake-judge", "params": {"fake_verdicts": VERDICTS}},
        "system_prompt": "You are a strict grader.",
        "prompt_template": TEMPLATE,
        "verdict_patterns": {"regex": r"\[\[([AB<>=]+)\]\]", "scores": SCORES},
        "cost": 0.001,
        "orders": "both",  # the two orders' labels are checked below
        **kw,
    }


@pytest.mark.parametrize("verdicts", ["fresh", "reuse"])
async def test_configured_judge_with_strengths_through_the_service(api, fake, verdicts):
    # quality ratios below 2: every win is a weak one; one set of provider models per case (the answer
    # store is shared by the campaigns of a database, and each fake provider seals its answers with its own key)
    names = [f"{verdicts}-small-q3", f"{verdicts}-mid-q4", f"{verdicts}-large-q5"]
    body = campaign_body(
        name=f"arena-style judge {verdicts}",
        costs=[0.001, 0.002, 0.003],
        clients=[{"kind": "openai", "base_url": BASE, "model": n} for n in names],
        judge=judge_config(),
        budget=10.0,
    )
    body["verdicts"] = verdicts  # reuse: a stored graded verdict is mirrored for the other presentation
    body["prompt_sampling"] = "with_replacement"  # 12 duels on 3 prompts: prompts repeat, verdicts are reused
    r = await api.post("/v1/campaigns", json=body)
    assert r.status_code == 201, r.text
    c = r.json()
    assert c["judge"]["prompt_template"] == TEMPLATE and c["judge"]["combine"] == "consistent"
    assert c["judge_cost"] == pytest.approx(0.002)  # two orders
    cid = c["id"]
    for _ in range(12):
        r = await api.post(f"/v1/campaigns/{cid}/duels")
        assert r.status_code == 201, r.text
        assert r.json()["status"] == "judged", r.json()
    duels = await all_duels(api, cid)
    for d in duels:
        winner_a = fake.state.provider.quality(names[d["model_a"]]) > fake.state.provider.quality(names[d["model_b"]])
        assert d["choice"] == ("a" if winner_a else "b")
        # the stored score is the pair's lower-index model's: 0.75 for a weak win, 0.25 for a weak loss
        lower_won = max(d["model_a"], d["model_b"]) != (d["model_a"] if winner_a else d["model_b"])
        assert d["score"] == pytest.approx(0.75 if lower_won else 0.25), d
        calls = d["judge"]["calls"]
        # the two orders' labels (a stored verdict is asked in one canonical order and mirrored, so the
        # calls are in that order; the score above shows the mirroring kept the winner's side)
        assert sorted(c["parsed"] for c in calls) == ["A>B", "B>A"]
        shown_first_won = winner_a != d["judge"].get("stored_order_swapped", False)  # the judge's own order
        assert d["judge"]["score_a"] == pytest.approx(0.75 if shown_first_won else 0.25)
        assert "small" not in (d["answer_a"] + d["answer_b"])  # fake answers name no model
    view = (await api.get(f"/v1/campaigns/{cid}")).json()
    assert view["leader"] == "m2"  # campaign_body names the models m0, m1, m2 (large-q5)
    paid = [d for d in duels if "reused_verdict" not in d["judge"]]
    assert len(paid) == 12 if verdicts == "fresh" else 0 < len(paid) < 12
    assert view["judge_spend"] == pytest.approx(len(paid) * 0.002)
    # W[i][j] holds the graded scores: 0.75 per weak win
    assert any(
        abs(w - 0.75 * n) < 1e-9 and n
        for row_w, row_n in zip(view["wins"], view["counts"])
        for w, n in zip(row_w, row_n)
    )
    assert (await api.get(f"/v1/campaigns/{cid}/replay")).json()["ok"] is True
    assert fake.state.provider.stats["judgements"] == 2 * len(paid)  # both orders of each paid verdict


@pytest.mark.parametrize(
    "patch, where",
    [
        ({"prompt_template": "{question} {answer_a} {answer_b} {secret}"}, "unknown field {secret}"),
        ({"prompt_template": "{answer_a} {answer_b}"}, "must contain {question}"),
        ({"verdict_patterns": {"regex": "no group", "scores": SCORES}}, "exactly one capturing group"),
        ({"verdict_patterns": {"regex": "(x)", "scores": {"A>B": 0.9, "B>A": 0.2}}}, "must add to 1"),
        ({"combine": "vote"}, "combine"),
    ],
)
async def test_bad_judge_configs_are_422_with_a_message(api, patch, where):
    r = await api.post("/v1/campaigns", json=campaign_body(judge=judge_config(**patch)))
    assert r.status_code == 422, r.text
    assert where in r.text
