"""The audit trail (service/campaigns/audit_files.py, answer_import.py, service/answer_files.py), in
process on SQLite and PostgreSQL: the export's model_answer/<model>.jsonl (arena-hard's layout)
and judgments.jsonl (every judge call), and a team's model_answer files imported into the answer
store so that a campaign on the same questions pays nothing for them."""

from __future__ import annotations

import json
import time

from service_helpers import all_duels, campaign_body

from service.answer_files import read_answers
from service.campaigns.audit_files import answer_file_names

BASE = "http://fake.test/v1"
QUESTIONS = [f"Question number {n}: explain item {n}." for n in range(6)]


def _body(tag: str, name: str) -> dict:
    body = campaign_body(
        name=name,
        costs=(0.003, 0.001, 0.002),
        clients=[{"kind": "openai", "base_url": BASE, "model": f"{tag}-{n}"} for n in ("big-q4", "small-q1", "mid-q2")],
        judge={"kind": "llm", "client": {"kind": "openai", "base_url": BASE, "model": "fake-judge"}, "cost": 0.0005},
        max_duels=12,
    )
    body["prompts"] = [{"id": f"q{n}", "prompt": q} for n, q in enumerate(QUESTIONS)]
    body["prompt_sampling"] = "with_replacement"
    return body


async def _duels(api, cid: int, n: int) -> None:
    for _ in range(n):
        r = await api.post(f"/v1/campaigns/{cid}/duels")
        if r.status_code == 409:
            return
        assert r.status_code == 201, r.text


def _arena_hard_folder(tmp_path, model_id: str, answers: dict[str, str]):
    folder = tmp_path / "model_answer"
    folder.mkdir(exist_ok=True)
    lines = [
        {
            "question_id": qid,
            "answer_id": f"x{n}",
            "model_id": model_id,
            "choices": [{"index": 0, "turns": [{"content": text, "token_len": 3}]}],
            "tstamp": 1.0,
        }
        for n, (qid, text) in enumerate(answers.items())
    ]
    (folder / f"{model_id}.jsonl").write_text("".join(json.dumps(x) + "\n" for x in lines))
    return folder


async def test_imported_answers_are_used_at_zero_cost_and_exported_with_every_judge_call(api, fake, tmp_path):
    tag = f"audit{time.monotonic_ns()}"
    cid = (await api.post("/v1/campaigns", json=_body(tag, "audit"))).json()["id"]
    mine = {f"q{n}": f"Our own stored answer {n} for the big model." for n in range(6)}
    folder = _arena_hard_folder(tmp_path, "m0", {**mine, "q-unknown": "not a question of this campaign"})
    (answers,) = read_answers(folder).items()
    body = {"model": answers[0], "answers": [{"question_id": q, "text": t} for q, t in answers[1]]}
    r = await api.post(f"/v1/campaigns/{cid}/answers", json=body)
    assert r.status_code == 200, r.text
    assert r.json() == {
        "model": "m0",
        "imported": 6,
        "already_stored": 0,
        "duplicates": 0,
        "unknown": 1,
        "unknown_question_ids": ["q-unknown"],
    }
    again = (await api.post(f"/v1/campaigns/{cid}/answers", json=body)).json()
    assert again["imported"] == 0 and again["already_stored"] == 6  # a stored answer is never replaced
    await _duels(api, cid, 12)
    duels = await all_duels(api, cid)
    with_big = [d for d in duels if 0 in (d["model_a"], d["model_b"]) and d["status"] == "judged"]
    assert with_big, "no duel with the imported model"
    others_paid = 0.0
    for d in with_big:
        full = (await api.get(f"/v1/duels/{d['id']}", params={"charges": "true"})).json()
        text = full["answer_a"] if full["model_a"] == 0 else full["answer_b"]
        assert text in mine.values()  # the imported answer, not a call
        paid = [c for c in full["charges"] if c["model_index"] == 0 and c["amount"] > 0]
        assert paid == [], paid
        others_paid += sum(c["amount"] for c in full["charges"] if c["model_index"] in (1, 2))
    assert others_paid > 0  # the other models' answers were bought
    files = (await api.get(f"/v1/campaigns/{cid}/export")).json()["files"]
    # model_answer/<model>.jsonl in arena-hard's layout, read back by the importer
    assert files["model_answer/m0.jsonl"]
    (tmp_path / "out" / "model_answer").mkdir(parents=True)
    for name, text in files.items():
        if name.startswith("model_answer/"):
            (tmp_path / "out" / name).write_text(text)
    back = read_answers(tmp_path / "out" / "model_answer")
    assert set(back["m0"]) <= set(mine.items())
    # judgments.jsonl: one line per judge call, both orders of every judged duel
    judged = [d for d in duels if d["status"] == "judged"]
    calls = [json.loads(line) for line in files["judgments.jsonl"].splitlines()]
    assert len(calls) == 2 * len(judged)
    assert {c["order"] for c in calls} == {"ab", "ba"}
    for c in calls:
        assert c["reply"] and c["label"] and c["question_id"].startswith("q")
        assert (c["first"], c["second"]) == (
            (c["model_a"], c["model_b"]) if c["order"] == "ab" else (c["model_b"], c["model_a"])
        )


async def test_import_refusals_are_422_and_store_nothing(api):
    cid = (await api.post("/v1/campaigns", json=campaign_body("sim import"))).json()["id"]
    one = {"answers": [{"question_id": "p1", "text": "x"}]}
    r = await api.post(f"/v1/campaigns/{cid}/answers", json={"model": "m0", **one})
    assert r.status_code == 422 and "does not use the answer store" in r.text  # a simulated model
    r = await api.post(f"/v1/campaigns/{cid}/answers", json={"model": "nobody", **one})
    assert r.status_code == 422 and "is not in campaign" in r.text
    r = await api.post("/v1/campaigns/999999999/answers", json={"model": "m0", **one})
    assert r.status_code == 404
    r = await api.post(
        f"/v1/campaigns/{cid}/answers", json={"model": "m0", "answers": [{"question_id": "p1", "text": "\x00"}]}
    )
    assert r.status_code == 422


def test_export_file_names_are_safe_and_distinct():
    names = answer_file_names(["openai/gpt-4o", "openai_gpt-4o", "..", "Claude 3.5"])
    assert names == {
        "openai/gpt-4o": "model_answer/openai_gpt-4o.jsonl",
        "openai_gpt-4o": "model_answer/openai_gpt-4o-2.jsonl",
        "..": "model_answer/model.jsonl",
        "Claude 3.5": "model_answer/Claude_3.5.jsonl",
    }
