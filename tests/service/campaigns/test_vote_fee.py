"""A human judge's fee per vote: c_J of the policy, a judge charge per recorded vote on
every path (hot path drivers and general transactions), and part of the budget reservation."""

from __future__ import annotations

import pytest
from service_helpers import all_duels, campaign_body

from service import cycle
from service.campaigns import draws

FEE = 0.05
COSTS = [0.004, 0.001, 0.002]
CHOICES = ["a", "b", "tie", "a", "both_bad", "b", "a"]


async def fee_session(api, name: str) -> tuple[dict, list[dict]]:
    body = campaign_body(name=name, costs=COSTS, judge={"kind": "human", "fee_per_vote": FEE}, budget=50.0, delta=1e-6)
    r = await api.post("/v1/campaigns", json=body)
    assert r.status_code == 201, r.text
    cid = r.json()["id"]
    assert r.json()["judge"] == {"kind": "human", "fee_per_vote": FEE}
    assert r.json()["judge_cost"] == pytest.approx(FEE)  # c_J of the allocation
    token = (await api.post(f"/v1/campaigns/{cid}/annotators", json={"label": "paid"})).json()["token"]
    ann = {"Authorization": f"Bearer {token}"}
    for n, choice in enumerate(CHOICES):
        duel = (await api.post(f"/v1/campaigns/{cid}/duels", headers=ann)).json()
        r = await api.post(f"/v1/duels/{duel['id']}/vote", json={"choice": choice}, headers=ann)
        assert r.status_code == 200, r.text
        if n == 2:  # a duplicate vote is refused and not paid
            assert (
                await api.post(f"/v1/duels/{duel['id']}/vote", json={"choice": "b"}, headers=ann)
            ).status_code == 409
    unvoted = (await api.post(f"/v1/campaigns/{cid}/duels", headers=ann)).json()  # in flight: no fee yet
    view = (await api.get(f"/v1/campaigns/{cid}")).json()
    duels = await all_duels(api, cid)
    assert (await api.get(f"/v1/campaigns/{cid}/replay")).json()["ok"] is True
    for d in duels:
        fees = [ch["amount"] for ch in d["charges"] if ch["kind"] == "judge"]
        assert fees == ([] if d["id"] == unvoted["id"] else [pytest.approx(FEE)]), d
        models = COSTS[d["model_a"]] + COSTS[d["model_b"]]
        assert d["cost"] == pytest.approx(models + (0 if d["id"] == unvoted["id"] else FEE))
    assert view["judge_spend"] == pytest.approx(FEE * len(CHOICES))
    assert view["spend"] == pytest.approx(sum(ch["amount"] for d in duels for ch in d["charges"]))
    return view, duels


async def test_vote_fee_is_charged_alike_on_both_drivers(api, monkeypatch):
    """PostgreSQL: the asyncpg driver and the SQLAlchemy one charge the same fees (SQLite has
    the SQLAlchemy driver only: one session, checked by fee_session)."""

    monkeypatch.setattr(draws, "new_draw_key", lambda: "5e" * 32)  # both campaigns draw the same prompts and sides
    used = {"vote": 0}
    for name in ("record_vote", "record_vote_async"):
        fn = getattr(cycle, name)
        if name.endswith("async"):

            async def counted(*a, _fn=fn, **kw):
                out = await _fn(*a, **kw)
                used["vote"] += 1
                return out
        else:

            def counted(*a, _fn=fn, **kw):
                out = _fn(*a, **kw)
                used["vote"] += 1
                return out

        monkeypatch.setattr(cycle, name, counted)
    hot_view, hot_duels = await fee_session(api, "hot")
    assert used["vote"] == len(CHOICES)  # every vote took one driver's entry (and charged the fee there)
    if not api.app.state.campaigns.cycle._on_loop:
        return
    monkeypatch.setattr(cycle, "ENABLED", False)  # the SQLAlchemy driver in worker threads
    slow_view, slow_duels = await fee_session(api, "general")
    assert used["vote"] == 2 * len(CHOICES)
    keys = ("spend", "judge_spend", "duels", "duels_counted", "counts", "wins", "evidence")
    assert {k: hot_view[k] for k in keys} == {k: slow_view[k] for k in keys}
    assert [sorted((c["kind"], c["amount"]) for c in d["charges"]) for d in hot_duels] == [
        sorted((c["kind"], c["amount"]) for c in d["charges"]) for d in slow_duels
    ]


@pytest.mark.parametrize("hot", [True, False])
async def test_the_budget_reserves_the_vote_fee(api, monkeypatch, hot):
    monkeypatch.setattr(cycle, "ENABLED", hot)
    # one duel costs at most 0.004 + 0.002 for the models; with the fee it needs 0.056
    body = campaign_body(name="tight", costs=COSTS, judge={"kind": "human", "fee_per_vote": FEE}, budget=0.03)
    cid = (await api.post("/v1/campaigns", json=body)).json()["id"]
    r = await api.post(f"/v1/campaigns/{cid}/duels")
    assert r.status_code == 409, r.text
    view = (await api.get(f"/v1/campaigns/{cid}")).json()
    assert view["spend"] == 0 and view["duels_created"] == 0


@pytest.mark.parametrize("fee", [-1, "0.1", float("inf"), 2e6])
async def test_bad_fees_are_422(api, fee):
    body = campaign_body(judge={"kind": "human", "fee_per_vote": fee})
    r = await api.post("/v1/campaigns", json=body) if fee != float("inf") else None
    if r is None:
        import json

        raw = json.dumps(body).replace('"fee_per_vote": Infinity', '"fee_per_vote": 1e999')
        r = await api.post("/v1/campaigns", content=raw, headers={"Content-Type": "application/json"})
    assert r.status_code == 422, r.text
    assert any("fee_per_vote" in e["loc"] or "fee_per_vote" in e["msg"] for e in r.json()["detail"]), r.text


@pytest.mark.parametrize("hot", [True, False])
async def test_a_fee_that_spends_the_budget_ends_the_campaign(api, monkeypatch, hot):
    monkeypatch.setattr(cycle, "ENABLED", hot)
    # every model costs 0.001: one duel is 0.002 for the answers plus the fee, exactly the budget
    body = campaign_body(
        name="one paid vote", costs=[0.001] * 3, judge={"kind": "human", "fee_per_vote": FEE}, budget=0.002 + FEE
    )
    cid = (await api.post("/v1/campaigns", json=body)).json()["id"]
    duel = (await api.post(f"/v1/campaigns/{cid}/duels")).json()
    assert (await api.post(f"/v1/duels/{duel['id']}/vote", json={"choice": "a"})).status_code == 200
    view = (await api.get(f"/v1/campaigns/{cid}")).json()
    assert view["status"] == "budget_exhausted" and view["spend"] == pytest.approx(0.002 + FEE)
    assert view["judge_spend"] == pytest.approx(FEE)
