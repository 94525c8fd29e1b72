"""The policy state is written every few records (service/campaigns/policy_log.py).

Between two checkpoints the policy at the row's ``event_seq`` is the stored state plus the
calls logged in the duels; a campaign run with a checkpoint every ceil(L^2 / 64) records
must store, select, show and replay exactly what the same campaign run with one at every
record stores, on both drivers, when the process's cached policy is lost (another worker,
a restart) and when it is behind (another worker recorded meanwhile).
"""

from __future__ import annotations

import pytest
from service_helpers import all_duels, campaign_body, simulated_judge
from sqlalchemy import select

from service.campaigns import draws, policy_log
from service.campaigns.policy_cache import restore_policy
from service.models import Campaign

L = 20  # a checkpoint every ceil(400 / 64) = 7 policy calls
DUELS = 40
VOLATILE = {"id", "name", "created_at", "updated_at", "ended_at", "campaign_id", "duel_id"}


def test_the_interval_grows_as_the_square_of_the_models():
    assert [policy_log.checkpoint_every(n) for n in (2, 8, 9, 20, 128, 256)] == [1, 1, 2, 7, 256, 1024]
    assert policy_log.checkpoint_due(20, 7, 0) and not policy_log.checkpoint_due(20, 6, 0)


def _strip(item: dict) -> dict:
    return {k: v for k, v in item.items() if k not in VOLATILE and not k.endswith("_at") and k != "charges"}


def _row(api, cid: int):
    with api.app.state.db.read() as s:
        return s.execute(select(Campaign.event_seq, Campaign.state_seq).where(Campaign.id == cid)).one()


async def _session(api, name: str, sampling: str, disturb: bool) -> tuple[dict, list[dict], list[tuple[int, int]]]:
    """Plan and judge ``DUELS`` duels (every fifth held in flight for a while; the lower model index
    wins); with ``disturb``, this process's cached policy is dropped and set back to an old one."""
    judge = None  # with replacement: votes, some held in flight; without: the simulated judge
    if sampling == "without_replacement":
        judge = simulated_judge([[0.5 + 0.02 * (j - i) for j in range(L)] for i in range(L)])
    costs = [1.0 + n / 10 for n in range(L)]
    body = campaign_body(name=name, costs=costs, judge=judge, delta=1e-6, prompt_sampling=sampling)
    body["prompts"] = [f"question {n}" for n in range(12)]
    r = await api.post("/v1/campaigns", json=body)
    assert r.status_code == 201, r.text
    cid = r.json()["id"]
    cache = api.app.state.campaigns.cycle.policies
    seqs, held, old = [], [], None
    for n in range(DUELS):
        r = await api.post(f"/v1/campaigns/{cid}/duels")
        assert r.status_code == 201, r.text
        d = r.json()
        if d["status"] != "pending":  # judged by the simulated judge
            assert d["status"] == "judged", d
            held = []
        choice = "a" if d["model_a"] < d["model_b"] else "b"
        if d["status"] != "pending":
            pass
        elif n % 5 == 2:
            held.append((d["id"], choice))
        else:
            r = await api.post(f"/v1/duels/{d['id']}/vote", json={"choice": choice})
            assert r.status_code == 200, r.text
        if len(held) == 3 or n == DUELS - 1:
            for duel_id, ch in held:
                assert (await api.post(f"/v1/duels/{duel_id}/vote", json={"choice": ch})).status_code == 200
            held = []
        if disturb and n == 9:  # a copy of the policy as it is now, put back later: "behind"
            seq, policy = cache.take_latest(cid)
            cache.put(cid, seq, policy)
            old = (seq, restore_policy(policy.to_state()))
        if disturb and n in (14, 27):  # another worker took over: nothing cached here
            cache.take_latest(cid)
        if disturb and n == 20:
            cache.put(cid, *old)
        seqs.append(tuple(_row(api, cid)))
    view = (await api.get(f"/v1/campaigns/{cid}", params={"pairs": "true"})).json()
    rep = (await api.get(f"/v1/campaigns/{cid}/replay")).json()
    assert rep["ok"] is True, rep["diff"]
    return view, await all_duels(api, cid), seqs


@pytest.mark.parametrize("sampling", ["with_replacement", "without_replacement"])
async def test_checkpoints_store_and_select_what_a_write_per_record_does(api, monkeypatch, sampling):
    monkeypatch.setattr(draws, "new_draw_key", lambda: "5e" * 32)  # both campaigns draw the same prompts
    every_record = await _session_with(monkeypatch, api, "every record", sampling, divisor=10**9)
    checkpoints = await _session_with(monkeypatch, api, "checkpoints", sampling, divisor=64, disturb=True)
    (view_e, duels_e, seqs_e), (view_c, duels_c, seqs_c) = every_record, checkpoints
    # written with every record (behind only by the selections since), or every 7 policy calls
    assert max(event - state for event, state in seqs_e) <= 4
    gaps = [event - state for event, state in seqs_c]
    assert max(gaps) >= policy_log.checkpoint_every(L) - 1 and min(gaps) == 0, gaps
    assert [e for e, _ in seqs_c] == [e for e, _ in seqs_e]
    assert [_strip(d) for d in duels_c] == [_strip(d) for d in duels_e]  # the same pairs, scores, sequence numbers
    assert _strip(view_c) == _strip(view_e)  # counts, evidence, leader: the live figures, not the checkpoint's
    assert view_c["t"] == view_c["duels_counted"] == sum(map(sum, view_c["counts"])) // 2 > 0


async def _session_with(monkeypatch, api, name, sampling, divisor, disturb=False):
    monkeypatch.setattr(policy_log, "CHECKPOINT_DIVISOR", divisor)
    return await _session(api, name, sampling, disturb)


async def test_a_campaign_of_256_models_runs_end_to_end(api):
    """The largest campaign the API takes: duels planned and judged by the simulated judge, the
    view's live figures, the policy exactly replayed from its log (checkpoint at its start only)."""
    n = 256
    P = [[0.5 + (0.3 if i < j else -0.3) * (i == 0 or j == 0) for j in range(n)] for i in range(n)]
    body = campaign_body(name="arena", costs=[1.0] * n, judge=simulated_judge(P), delta=0.05, max_duels=40)
    r = await api.post("/v1/campaigns", json=body)
    assert r.status_code == 201, r.text
    cid = r.json()["id"]
    for _ in range(40):
        r = await api.post(f"/v1/campaigns/{cid}/duels")
        assert r.status_code == 201 and r.json()["status"] == "judged", r.text
    view = (await api.get(f"/v1/campaigns/{cid}", params={"pairs": "true"})).json()
    assert view["status"] == "stopped" and view["duels"] == view["t"] == 40
    assert len(view["counts"]) == n and sum(map(sum, view["counts"])) == 2 * 40
    assert _row(api, cid).state_seq == 80  # the ending wrote the state once
    rep = (await api.get(f"/v1/campaigns/{cid}/replay")).json()
    assert rep["ok"] is True and rep["events"] == 80, rep
    big = campaign_body(name="too many", costs=[1.0] * (n + 1))
    r = await api.post("/v1/campaigns", json=big)
    assert r.status_code == 422 and "256" in r.text, r.text
