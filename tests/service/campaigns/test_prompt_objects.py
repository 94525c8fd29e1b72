"""Prompt objects in the campaign body: ids and categories on the duel log, multi-turn conversations, bad input."""

from __future__ import annotations

import json

import httpx
import respx
from service_helpers import all_duels, campaign_body, simulated_judge

from service.campaigns import draws

PROMPTS = [
    "plain string prompt",
    {"id": "q-a", "prompt": "What is 2+2?", "category": "math", "reference": "4"},
    {"id": "q-b", "turns": [{"content": "Name a colour."}, "Now a darker one."], "category": "chat"},
]


async def test_ids_and_categories_on_duels(api, monkeypatch):
    # a fixed draw key: twelve duels draw all three prompts every run (a fresh key missed one in about 40)
    monkeypatch.setattr(draws, "new_draw_key", lambda: "4d" * 32)
    r = await api.post("/v1/campaigns", json=campaign_body(judge=simulated_judge(), prompts=PROMPTS, seed=3))
    assert r.status_code == 201, r.text
    cid = r.json()["id"]
    assert r.json()["n_prompts"] == 3
    for _ in range(12):
        assert (await api.post(f"/v1/campaigns/{cid}/duels")).status_code == 201
    duels = await all_duels(api, cid)
    seen = {(d["question_id"], d["category"], d["prompt"]) for d in duels}
    assert ("p1", None, "plain string prompt") in seen  # no id: named by position
    assert ("q-a", "math", "What is 2+2?") in seen
    multi = [d for d in duels if d["question_id"] == "q-b"]
    assert multi and "Name a colour." in multi[0]["prompt"] and "Now a darker one." in multi[0]["prompt"]
    one = (await api.get(f"/v1/duels/{duels[0]['id']}")).json()
    assert one["question_id"] == duels[0]["question_id"]


async def test_multi_turn_sent_as_user_messages(api):
    bodies = []

    def answer(request):
        body = json.loads(request.content)
        bodies.append(body)
        return httpx.Response(200, json={"choices": [{"message": {"content": "ok"}}], "usage": {}})

    client = {"kind": "openai", "base_url": "http://provider.test/v1", "model": "x"}
    body = campaign_body(
        costs=(1.0, 1.0),
        clients=[client, client],
        judge={"kind": "human"},
        prompts=[{"id": "conv", "turns": ["first turn", "second turn"]}],
    )
    with respx.mock(assert_all_called=False) as mock:
        mock.post("http://provider.test/v1/chat/completions").mock(side_effect=answer)
        r = await api.post("/v1/campaigns", json=body)
        assert r.status_code == 201, r.text
        d = await api.post(f"/v1/campaigns/{r.json()['id']}/duels")
        assert d.status_code == 201, d.text
    assert len(bodies) == 2
    for b in bodies:
        assert b["messages"] == [
            {"role": "user", "content": "first turn"},
            {"role": "user", "content": "second turn"},
        ]


async def test_bad_prompt_objects(api):
    bad = [
        [{"id": "x", "prompt": "a", "turns": ["b"]}],
        [{"id": "x"}],
        [{"id": "x", "prompt": "a"}, {"id": "x", "prompt": "b"}],
        [{"prompt": "a", "colour": "red"}],
        [{"turns": []}],
        [{"prompt": ""}],
    ]
    for prompts in bad:
        r = await api.post("/v1/campaigns", json=campaign_body(prompts=prompts))
        assert r.status_code == 422, (prompts, r.text)


async def test_reference_reaches_a_judge_that_takes_it(api, monkeypatch):
    from judges.simulated import SimulatedJudge

    seen = []
    original = SimulatedJudge.judge

    async def judge_with_reference(self, prompt, answer_a, answer_b, *, model_a, model_b, rng=None, reference=None):
        seen.append((prompt, reference))
        return await original(self, prompt, answer_a, answer_b, model_a=model_a, model_b=model_b, rng=rng)

    monkeypatch.setattr(SimulatedJudge, "judge", judge_with_reference)
    # the prompts are drawn with the campaign's secret key: a fixed key makes both prompts come up in
    # eight duels every run (a fresh key drew one prompt only, once in 128 runs)
    monkeypatch.setattr(draws, "new_draw_key", lambda: "4d" * 32)
    prompts = [{"id": "r", "prompt": "What is 2+2?", "reference": "4"}, {"id": "n", "prompt": "No reference here."}]
    r = await api.post("/v1/campaigns", json=campaign_body(judge=simulated_judge(), prompts=prompts, seed=1))
    cid = r.json()["id"]
    for _ in range(8):
        assert (await api.post(f"/v1/campaigns/{cid}/duels")).status_code == 201
    assert ("What is 2+2?", "4") in seen and ("No reference here.", None) in seen
    assert all((p == "What is 2+2?") == (ref == "4") for p, ref in seen)
