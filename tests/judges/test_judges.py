"""Judges: config validation, simulated and human judges, the LLM judge."""

import json
import random

import httpx
import pytest
import respx

from judges import HumanJudge, SimulatedJudge, Verdict
from judges.llm import (
    JUDGE_HEADER,
    LLMJudge,
    combine,
    parse_verdict,
    render_judge_prompt,
)
from service.judging import build_judge as build_judge_from_model
from service.judging import parse_judge_config, validate_judge_config


def build_judge(cfg, names, **kw):
    """Validate once (as the API and the stored row do), then build."""
    return build_judge_from_model(parse_judge_config(cfg), names, **kw)


def parse_judge_prompt(text):
    """(question, answer_a, answer_b) of a prompt of the built-in template, else None (test helper)."""
    if not isinstance(text, str) or not text.startswith(JUDGE_HEADER):
        return None
    try:
        q0 = text.index("\n<question>\n") + len("\n<question>\n")
        q1 = text.index("\n</question>\n\n<answer_a>\n", q0)
        a0 = q1 + len("\n</question>\n\n<answer_a>\n")
        a1 = text.rindex("\n</answer_a>\n\n<answer_b>\n", a0)
        b0 = a1 + len("\n</answer_a>\n\n<answer_b>\n")
        b1 = text.rindex("\n</answer_b>\n")
    except ValueError:
        return None
    return (text[q0:q1], text[a0:a1], text[b0:b1]) if b1 >= b0 else None


NAMES = ["alpha", "beta", "gamma"]
P3 = [[0.5, 0.8, 0.6], [0.2, 0.5, 0.7], [0.4, 0.3, 0.5]]
URL = "http://judge.test/v1/chat/completions"


# ---------------------------------------------------------------- validation
@pytest.mark.parametrize(
    "cfg, n, needle",
    [
        ({"kind": "robot"}, 3, "judge.kind"),
        ("human", 3, "judge:"),
        ({"kind": "human", "x": 1}, 3, "judge.x"),
        ({"kind": "simulated"}, 3, "judge.preference"),
        ({"kind": "simulated", "preference": [[0.5, 0.5], [0.5, 0.5]]}, 3, "is 2x2 but the campaign has 3 models"),
        ({"kind": "simulated", "preference": [[0.5, 0.8, 0.6], [0.2, 0.5]]}, 3, "must be square"),
        (
            {"kind": "simulated", "preference": [[0.5, 1.2], [-0.2, 0.5]]},
            2,
            "judge.preference[0][1]: must be in [0, 1]",
        ),
        ({"kind": "simulated", "preference": [[0.5, "x"], [0.5, 0.5]]}, 2, "judge.preference[0][1]: must be a number"),
        ({"kind": "simulated", "preference": [[0.5, 0.8], [0.3, 0.5]]}, 2, "p[0][1] + p[1][0] must equal 1"),
        (
            {"kind": "simulated", "preference": [[0.5, 10**400], [0, 0.5]]},
            2,
            "judge.preference[0][1]: must be a number",
        ),
        ({"kind": "simulated", "preference": [[0.5, 0.5], [0.5, 0.5]], "tie_prob": 10**400}, 2, "judge.tie_prob"),
        ({"kind": "llm", "client": {"kind": "openai", "model": "m"}, "cost": 10**400}, 2, "judge.cost"),
        ({"kind": "simulated", "preference": [[0.5, 0.8], [0.2, 0.5]], "tie_prob": 1.0}, 2, "judge.tie_prob"),
        ({"kind": "llm"}, 2, "judge.client"),
        ({"kind": "llm", "client": {"kind": "simulated"}}, 2, "judge.client.kind"),
        ({"kind": "llm", "client": {"kind": "openai"}}, 2, "judge.client.model"),
        ({"kind": "llm", "client": {"kind": "openai", "model": "m"}, "cost": -1}, 2, "judge.cost"),
        ({"kind": "llm", "client": {"kind": "openai", "model": "m"}, "both_orders": "yes"}, 2, "judge.both_orders"),
    ],
)
def test_invalid_judge_configs(cfg, n, needle):
    with pytest.raises(ValueError) as ei:
        validate_judge_config(cfg, n_models=n)
    assert needle in str(ei.value)


