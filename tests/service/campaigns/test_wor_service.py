"""Sampling prompts without replacement, in process through the service's transactions and
REST API (SQLite and PostgreSQL; docs/reuse.md, "In the service").

Simulated models answer instantly, so a planned duel is pending at once and the tests
decide in which order verdicts arrive: a verdict for a later position of a pair is held
(judged and charged, not yet counted) until the earlier positions are counted; a failed
duel's position is used again by the pair's next duel; replay stays exact. The runs
against the fake provider are in tests/e2e/test_wor_e2e.py.
"""

from __future__ import annotations

import asyncio
import time

import httpx
import pytest
from service_helpers import all_duels, campaign_body, run_to_end, simulated_judge

from service.campaigns import Conflict, PolicyCache
from service.campaigns.judge_charges import Judgement
from service.campaigns.sampling import prompt_permutation
from service.cli.campaign_text import summary, verdict_line
from service.cycle import record_verdict as record
from service.fake_provider import create_fake_provider_app
from service.models import Campaign, Duel

BASE = "http://fake.test/v1"
# m0 clearly beats m1 (2 models: one pair, so every duel is on pair (0, 1))
TWO = [[0.5, 0.9], [0.1, 0.5]]


def _wor_body(n_prompts: int, P=TWO, **extra) -> dict:
    body = campaign_body(
        name="wor",
        costs=tuple(1.0 for _ in P),
        judge=simulated_judge(P),
        prompt_sampling="without_replacement",
        delta=0.05,
        **extra,
    )
    body["prompts"] = [f"question {n}" for n in range(n_prompts)]
    return body


async def _create(api, body: dict) -> dict:
    r = await api.post("/v1/campaigns", json=body)
    assert r.status_code == 201, r.text
    return r.json()


def _perm(svc, cid: int) -> list[int]:
    with svc.db.read() as s:
        c = s.get(Campaign, cid)
        return prompt_permutation(c.draw_key, c.n_prompts)


def _duel(svc, duel_id: int) -> Duel:
    with svc.db.read() as s:
        d = s.get(Duel, duel_id)
        s.expunge(d)
        return d


async def test_a_wor_campaign_shows_its_setting_and_population(api):
    view = await _create(api, _wor_body(5))
    assert view["prompt_sampling"] == "without_replacement" and view["tie_policy"] == "half"
    assert view["population"] == 5 and view["exact"] == []
    page = await api.get(f"/campaigns/{view['id']}")
    assert 'id="prompt-sampling">without replacement' in page.text
    # the permutation is never shown: not in the view, the duel log or the export
    perm = _perm(api.app.state.campaigns.cycle, view["id"])
    assert "perm" not in str(view)
    export = (await api.get(f"/v1/campaigns/{view['id']}/export")).json()
    cert = export["files"]["certificate.json"]
    assert '"prompt_sampling": "without_replacement"' in cert and '"population": 5' in cert
    assert str(perm) not in str(export)


async def test_out_of_order_verdicts_are_held_and_counted_in_position_order(api):
    svc = api.app.state.campaigns.cycle
    view = await _create(api, _wor_body(8))
    cid = view["id"]
    perm = _perm(svc, cid)
    plans = [await asyncio.to_thread(svc.plan_duel, cid, None) for _ in range(3)]
    duels = [_duel(svc, p.duel_id) for p in plans]
    assert [d.position for d in duels] == [0, 1, 2]
    assert [d.prompt_index for d in duels] == perm[:3]
    assert all(d.status == "pending" for d in duels)
    # the verdicts arrive in the order 2, 1, 0: both later ones wait for position 0
    out2 = await asyncio.to_thread(record, svc, plans[2].duel_id, Judgement("a", "judge:simulated"))
    out1 = await asyncio.to_thread(record, svc, plans[1].duel_id, Judgement("tie", "judge:simulated"))
    assert out2.status == "judged" and out1.status == "judged"
    held = [_duel(svc, p.duel_id) for p in plans[1:]]
    assert all(d.status == "judged" and d.record_seq is None and not d.counted for d in held)
    mid = (await api.get(f"/v1/campaigns/{cid}")).json()
    assert mid["duels"] == 2 and mid["duels_counted"] == 0 and mid["t"] == 0
    # held duels count as in flight for the policy: the next duel takes position 3
    p3 = await asyncio.to_thread(svc.plan_duel, cid, None)
    assert _duel(svc, p3.duel_id).position == 3
    # a restart forgets every in-memory policy: the held outcomes are in their duel rows
    svc.policies = PolicyCache()
    await asyncio.to_thread(record, svc, plans[0].duel_id, Judgement("b", "judge:simulated"))
    recorded = [_duel(svc, p.duel_id) for p in plans]
    seqs = [d.record_seq for d in recorded]
    assert None not in seqs and seqs == sorted(seqs)  # positions 0, 1, 2 entered the policy in this order
    after = (await api.get(f"/v1/campaigns/{cid}")).json()
    assert after["duels"] == 3 and after["duels_counted"] == 3 and after["t"] == 3
    log = {d["id"]: d for d in await all_duels(api, cid)}
    assert [log[p.duel_id]["position"] for p in plans] == [0, 1, 2]
    assert [log[p.duel_id]["record_seq"] for p in plans] == seqs
    rep = (await api.get(f"/v1/campaigns/{cid}/replay")).json()
    assert rep["ok"] is True, rep


