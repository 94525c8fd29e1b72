"""Campaigns stored before `betting` became dctas-pc's default replay and continue with the mixture test."""

from __future__ import annotations

import pytest
from service_helpers import campaign_body

import algorithms.certificates as certificates


async def _run_duels(api, cid: int, n: int) -> None:
    for k in range(n):
        r = await api.post(f"/v1/campaigns/{cid}/duels")
        assert r.status_code == 201, r.text
        d = r.json()
        r = await api.post(f"/v1/duels/{d['id']}/vote", json={"choice": "a" if k % 3 else "tie"})
        assert r.status_code in (200, 201), r.text


async def _state(api, cid: int) -> dict:
    from sqlalchemy import select

    from service.models import PolicyCheckpoint

    db = api.app.state.db
    with db.read() as s:
        return s.execute(select(PolicyCheckpoint.policy_state).where(PolicyCheckpoint.campaign_id == cid)).scalar_one()


async def test_a_mixture_era_campaign_replays_and_continues_with_the_mixture_test(api, monkeypatch):
    with monkeypatch.context() as m:
        m.setitem(certificates.PC_DEFAULTS, "threshold", "mixture")  # the default when it was created
        r = await api.post("/v1/campaigns", json=campaign_body(name="old default"))
        assert r.status_code == 201, r.text
        cid = r.json()["id"]
        await _run_duels(api, cid, 6)
    state = await _state(api, cid)
    assert state["algorithm"] == "dctas-pc" and "threshold" not in state["params"]
    rep = (await api.get(f"/v1/campaigns/{cid}/replay")).json()
    assert rep["ok"] is True, rep
    await _run_duels(api, cid, 4)  # continues under today's code: still the mixture test
    state = await _state(api, cid)
    assert "threshold" not in state["params"] and "hist" not in state
    assert (await api.get(f"/v1/campaigns/{cid}/replay")).json()["ok"] is True


async def test_a_new_campaign_uses_the_betting_test_and_replays(api):
    r = await api.post("/v1/campaigns", json=campaign_body(name="new default"))
    cid = r.json()["id"]
    await _run_duels(api, cid, 6)
    state = await _state(api, cid)
    assert state["params"]["threshold"] == "betting" and len(state["hist"]) == 3
    assert sum(state["hist"][0]) == 2 * state["N"][0]
    assert (await api.get(f"/v1/campaigns/{cid}/replay")).json()["ok"] is True


@pytest.fixture(autouse=True)
def _default_is_betting():
    assert certificates.PC_DEFAULTS["threshold"] == "betting"