def test_valid_judge_configs_are_normalised():
    assert validate_judge_config({"kind": "human"}) == {"kind": "human", "fee_per_vote": 0.0}
    sim = validate_judge_config({"kind": "simulated", "preference": [[0, 1 - 1e-9], [0, 0]]})
    assert sim["tie_prob"] == 0.0 and sim["preference"][0][1] == pytest.approx(1.0)
    llm = validate_judge_config({"kind": "llm", "client": {"kind": "openai", "model": "j"}})
    assert (
        llm["cost"] == 0.0
        and llm["orders"] == "auto"
        and llm["both_orders"] is False
        and llm["client"]["max_attempts"] == 4
    )
    with pytest.raises(ValueError, match="tie_policy"):
        build_judge({"kind": "human"}, NAMES, tie_policy="coin")


# ---------------------------------------------------------------- human
async def test_human_judge_is_not_automatic():
    j = build_judge({"kind": "human"}, NAMES)
    assert isinstance(j, HumanJudge) and j.automatic is False
    with pytest.raises(RuntimeError):
        await j.judge("q", "a", "b", model_a=0, model_b=1, rng=random.Random(0))


# ---------------------------------------------------------------- simulated
async def test_simulated_judge_draws_from_the_matrix():
    j = build_judge({"kind": "simulated", "preference": P3}, NAMES)
    assert isinstance(j, SimulatedJudge) and j.automatic
    rng = random.Random(123)
    n = 4000
    wins_ab = sum([(await j.judge("q", "x", "y", model_a=0, model_b=1, rng=rng)).choice == "a" for _ in range(n)])
    wins_ba = sum([(await j.judge("q", "x", "y", model_a=1, model_b=0, rng=rng)).choice == "a" for _ in range(n)])
    assert abs(wins_ab / n - 0.8) < 0.03 and abs(wins_ba / n - 0.2) < 0.03
    v = await j.judge("q", "x", "y", model_a=2, model_b=1, rng=random.Random(5))
    assert v.cost == 0.0 and v.error is None and v.detail["p"] == 0.3


async def test_simulated_judge_one_draw_per_duel_is_reproducible():
    j = build_judge({"kind": "simulated", "preference": P3}, NAMES)
    r1, r2 = random.Random(7), random.Random(7)
    seq = [(await j.judge("q", "", "", model_a=0, model_b=2, rng=r1)).choice for _ in range(50)]
    expected = ["a" if r2.random() < 0.6 else "b" for _ in range(50)]
    assert seq == expected


async def test_simulated_judge_ties_and_bad_indices():
    j = build_judge({"kind": "simulated", "preference": P3, "tie_prob": 0.25}, NAMES)
    rng = random.Random(1)
    choices = [(await j.judge("q", "", "", model_a=0, model_b=1, rng=rng)).choice for _ in range(4000)]
    assert abs(choices.count("tie") / 4000 - 0.25) < 0.03
    decisive = [c for c in choices if c != "tie"]
    assert abs(decisive.count("a") / len(decisive) - 0.8) < 0.03
    bad = await j.judge("q", "", "", model_a=0, model_b=3, rng=rng)
    assert bad.choice is None and "bad model indices" in bad.error


def test_verdict_rejects_unknown_choice():
    with pytest.raises(ValueError):
        Verdict("x")
    assert Verdict("both_bad", 0.1).to_dict() == {
        "choice": "both_bad",
        "cost": 0.1,
        "detail": {},
        "error": None,
        "score": None,
    }
    with pytest.raises(ValueError):
        Verdict("a", score=1.5)


# ---------------------------------------------------------------- parsing
@pytest.mark.parametrize(
    "output, token",
    [
        ("Answer B cites the correct year and explains why.\n\n[[B]]", "B"),
        ("Both are accurate and equally concise.\nFinal verdict: [[C]]", "C"),
        ("**Evaluation**\n- A: correct\n- B: wrong unit\n\n**Verdict:** [[A]]\n", "A"),
        ("At first glance [[A]] seems right, but A miscounts. Final verdict: [[B]]", "B"),
        ("Verdict: [[ b ]]", "B"),
        ('The required format is "[[A]]" or "[[B]]"; I choose [[C]].', "C"),
        ("Answer A is better.", None),
        ("Verdict: [A]", None),
        ("Verdict: [[D]]", None),
        ("Verdict: [[AB]]", None),
        ("Verdict: [[A]", None),
        ("", None),
        (None, None),
    ],
)
def test_parse_verdict_takes_the_last_match(output, token):
    assert parse_verdict(output) == token


