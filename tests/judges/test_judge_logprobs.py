"""A judge's verdict scored by its probabilities of the verdict labels (``verdict_probabilities``):
the fake provider's OpenAI shape in-process, Gemini's ``logprobsResult`` through respx, and the fall
back to the bare label when a provider returns no log probabilities (Anthropic)."""

from __future__ import annotations

import json
import math

import httpx
import pytest
import respx

from service.clients import build_client as build_client_from_model
from service.clients import parse_client_config
from service.fake_provider import create_fake_provider_app
from service.judging import build_judge as build_judge_from_model
from service.judging import judge_json, parse_judge_config

BASE = "http://fake.test/v1"


async def no_sleep(s):
    pass


def build_judge(cfg, names, **kw):
    return build_judge_from_model(parse_judge_config(cfg), names, **kw)


def llm(client: dict, **extra) -> dict:
    return {"kind": "llm", "client": client, "orders": "both", **extra}


async def _answers(http) -> tuple[str, str]:
    q = "Explain recursion."
    out = []
    for model in ("strong-q3", "weak-q1"):
        c = build_client_from_model(
            parse_client_config({"kind": "openai", "base_url": BASE, "model": model}),
            model_name=model,
            fixed_cost=0.0,
            http=http,
            sleep=no_sleep,
        )
        out.append((await c.complete(q)).text)
    return out[0], out[1]


async def test_fake_judge_returns_label_probabilities_and_the_score_is_their_weighted_mean():
    app = create_fake_provider_app()
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app)) as http:
        strong, weak = await _answers(http)
        client = {"kind": "openai", "base_url": BASE, "model": "judge"}
        judge = build_judge(llm(client, verdict_probabilities=True), ["strong", "weak"], http=http)
        v = await judge.judge("Explain recursion.", strong, weak, model_a=0, model_b=1)
        # qualities 3 and 1: P(A) = 0.9 * 3/4, P(B) = 0.9 * 1/4, P(C) = 0.1 in the order shown
        expect = 0.675 * 1.0 + 0.1 * 0.5
        assert v.choice == "a" and v.score == pytest.approx(expect)
        for call in v.detail["calls"]:
            assert call["score_from"] == "logprobs"
            assert sum(call["label_probabilities"].values()) == pytest.approx(1.0)
        assert v.detail["calls"][0]["label_probabilities"] == pytest.approx(
            {"A": 0.675, "B": 0.225, "C": 0.1}, abs=1e-6
        )
        # without the option: the bare label, and the request asks for no log probabilities
        plain = build_judge(llm(client), ["strong", "weak"], http=http)
        v = await plain.judge("Explain recursion.", strong, weak, model_a=0, model_b=1)
        assert v.score == 1.0 and "score_from" not in v.detail["calls"][0]
    # the provider answered log probabilities only when asked
    r = await _raw(app, {"logprobs": True, "top_logprobs": 2})
    label = [t for t in r["choices"][0]["logprobs"]["content"] if t["token"] == "C"][0]
    assert len(label["top_logprobs"]) == 2  # at most top_logprobs alternatives
    assert (await _raw(app, {}))["choices"][0]["logprobs"] is None


async def _raw(app, extra: dict) -> dict:
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app)) as http:
        body = {"model": "judge", "messages": [{"role": "user", "content": "no markers"}], **extra}
        r = await http.post(f"{BASE}/chat/completions", json=body)
        assert r.status_code == 200
        return r.json()


GEMINI = "https://generativelanguage.googleapis.com/v1beta"