async def test_a_failed_duels_position_is_used_again(api):
    svc = api.app.state.campaigns.cycle
    view = await _create(api, _wor_body(8))
    cid = view["id"]
    perm = _perm(svc, cid)
    a = await asyncio.to_thread(svc.plan_duel, cid, None)
    b = await asyncio.to_thread(svc.plan_duel, cid, None)
    assert (_duel(svc, a.duel_id).position, _duel(svc, b.duel_id).position) == (0, 1)
    # position 1 is judged first (held), then position 0's judge fails: the duel fails, its position is free
    await asyncio.to_thread(record, svc, b.duel_id, Judgement("a", "judge:simulated"))
    failed = await asyncio.to_thread(
        record, svc, a.duel_id, Judgement(None, "judge:simulated", judge_error="judge down")
    )
    assert failed.status == "failed"
    assert _duel(svc, b.duel_id).record_seq is None  # still held: position 0 has no outcome yet
    c = await asyncio.to_thread(svc.plan_duel, cid, None)
    dc = _duel(svc, c.duel_id)
    assert dc.position == 0 and dc.prompt_index == perm[0]  # the lowest free position, its prompt again
    await asyncio.to_thread(record, svc, c.duel_id, Judgement("a", "judge:simulated"))
    assert _duel(svc, c.duel_id).record_seq < _duel(svc, b.duel_id).record_seq
    view = (await api.get(f"/v1/campaigns/{cid}")).json()
    assert view["duels_counted"] == 2 and view["duels_failed"] == 1
    assert (await api.get(f"/v1/campaigns/{cid}/replay")).json()["ok"] is True


async def test_no_pair_available_is_a_retry_later_conflict(api):
    svc = api.app.state.campaigns.cycle
    view = await _create(api, _wor_body(2))
    cid = view["id"]
    await asyncio.to_thread(svc.plan_duel, cid, None)
    await asyncio.to_thread(svc.plan_duel, cid, None)
    # the only pair has both prompts in flight
    with pytest.raises(Conflict) as exc:
        await asyncio.to_thread(svc.plan_duel, cid, None)
    assert exc.value.retry_later
    r = await api.post(f"/v1/campaigns/{cid}/duels")
    assert r.status_code == 409, r.text
    assert "retry" in r.json()["detail"]


async def test_a_simulated_wor_run_certifies_with_each_pairs_prompts_in_one_shared_order(api):
    P = [
        [0.5, 0.8, 0.85, 0.9],
        [0.2, 0.5, 0.6, 0.7],
        [0.15, 0.4, 0.5, 0.6],
        [0.1, 0.3, 0.4, 0.5],
    ]
    view = await _create(api, _wor_body(40, P))
    cid = view["id"]
    end = await run_to_end(api, cid, concurrency=3)
    assert end["status"] == "certified", end
    assert end["winner"] == "m0"
    perm = _perm(api.app.state.campaigns.cycle, cid)
    duels = await all_duels(api, cid)
    by_pair: dict[tuple[int, int], list[dict]] = {}
    for d in duels:
        if d["record_seq"] is not None:
            pair = tuple(sorted((d["model_a"], d["model_b"])))
            by_pair.setdefault(pair, []).append(d)
    assert by_pair
    for pair, rows in by_pair.items():
        rows.sort(key=lambda d: d["record_seq"])
        assert [d["position"] for d in rows] == list(range(len(rows))), pair  # contiguous, in order
        prompts = [d["prompt"] for d in rows]
        assert prompts == [f"question {perm[q]}" for q in range(len(rows))], pair
        assert len(set(prompts)) == len(prompts)
    assert (await api.get(f"/v1/campaigns/{cid}/replay")).json()["ok"] is True


