"""battles.jsonl carries each prompt's real number of user turns (FastChat's ``turn``), on SQLite and PostgreSQL."""

from __future__ import annotations

import asyncio
import json
import time

from service_helpers import campaign_body, simulated_judge

PROMPTS = [
    "One plain turn.",
    {"id": "two", "category": "chat", "turns": ["Name a prime.", {"content": "Now a larger one."}]},
    {"id": "three", "turns": ["a", "b", {"content": "c"}]},
    {"id": "one-object", "prompt": "A single prompt as an object."},
]
TURNS = {"p1": 1, "two": 2, "three": 3, "one-object": 1}


async def test_battles_jsonl_turn_is_the_prompts_user_turns(api):
    body = campaign_body(judge=simulated_judge(), prompts=PROMPTS, max_duels=40, seed=11)
    cid = (await api.post("/v1/campaigns", json=body)).json()["id"]
    assert (await api.post(f"/v1/campaigns/{cid}/run", json={"concurrency": 2})).status_code == 202
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        c = (await api.get(f"/v1/campaigns/{cid}")).json()
        if c["status"] != "running" and not c["run"]["active"]:
            break
        await asyncio.sleep(0.05)
    files = (await api.get(f"/v1/campaigns/{cid}/export")).json()["files"]
    battles = [json.loads(line) for line in files["battles.jsonl"].splitlines()]
    assert len(battles) >= 20, len(battles)
    for b in battles:
        assert b["turn"] == TURNS[b["question_id"]], b
    assert {b["turn"] for b in battles} >= {1, 2}  # 40 duels over 4 prompts meet the multi-turn ones
