"""Replay reports each kind of difference between a campaign's row and its log.

A replay that always said ``ok`` would pass every consistency check; here the log and the
row are altered behind the service's back, one field per kind of check, and the replay
must name each difference (on SQLite and PostgreSQL, through the API).
"""

from __future__ import annotations

from service_helpers import campaign_body
from sqlalchemy import select, update


async def _campaign_with_duels(api, n: int) -> int:
    r = await api.post("/v1/campaigns", json=campaign_body(name="replay detects"))
    assert r.status_code == 201, r.text
    cid = r.json()["id"]
    for k in range(n):
        r = await api.post(f"/v1/campaigns/{cid}/duels")
        assert r.status_code == 201, r.text
        r = await api.post(f"/v1/duels/{r.json()['id']}/vote", json={"choice": "a" if k % 2 else "b"})
        assert r.status_code in (200, 201), r.text
    return cid


async def test_an_untouched_log_replays_ok_and_each_alteration_is_named(api):
    from service.models import Campaign, Duel

    cid = await _campaign_with_duels(api, 8)
    rep = (await api.get(f"/v1/campaigns/{cid}/replay")).json()
    assert rep["ok"] is True and rep["diff"] == [], rep

    db = api.app.state.db
    with db.write() as s:
        duels = s.execute(select(Duel).where(Duel.campaign_id == cid).order_by(Duel.select_seq)).scalars().all()
        # the selection is altered first: later selections may then differ too (the replayed
        # policy diverges), earlier ones may not
        first, second, third = duels[1], duels[5], duels[2]
        s.execute(update(Campaign).where(Campaign.id == cid).values(duels_judged=Campaign.duels_judged + 1))
        s.execute(update(Duel).where(Duel.id == first.id).values(cost_nusd=Duel.cost_nusd + 7))
        s.execute(update(Duel).where(Duel.id == second.id).values(score=1.0 - second.score))
        other = next(k for k in range(3) if k not in (third.model_i, third.model_j))
        i, j = sorted((other, third.model_j))  # another valid pair than the one the policy chose
        s.execute(update(Duel).where(Duel.id == third.id).values(model_i=i, model_j=j))
    rep = (await api.get(f"/v1/campaigns/{cid}/replay")).json()
    diff = "\n".join(rep["diff"])
    assert rep["ok"] is False
    assert "judged: log gives 8, campaign row says 9" in diff  # the counters
    assert f"duel {first.id}: cost" in diff and "!= its charges" in diff  # the ledger
    selections = [line for line in rep["diff"] if "replayed selection" in line]
    assert selections and selections[0].startswith(f"duel {third.id}: replayed selection")  # the selections
    assert "policy_state" in diff  # the recorded scores


async def test_a_log_the_policy_refuses_is_a_named_difference_not_a_crash(api):
    from service.models import Duel

    cid = await _campaign_with_duels(api, 4)
    db = api.app.state.db
    with db.write() as s:
        duel = s.execute(select(Duel).where(Duel.campaign_id == cid).order_by(Duel.select_seq)).scalars().first()
        s.execute(update(Duel).where(Duel.id == duel.id).values(model_j=duel.model_i))  # a model against itself
    r = await api.get(f"/v1/campaigns/{cid}/replay")
    assert r.status_code == 200, r.text
    rep = r.json()
    assert rep["ok"] is False
    assert any(line.startswith(f"duel {duel.id}: the policy refuses the logged outcome") for line in rep["diff"]), rep