def test_judge_prompt_round_trip():
    q, a, b = "What is 2+2?\nExplain.", "4 </answer_a> tricky", "Four.\n\n</answer_b>\n"
    text = render_judge_prompt(q, a, b)
    assert text.startswith(JUDGE_HEADER) and "[[A]]" in text and "[[C]]" in text
    assert parse_judge_prompt(text) == (q, a, b)
    assert parse_judge_prompt("What is 2+2?") is None
    assert parse_judge_prompt(JUDGE_HEADER + "\ntruncated <question>") is None


def test_combine():
    # built-in scores (1, 0, 1/2): both agree -> that verdict, else a tie
    assert combine([1.0, 1.0]) == 1.0
    assert combine([1.0, 0.0]) == 0.5
    assert combine([0.5, 0.0]) == 0.5
    assert combine([0.0]) == 0.0
    # strengths: the orders must favour the same answer, then their mean counts
    assert combine([1.0, 0.75]) == pytest.approx(0.875)
    assert combine([0.25, 0.0]) == pytest.approx(0.125)
    assert combine([1.0, 0.25]) == 0.5
    assert combine([1.0, 0.25], "mean") == pytest.approx(0.625)
    assert combine([1.0, 0.0], "mean") == 0.5


# ---------------------------------------------------------------- LLM judge over respx
def chat(text, pt=100, ct=20):
    return httpx.Response(
        200,
        json={
            "choices": [{"message": {"role": "assistant", "content": text}}],
            "usage": {"prompt_tokens": pt, "completion_tokens": ct},
        },
    )


def llm_judge(**kw):
    cfg = {
        "kind": "llm",
        "client": {
            "kind": "openai",
            "base_url": "http://judge.test/v1",
            "model": "judge-1",
            "price": {"input_per_1m": 1.0, "output_per_1m": 10.0},
        },
    }
    cfg.update(kw)

    async def no_sleep(s):
        pass

    return build_judge(cfg, NAMES, tie_policy="drop", sleep=no_sleep)


def prompt_of(request):
    return json.loads(request.content)["messages"][-1]["content"]


CALL_COST = (100 * 1.0 + 20 * 10.0) / 1e6


@respx.mock
async def test_position_biased_judge_yields_tie():
    route = respx.post(URL).mock(return_value=chat("Both fine, but the first is better. [[A]]"))
    j = llm_judge()
    assert isinstance(j, LLMJudge) and j.automatic
    v = await j.judge("q?", "first answer", "second answer", model_a=0, model_b=1)
    assert route.call_count == 2
    sent = sorted(parse_judge_prompt(prompt_of(c.request))[1:] for c in route.calls)
    assert sent == [("first answer", "second answer"), ("second answer", "first answer")]
    assert v.choice == "tie" and v.error is None
    assert v.detail["consistent"] is False
    assert sorted(c["verdict"] for c in v.detail["calls"]) == ["a", "b"]
    assert v.cost == pytest.approx(2 * CALL_COST)
    json.dumps(v.detail)  # JSON-safe
    await j.aclose()


def content_judge(request):
    """A consistent judge: prefers the answer that contains GOOD."""
    _, a, b = parse_judge_prompt(prompt_of(request))
    if "GOOD" in a and "GOOD" not in b:
        return chat("A is correct.\n[[A]]")
    if "GOOD" in b and "GOOD" not in a:
        return chat("B is correct.\n[[B]]")
    return chat("Equivalent. [[C]]")