async def test_an_exact_tie_on_the_prompt_set_ends_undecidable(api, fake):
    # the fake provider's strict judge says "tie" for two models of equal quality, in both orders:
    # m0 and m1 tie on every prompt, the prompt-set preference is exactly 1/2
    tag = f"t{time.monotonic_ns()}"
    body = campaign_body(
        name="exact tie",
        costs=(0.001, 0.001),
        clients=[{"kind": "openai", "base_url": BASE, "model": f"{tag}-{n}-q2"} for n in ("a", "b")],
        judge={"kind": "llm", "client": {"kind": "openai", "base_url": BASE, "model": "fake-judge"}, "cost": 0.0},
    )
    body["prompts"] = ["first tie question", "second tie question"]
    view = await _create(api, body)
    assert view["prompt_sampling"] == "without_replacement" and view["tie_policy"] == "half"  # auto
    cid = view["id"]
    for _ in range(2):
        r = await api.post(f"/v1/campaigns/{cid}/duels")
        assert r.status_code == 201, r.text
        assert r.json()["choice"] == "tie"
    r = await api.post(f"/v1/campaigns/{cid}/duels")
    assert r.status_code == 409  # ended
    end = (await api.get(f"/v1/campaigns/{cid}")).json()
    assert end["status"] == "undecidable", end
    assert end["winner"] is None and "no model can be certified on this prompt set" in end["end_reason"]
    assert end["population"] == 2 and end["exact"] == [[0, 1, 0.5]]
    assert end["duels"] == 2 and end["duels_counted"] == 2  # each prompt judged exactly once
    assert (await api.get(f"/v1/campaigns/{cid}/replay")).json()["ok"] is True
    page = (await api.get(f"/campaigns/{cid}")).text
    assert 'id="undecidable"' in page and "m0 vs m1: 0.500" in page
    cert = (await api.get(f"/v1/campaigns/{cid}/export")).json()["files"]["certificate.json"]
    assert '"status": "undecidable"' in cert and '"preference": 0.5' in cert and "undecidable:" in cert
    # campaign show / watch
    text = summary(end)
    assert "undecidable: No model can be certified the winner on these 2 prompts. m0 and m1 tie at the top" in text
    assert "sampling   prompts without replacement" in text and "exact      m0 vs m1: 0.5 on all 2 prompts" in text
    assert verdict_line(end).startswith("undecidable")


class _SlowFirstCall(httpx.AsyncBaseTransport):
    """The fake provider in process; the first model call whose body holds ``target`` waits ``delay`` seconds."""

    def __init__(self, app, delay: float):
        self._inner = httpx.ASGITransport(app=app)
        self._delay = delay
        self.target: str | None = None
        self.delayed = 0

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        if self.target is not None and not self.delayed and self.target in request.content.decode():
            self.delayed += 1
            await asyncio.sleep(self._delay)
        return await self._inner.handle_async_request(request)


async def test_a_run_whose_first_call_is_slow_counts_each_pair_in_position_order(api):
    # two models (one pair), two duels at once: the first duel's answer is late, so position 1 is
    # judged before position 0; it is held, then counted after position 0
    fake = create_fake_provider_app()
    svc = api.app.state.campaigns.cycle
    transport = _SlowFirstCall(fake, 4.0)  # far beyond a loaded machine's scheduling delays
    svc.deps.calls._http = httpx.AsyncClient(transport=transport)
    try:
        tag = f"s{time.monotonic_ns()}"
        body = campaign_body(
            name="slow first call",
            costs=(0.001, 0.001),
            clients=[{"kind": "openai", "base_url": BASE, "model": f"{tag}-{n}"} for n in ("weak-q1", "strong-q4")],
            judge={"kind": "llm", "client": {"kind": "openai", "base_url": BASE, "model": "fake-judge"}, "cost": 0.0},
        )
        body["prompts"] = [f"slow question {n}." for n in range(20)]  # none a substring of another
        view = await _create(api, body)
        assert view["prompt_sampling"] == "without_replacement"
        transport.target = body["prompts"][_perm(svc, view["id"])[0]]  # position 0's prompt
        end = await run_to_end(api, view["id"], concurrency=2)
        assert transport.delayed == 1
    finally:
        await svc.deps.calls._http.aclose()
        svc.deps.calls._http = None
    assert end["status"] == "certified" and end["winner"] == "m1", end
    duels = await all_duels(api, view["id"])
    by_position = {d["position"]: d for d in duels if d["status"] == "judged"}
    first, second = by_position[0], by_position[1]
    assert second["judged_at"] < first["judged_at"]  # position 1 was judged first ...
    assert first["record_seq"] < second["record_seq"]  # ... and counted after position 0
    counted = sorted((d for d in duels if d["record_seq"] is not None), key=lambda d: d["record_seq"])
    assert [d["position"] for d in counted] == list(range(len(counted)))
    assert (await api.get(f"/v1/campaigns/{view['id']}/replay")).json()["ok"] is True