def _gemini_reply(label: str, probs: dict[str, float]) -> dict:
    """A generateContent response with ``logprobsResult`` (chosenCandidates and topCandidates per step)."""
    steps = [("Verdict: ", {"Verdict: ": 1.0}), ("[[", {"[[": 1.0}), (label, probs), ("]]", {"]]": 1.0})]
    return {
        "candidates": [
            {
                "content": {"role": "model", "parts": [{"text": "".join(t for t, _ in steps)}]},
                "finishReason": "STOP",
                "logprobsResult": {
                    "topCandidates": [
                        {
                            "candidates": [
                                {"token": t, "tokenId": n, "logProbability": math.log(p)}
                                for n, (t, p) in enumerate(sorted(alts.items(), key=lambda kv: -kv[1]))
                            ]
                        }
                        for _, alts in steps
                    ],
                    "chosenCandidates": [
                        {"token": t, "tokenId": 0, "logProbability": math.log(alts[t])} for t, alts in steps
                    ],
                },
            }
        ],
        "usageMetadata": {"promptTokenCount": 10, "candidatesTokenCount": 4},
    }


@respx.mock
async def test_gemini_logprobs_result_scores_the_verdict_and_the_request_asks_for_it(monkeypatch):
    monkeypatch.setenv("GEMINI_TEST_KEY", "g-key")
    route = respx.post(f"{GEMINI}/models/gemini-2.5-flash:generateContent")
    # " A" and "A" spell the same label and add up; "Z" is no label
    route.side_effect = [
        httpx.Response(200, json=_gemini_reply("A", {"A": 0.5, " A": 0.1, "B": 0.3, "C": 0.05, "Z": 0.05})),
        httpx.Response(200, json=_gemini_reply("B", {"B": 0.6, "A": 0.3, "C": 0.1})),
    ]
    client = {"kind": "gemini", "model": "gemini-2.5-flash", "api_key_env": "GEMINI_TEST_KEY"}
    judge = build_judge(llm(client, verdict_probabilities=True), ["x", "y"])
    v = await judge.judge("q", "first answer", "second answer", model_a=0, model_b=1)
    sent = json.loads(route.calls[0].request.content)
    assert sent["generationConfig"] == {"responseLogprobs": True, "logprobs": 5}
    ab, ba = v.detail["calls"]
    assert ab["label_probabilities"] == pytest.approx({"A": 0.6 / 0.95, "B": 0.3 / 0.95, "C": 0.05 / 0.95}, abs=1e-6)
    s_ab = (0.6 + 0.025) / 0.95
    s_ba = 1.0 - (0.3 + 0.05)  # the swapped order's score of the answer shown second
    assert ab["score_a"] == pytest.approx(s_ab) and ba["score_a"] == pytest.approx(s_ba)
    assert v.score == pytest.approx((s_ab + s_ba) / 2) and v.choice == "a"
    await judge.aclose()


@respx.mock
async def test_no_logprobs_from_the_provider_falls_back_to_the_label(monkeypatch):
    monkeypatch.setenv("ANTHROPIC_TEST_KEY", "a-key")
    route = respx.post("https://api.anthropic.com/v1/messages").mock(
        return_value=httpx.Response(
            200,
            json={
                "content": [{"type": "text", "text": "B is better. [[B]]"}],
                "usage": {"input_tokens": 5, "output_tokens": 3},
            },
        )
    )
    client = {"kind": "anthropic", "model": "claude-sonnet-4-5", "api_key_env": "ANTHROPIC_TEST_KEY"}
    judge = build_judge(llm(client, verdict_probabilities=True), ["x", "y"])
    v = await judge.judge("q", "first answer", "second answer", model_a=0, model_b=1)
    sent = json.loads(route.calls[0].request.content)
    assert "logprobs" not in sent and "top_logprobs" not in sent  # Anthropic has nothing to ask
    assert v.detail["calls"][0]["score_from"] == "label" and v.detail["calls"][0]["score_a"] == 0.0
    await judge.aclose()


def test_the_option_is_stored_only_when_set_and_refuses_a_non_boolean():
    client = {"kind": "openai", "base_url": BASE, "model": "judge"}
    assert "verdict_probabilities" not in judge_json(parse_judge_config(llm(client)))
    hybrid = {"kind": "hybrid", "llm": llm(client, verdict_probabilities=True), "human_rate": "active"}
    assert judge_json(parse_judge_config(hybrid))["llm"]["verdict_probabilities"] is True
    with pytest.raises(ValueError, match="verdict_probabilities"):
        parse_judge_config(llm(client, verdict_probabilities="yes"))