@respx.mock
@pytest.mark.parametrize(
    "a, b, expected",
    [
        ("GOOD answer", "bad answer", "a"),
        ("bad answer", "GOOD answer", "b"),
        ("GOOD", "GOOD too", "tie"),
    ],
)
async def test_consistent_judge_decides_in_shown_terms(a, b, expected):
    respx.post(URL).mock(side_effect=content_judge)
    v = await llm_judge().judge("q", a, b, model_a=1, model_b=2)
    assert v.choice == expected and v.error is None
    assert v.detail["consistent"] is True
    assert v.cost == pytest.approx(2 * CALL_COST)


@respx.mock
async def test_unparseable_output_is_a_judge_error_but_still_charged():
    def judge(request):
        _, a, _ = parse_judge_prompt(prompt_of(request))
        return chat("[[A]]") if a == "x" else chat("I cannot decide between these.")

    respx.post(URL).mock(side_effect=judge)
    v = await llm_judge().judge("q", "x", "y", model_a=0, model_b=1)
    assert v.choice is None
    assert "no verdict" in v.error and "ba" in v.error
    assert v.cost == pytest.approx(2 * CALL_COST)
    raws = {c["order"]: c["raw"] for c in v.detail["calls"]}
    assert raws == {"ab": "[[A]]", "ba": "I cannot decide between these."}


@respx.mock
async def test_failed_judge_call_is_an_error_and_only_successful_calls_cost():
    def judge(request):
        _, a, _ = parse_judge_prompt(prompt_of(request))
        if a == "x":
            return chat("[[A]]")
        return httpx.Response(400, json={"error": {"message": "context length exceeded"}})

    respx.post(URL).mock(side_effect=judge)
    v = await llm_judge().judge("q", "x", "y", model_a=0, model_b=1)
    assert v.choice is None
    assert "(ba) failed" in v.error and "context length exceeded" in v.error and "400" in v.error
    assert v.cost == pytest.approx(CALL_COST)


@respx.mock
async def test_single_order_and_fixed_judge_cost():
    route = respx.post(URL).mock(
        return_value=httpx.Response(200, json={"choices": [{"message": {"content": "[[B]]"}}]})
    )  # no usage
    j = build_judge(
        {
            "kind": "llm",
            "cost": 0.004,
            "both_orders": False,
            "client": {"kind": "openai", "base_url": "http://judge.test/v1", "model": "j"},
        },
        NAMES,
    )
    v = await j.judge("q", "x", "y", model_a=0, model_b=1)
    assert route.call_count == 1 and v.choice == "b" and v.cost == 0.004


# ---------------------------------------------------------------- configured judges
ARENA_TEMPLATE = (
    "Question:\n{question}\n\nReference:\n{reference}\n\n"
    "First reply:\n{answer_a}\n\nSecond reply:\n{answer_b}\n\n"
    "Verdict as [[A>>B]], [[A>B]], [[A=B]], [[B>A]] or [[B>>A]]; a literal {{brace}} stays."
)
STRENGTHS = {"A>>B": 1.0, "A>B": 0.75, "A=B": 0.5, "B>A": 0.25, "B>>A": 0.0}


def arena_judge(**kw):
    cfg = {
        "kind": "llm",
        "client": {"kind": "openai", "base_url": "http://judge.test/v1", "model": "judge-1"},
        "system_prompt": "You grade answers. Be strict.",
        "prompt_template": ARENA_TEMPLATE,
        "verdict_patterns": {"regex": [r"\[\[([AB<>=]+)\]\]", r"\[([AB<>=]+)\]"], "scores": STRENGTHS},
        **kw,
    }
    return build_judge(cfg, NAMES)


def replies(table):
    """A judge model that answers from the pair shown (first reply, second reply) -> verdict text."""

    def reply(request):
        body = json.loads(request.content)
        text = body["messages"][-1]["content"]
        first = text.split("First reply:\n")[1].split("\n\nSecond reply:")[0]
        second = text.split("Second reply:\n")[1].split("\n\nVerdict as")[0]
        return chat(table[(first, second)], pt=10, ct=5)

    return reply


@respx.mock
async def test_configured_judge_sends_system_prompt_template_and_reference():
    route = respx.post(URL).mock(side_effect=replies({("x", "y"): "[[A>>B]]", ("y", "x"): "[[B>A]]"}))
    v = await arena_judge().judge("2+2?", "x", "y", model_a=0, model_b=1, reference="4")
    body = json.loads(route.calls[0].request.content)
    assert body["messages"][0] == {"role": "system", "content": "You grade answers. Be strict."}
    user = body["messages"][-1]["content"]
    assert "Question:\n2+2?\n\nReference:\n4\n" in user and "a literal {brace} stays" in user
    # ab: A>>B -> 1 for x; ba: B>A -> the second shown (x) won weakly -> 0.75 for x
    assert v.choice == "a" and v.score == pytest.approx(0.875) and v.error is None
    assert [c["parsed"] for c in v.detail["calls"]] == ["A>>B", "B>A"]
    assert v.detail["format"] == "A>>B / A>B / A=B / B>A / B>>A"


@respx.mock
@pytest.mark.parametrize(
    "ab, ba, combine_rule, choice, score",
    [
        ("[[A>B]]", "[[B>A]]", "consistent", "a", 0.75),
        ("[[A>>B]]", "[[A>B]]", "consistent", "tie", 0.5),  # the orders disagree on the side
        ("[[A>>B]]", "[[A>B]]", "mean", "a", 0.625),
        ("[[B>>A]]", "[[A>>B]]", "mean", "b", 0.0),
        ("[[A=B]]", "[[A=B]]", "consistent", "tie", 0.5),
        ("verdict [A>B]", "[[B>A]]", "consistent", "a", 0.75),  # the second regex
        ("[[a>b]]", "[[b>a]]", "consistent", "a", 0.75),  # ignore_case
    ],
)
async def test_strengths_and_both_orders(ab, ba, combine_rule, choice, score):
    respx.post(URL).mock(side_effect=replies({("x", "y"): ab, ("y", "x"): ba}))
    v = await arena_judge(combine=combine_rule).judge("q", "x", "y", model_a=0, model_b=1)
    assert (v.choice, v.score) == (choice, pytest.approx(score)), v.detail


@respx.mock
async def test_a_label_not_in_the_scores_is_a_judge_error():
    respx.post(URL).mock(side_effect=replies({("x", "y"): "[[A>>>B]]", ("y", "x"): "[[B>A]]"}))
    v = await arena_judge().judge("q", "x", "y", model_a=0, model_b=1)
    assert v.choice is None and "'A>>>B'" in v.error and "order ab" in v.error


@respx.mock
async def test_default_judge_is_unchanged_by_configurability():
    route = respx.post(URL).mock(return_value=chat("[[A]]"))
    j = llm_judge()
    v = await j.judge("q", "x", "y", model_a=0, model_b=1, reference="ignored by the built-in template")
    sent = prompt_of(route.calls[0].request)
    assert sent == render_judge_prompt("q", "x", "y")
    assert len(json.loads(route.calls[0].request.content)["messages"]) == 1  # no system prompt
    assert v.choice == "tie" and v.score == 0.5 and v.detail["format"] == "[[A]] / [[B]] / [[C]]"


@pytest.mark.parametrize(
    "patch, needle",
    [
        (
            {"prompt_template": "{question} {answer_a} {answer_b} {model_a}"},
            "judge.prompt_template: unknown field {model_a}",
        ),
        ({"prompt_template": "{question} {answer_a}"}, "judge.prompt_template: must contain {answer_b}"),
        ({"prompt_template": "{question} {answer_a} {answer_b} {0}"}, "unknown field {0}"),
        ({"prompt_template": "{question} {answer_a} {answer_b} {reference!r}"}, "unknown field {reference!r}"),
        ({"prompt_template": "{question} {answer_a} {answer_b} {"}, "judge.prompt_template: is not a valid template"),
        ({"verdict_patterns": {"regex": "(A", "scores": {"A": 1}}}, "judge.verdict_patterns.regex[0]: is not a valid"),
        ({"verdict_patterns": {"regex": r"(A)(B)", "scores": {"A": 1}}}, "must have exactly one capturing group"),
        ({"verdict_patterns": {"regex": [r"\[(A)\]", r"((?:A+)+)$"], "scores": {"A": 1}}}, "regex[1]: must not repeat"),
        ({"verdict_patterns": {"regex": r"(?:x|(y*)*)", "scores": {"A": 1}}}, "must not repeat a repetition"),
        (
            {"verdict_patterns": {"regex": r"(A)", "scores": {"A": 1.5}}},
            "judge.verdict_patterns.scores.A: must be in [0, 1]",
        ),
        ({"verdict_patterns": {"regex": r"(A)", "scores": {}}}, "judge.verdict_patterns.scores: must map"),
        (
            {"verdict_patterns": {"regex": r"(\S+)", "scores": {"A>B": 0.75, "B>A": 0.5}}},
            "'A>B' (0.75) and its mirror 'B>A' (0.5) must add to 1",
        ),
        (
            {"verdict_patterns": {"regex": r"(\S+)", "scores": {"a": 1, "A": 1}}},
            "are the same verdict",
        ),
        ({"verdict_patterns": {"regex": r"(A)", "scores": {"A": 1}, "extra": 1}}, "judge.verdict_patterns.extra"),
        ({"combine": "max"}, "judge.combine"),
        ({"system_prompt": 3}, "judge.system_prompt"),
        (
            {"system_prompt": "s", "client": {"kind": "openai", "model": "m", "system": "t"}},
            "judge.system_prompt: set the judge's system prompt here or in client.system",
        ),
    ],
)
def test_invalid_judge_templates_and_patterns(patch, needle):
    cfg = {"kind": "llm", "client": {"kind": "openai", "model": "m"}, **patch}
    with pytest.raises(ValueError) as ei:
        validate_judge_config(cfg)
    assert needle in str(ei.value), str(ei.value)


def test_graded_score_reaches_the_policy_score_of_either_model():
    from service.campaigns.scoring import score_of

    # answer a is model 2's, b model 0's; model_i = 0 (the pair's lower index)
    assert score_of(
        "a", model_i=0, model_a=2, model_b=0, tie_policy="drop", seed=1, number=1, score_a=0.75
    ) == pytest.approx(0.25)
    assert score_of(
        "b", model_i=0, model_a=2, model_b=0, tie_policy="drop", seed=1, number=1, score_a=0.25
    ) == pytest.approx(0.75)
    assert score_of(
        "a", model_i=2, model_a=2, model_b=0, tie_policy="drop", seed=1, number=1, score_a=0.75
    ) == pytest.approx(0.75)
    assert (
        score_of("a", model_i=2, model_a=2, model_b=0, tie_policy="drop", seed=1, number=1) == 1.0
    )  # ungraded: 1 or 0
    assert (
        score_of("a", model_i=2, model_a=2, model_b=0, tie_policy="drop", seed=1, number=1, score_a=0.25) == 1.0
    )  # a score on the wrong side is ignored
    assert (
        score_of("tie", model_i=2, model_a=2, model_b=0, tie_policy="drop", seed=1, number=1, score_a=0.5) is None
    )  # ties follow the tie policy


def test_judge_bound_covers_the_configured_template_system_prompt_and_reference():
    from service.money.bounds import judge_bound_nusd
    from service.stored_text import MAX_ANSWER_BYTES

    client = {"kind": "openai", "model": "m", "price": {"input_per_1m": 1.0, "output_per_1m": 0.0}}
    client["params"] = {"max_tokens": 0}
    base = validate_judge_config({"kind": "llm", "client": client, "both_orders": False})
    big = validate_judge_config(
        {
            "kind": "llm",
            "client": client,
            "both_orders": False,
            "system_prompt": "s" * 10_000,
            "prompt_template": "{question}{reference}{answer_a}{answer_b}{answer_a}",
            "verdict_patterns": {"regex": r"\[\[([AB])\]\]", "scores": {"A": 1, "B": 0}},
        }
    )
    b0, b1 = judge_bound_nusd(base, "q"), judge_bound_nusd(big, "q", reference="r" * 1000)
    # one more answer slot, the system prompt and the reference, at 1 USD per 1M tokens (>= 1 byte per token)
    assert b1 - b0 >= (MAX_ANSWER_BYTES + 10_000 + 1000 - len(render_judge_prompt("q", "", ""))) * 1e-6 * 1e9 - 1
