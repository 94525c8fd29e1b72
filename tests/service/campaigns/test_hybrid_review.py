"""Hostile review of the hybrid judge: the draw order across an end and a continue, the budget."""

from __future__ import annotations

import pytest
from service_helpers import HYBRID_FEE, admin_duels_until_selected, hybrid_campaign, ledger_rows


async def end_on_a_fault_with_a_waiting_selected_duel(api, monkeypatch):
    """A hybrid campaign that is paused on a provider fault while a selected duel waits for a human and a
    later judge-only duel of its pair waits behind it: (id, annotators, selected duel, later duel)."""
    cid, anns = await hybrid_campaign(api, monkeypatch, max_duels=200)
    sel = await admin_duels_until_selected(api, cid)
    pair = {sel["model_a"], sel["model_b"]}
    later = None
    for _ in range(80):
        full = (await api.get(f"/v1/duels/{(await api.post(f'/v1/campaigns/{cid}/duels')).json()['id']}")).json()
        if {full["model_a"], full["model_b"]} == pair and not full["judge"]["hybrid"]["selected"]:
            later = full
            break
    assert later is not None and later["record_seq"] is None  # held behind sel
    svc = api.app.state.campaigns.cycle  # a provider fault pauses it (ends it, continuable with a PATCH)
    with api.app.state.db.write() as s:
        from service.models import utcnow

        c = svc.deps.views.lock_existing(s, cid)
        svc.deps.endings.pause_for_fault(s, c, "reported cost above its bound", utcnow())
    view = (await api.get(f"/v1/campaigns/{cid}")).json()
    assert view["status"] == "stopped" and view["end_limit"] == "provider", view
    assert (await api.get(f"/v1/duels/{sel['id']}")).json()["status"] == "cancelled"
    return cid, anns, sel, later


async def test_a_continued_campaign_gives_its_cancelled_selected_duels_back_to_the_pool(api, monkeypatch):
    # a selected duel cancelled by an end must not be dropped while the judge-only duels behind it
    # are recorded after a continue: the dropped duels would be exactly those the coin sent to a
    # human, and the per-pair estimate would lean toward the judge
    cid, (p, _), sel, later = await end_on_a_fault_with_a_waiting_selected_duel(api, monkeypatch)
    r = await api.patch(f"/v1/campaigns/{cid}", json={"budget": 200.0})
    assert r.status_code == 200, r.text
    assert (await api.get(f"/v1/campaigns/{cid}")).json()["status"] == "running"
    back = (await api.get(f"/v1/duels/{sel['id']}")).json()
    assert back["status"] == "pending" and back["judge"]["hybrid"] == sel["judge"]["hybrid"]
    assert (await api.post(f"/v1/campaigns/{cid}/duels")).status_code in (200, 201)  # a flush
    assert (await api.get(f"/v1/duels/{later['id']}")).json()["record_seq"] is None  # still behind sel
    shown = (await api.post(f"/v1/campaigns/{cid}/duels", headers=p)).json()
    assert shown["id"] == sel["id"]
    assert (await api.post(f"/v1/duels/{sel['id']}/vote", json={"choice": "a"}, headers=p)).status_code == 200
    a = (await api.get(f"/v1/duels/{sel['id']}")).json()
    b = (await api.get(f"/v1/duels/{later['id']}")).json()
    assert a["record_seq"] is not None and b["record_seq"] is not None and a["record_seq"] < b["record_seq"]
    assert (await api.get(f"/v1/campaigns/{cid}/replay")).json()["ok"] is True


async def test_a_lapsed_lease_still_reserves_the_fee_against_a_lower_budget(api, monkeypatch):
    # a selected duel whose annotator let the lease lapse is not expired (it goes back to the
    # pool, and its annotator may still vote): a PATCH must not lower the budget below its fee
    from sqlalchemy import update

    from service.models import Campaign, Duel, utcnow

    cid, (p, _) = await hybrid_campaign(api, monkeypatch, rate=1.0)
    sel = await admin_duels_until_selected(api, cid)
    assert (await api.post(f"/v1/campaigns/{cid}/duels", headers=p)).json()["id"] == sel["id"]
    with api.app.state.db.write() as s:
        s.execute(update(Duel).where(Duel.id == sel["id"]).values(expires_at=utcnow()))
        spend = s.get(Campaign, cid).spend_nusd
    low = (spend + round(HYBRID_FEE * 1e9) // 2) / 1e9  # covers the spend, not the waiting fee
    r = await api.patch(f"/v1/campaigns/{cid}", json={"budget": low})
    assert r.status_code == 422 and "reserved" in r.text, r.text
    judged = (await api.get(f"/v1/duels/{sel['id']}")).json()
    assert judged["status"] == "pending"
    # the late vote is still taken and charged within the budget
    assert (await api.post(f"/v1/duels/{sel['id']}/vote", json={"choice": "a"}, headers=p)).status_code == 200
    with api.app.state.db.read() as s:
        c = s.get(Campaign, cid)
        assert c.budget_nusd is None or c.spend_nusd <= c.budget_nusd


async def test_a_second_automatic_verdict_on_a_selected_duel_is_refused(api, monkeypatch):
    # a selected duel stays pending; a repeated verdict (a retried call) must not redraw its pi,
    # overwrite the verdict the coin was drawn on, or take the duel from its annotator
    from service import cycle
    from service.campaigns.judge_charges import Judgement
    from service.campaigns.types import Conflict

    cid, (p, _) = await hybrid_campaign(api, monkeypatch, rate=1.0)
    sel = await admin_duels_until_selected(api, cid)
    assert (await api.post(f"/v1/campaigns/{cid}/duels", headers=p)).json()["id"] == sel["id"]
    other = "b" if sel["judge"]["hybrid"]["judge_choice"] == "a" else "a"
    with pytest.raises(Conflict, match="already has its automatic verdict"):
        cycle.record_verdict(api.app.state.campaigns.cycle, sel["id"], Judgement(other, "judge:hybrid"))
    after = (await api.get(f"/v1/duels/{sel['id']}")).json()
    assert after["judge"]["hybrid"] == sel["judge"]["hybrid"]
    assert (await api.post(f"/v1/duels/{sel['id']}/vote", json={"choice": "a"}, headers=p)).status_code == 200


async def test_a_human_vote_on_a_selected_duel_is_counted_in_the_view(api, monkeypatch):
    # a vote on a selected duel is charged the fee and enters the estimate, so the view's human
    # votes (each charged fee_per_vote) must count it; the admin's own vote is refused (not blind)
    cid, (p, _) = await hybrid_campaign(api, monkeypatch, rate=1.0)
    sel = await admin_duels_until_selected(api, cid)
    assert (await api.post(f"/v1/duels/{sel['id']}/vote", json={"choice": "a"})).status_code == 403
    assert (await api.post(f"/v1/campaigns/{cid}/duels", headers=p)).json()["id"] == sel["id"]
    assert (await api.post(f"/v1/duels/{sel['id']}/vote", json={"choice": "a"}, headers=p)).status_code == 200
    rows = ledger_rows(api.app.state.db, cid)
    assert [int(r.duel_id) for r in rows if (r.detail or {}).get("human_fee")] == [sel["id"]]
    view = (await api.get(f"/v1/campaigns/{cid}")).json()
    assert view["hybrid"]["human_votes"] == 1 and view["hybrid"]["human_votes_waiting"] == 0
    assert view["t"] == 1
    assert (await api.get(f"/v1/campaigns/{cid}", headers=p)).json()["votes_counted"] == 1


def test_the_below_chance_warning_needs_an_interval_below_one_half():
    # 4 agreeing of 10 is what a judge at chance gives on 38% of samples: no warning; the whole
    # Wilson interval below 1/2 is
    from service.campaigns.hybrid_view import agreement_warning, wilson

    assert agreement_warning(4, 10) is None and wilson(4, 10)[1] > 0.5
    assert agreement_warning(0, 0) is None and agreement_warning(0, 9) is None  # no votes, too few
    w = agreement_warning(1, 10)
    assert w is not None and "1 of 10" in w and "below chance" in w
    assert agreement_warning(30, 100) is not None and agreement_warning(45, 100) is None


def test_the_humans_alone_estimate_is_never_zero_for_a_pair_with_duels():
    # two agreeing human votes (or all ties) have a sample variance of 0: read as the pair's
    # variance it said humans alone would need no votes at all
    from algorithms.hybrid import N_, NH, NSTAT, SY, SY2
    from service.campaigns.hybrid_view import human_variance, humans_alone_estimate

    assert human_variance([1.0, 1.0]) > 0 and human_variance([0.5, 0.5, 0.5]) > 0
    assert human_variance([]) == 0.25
    assert abs(human_variance([0.0, 1.0] * 50) - 0.25) < 1e-9  # many votes: the sample variance
    row = [0.0] * NSTAT
    row[N_], row[SY], row[SY2], row[NH] = 100.0, 0.0, 100.0 * 1.0, 2.0  # Var(Y) = 1
    assert humans_alone_estimate({"stats": [row]}, {0: human_variance([1.0, 1.0])}) == round(100 * 0.25 / 3)
    row[SY] = 100.0 * 0.6  # an estimate past 1 (p clipped to 1): p(1 - p) would be 0
    assert humans_alone_estimate({"stats": [row]}, {}) > 0


async def test_two_annotators_claiming_and_voting_at_once_get_one_duel_and_one_fee(api, monkeypatch):
    import asyncio

    cid, (p, q) = await hybrid_campaign(api, monkeypatch, rate=1.0)
    sel = await admin_duels_until_selected(api, cid)
    got = await asyncio.gather(*(api.post(f"/v1/campaigns/{cid}/duels", headers=h) for h in (p, q, p, q)))
    holders = [h for h, r in zip((p, q, p, q), got) if r.status_code in (200, 201)]
    assert all(r.status_code in (200, 201, 409) for r in got), [r.text for r in got]
    assert {r.json()["id"] for r in got if r.status_code in (200, 201)} == {sel["id"]}
    assert len({h["Authorization"] for h in holders}) == 1  # one annotator holds it
    votes = await asyncio.gather(
        *(api.post(f"/v1/duels/{sel['id']}/vote", json={"choice": c}, headers=h) for h in (p, q) for c in "ab")
    )
    assert sorted(r.status_code for r in votes) == [200, 404, 404, 409], [r.text for r in votes]
    rows = ledger_rows(api.app.state.db, cid)
    assert [int(r.duel_id) for r in rows if (r.detail or {}).get("human_fee")] == [sel["id"]]
    assert (await api.get(f"/v1/campaigns/{cid}/replay")).json()["ok"] is True


def test_the_replay_finds_a_pair_recorded_out_of_draw_order_or_past_a_dropped_duel():
    from types import SimpleNamespace as R

    from service.campaigns.hybrid import draw_order_diff

    def duel(id, seq, rec, status, selected, pair=(0, 1)):
        detail = {"hybrid": {"selected": selected}} if status != "failed" else {}
        return R(id=id, model_i=pair[0], model_j=pair[1], select_seq=seq, record_seq=rec, status=status,
                 judge_detail=detail)  # fmt: skip

    ok = [
        duel(1, 1, 5, "judged", True),
        duel(2, 2, None, "failed", False),  # a failed verdict is not in the sequence
        duel(3, 3, 6, "judged", False),
        duel(4, 4, None, "pending", True),  # waiting for its human
        duel(5, 5, None, "judged", False),  # waiting behind it
        duel(6, 6, 7, "judged", False, pair=(1, 2)),
    ]
    assert draw_order_diff(ok) == []
    dropped = ok[:3] + [duel(4, 4, None, "cancelled", True), duel(5, 5, 8, "judged", False)]
    assert any("duel 5" in d and "duel 4" in d for d in draw_order_diff(dropped))
    swapped = [duel(1, 1, 9, "judged", True), duel(3, 3, 6, "judged", False)]
    assert any("recorded before duel 1" in d for d in draw_order_diff(swapped))


def test_the_humans_alone_estimate_never_exceeds_the_duels_and_is_zero_without_human_votes():
    # E[Y^2] = E[H^2] + E[(h - lambda u)^2] (1/pi - 1), so Var(Y) >= Var(H): a hybrid duel is worth
    # at most one human vote. Without human votes lambda = 0 and Y = 1/2 on every duel (no
    # evidence), whose sample variance 0 read as a ratio said humans alone would need millions
    import random

    from algorithms.hybrid import HybridPolicy
    from service.campaigns.hybrid_view import human_variance, humans_alone_estimate

    p = HybridPolicy([1.0, 1.0], 0.05, human_fee=0.1, human_rate=0.5)
    for n in range(6):
        p.record(0, 1, float(n % 2), None, 0.5)  # judge-only duels
    assert humans_alone_estimate(p.to_state(), {}) == 0
    rng, humans = random.Random(3), []
    for _ in range(300):
        H = 1.0 if rng.random() < 0.7 else 0.0
        J = H if rng.random() < 0.9 else 1.0 - H
        asked = rng.random() < 0.5
        p.record(0, 1, J, H if asked else None, 0.5)
        humans += [H] if asked else []
    est = humans_alone_estimate(p.to_state(), {0: human_variance(humans)})
    assert len(humans) < est <= 306


async def test_asking_again_does_not_extend_an_annotators_lease_on_a_selected_duel(api, monkeypatch):
    # the lease bounds how long one annotator keeps a selected duel (and the later duels of its
    # pair waiting behind it); asking for a duel again hands the same one back without renewing it
    import asyncio

    from service.models import Duel

    cid, (p, q) = await hybrid_campaign(api, monkeypatch, rate=1.0)
    sel = await admin_duels_until_selected(api, cid)
    assert (await api.post(f"/v1/campaigns/{cid}/duels", headers=p)).json()["id"] == sel["id"]
    with api.app.state.db.read() as s:
        first = s.get(Duel, sel["id"]).expires_at
    await asyncio.sleep(0.05)
    assert (await api.post(f"/v1/campaigns/{cid}/duels", headers=p)).json()["id"] == sel["id"]
    with api.app.state.db.read() as s:
        d = s.get(Duel, sel["id"])
        assert d.expires_at == first and d.requested_by.startswith("annotator:")


def test_the_replay_recomputes_an_active_pi_from_the_pairs_state_before_the_vote():
    import random
    from types import SimpleNamespace as R

    from algorithms.hybrid import HybridPolicy
    from service.campaigns import hybrid

    key = "5d" * 32

    def run(bad_at=None):
        rng = random.Random(11)
        live, rows = HybridPolicy([1.0, 1.0, 1.0], 0.05, human_fee=0.1, human_rate="active"), []
        for n in range(1, 61):
            i, j = rng.choice([(0, 1), (0, 2), (1, 2)])
            J = rng.choice([0.0, 1.0, 0.8])
            pi = live.human_probability(i, j, J) * (1.05 if n == bad_at else 1.0)  # a pi not from the rule
            rec = hybrid.hybrid_record("a", J, pi, hybrid.human_coin(key, n), seen=hybrid.pair_seen(live, i, j))
            H = float(rng.random() < 0.7) if rec["selected"] else None
            live.record(i, j, J, H, pi)
            rows.append(R(id=n, number=n, model_i=i, model_j=j, judge_detail={"hybrid": rec}, score=H))
        replayed, diff = HybridPolicy([1.0, 1.0, 1.0], 0.05, human_fee=0.1, human_rate="active"), []
        for r in rows:
            hybrid.replay_record(replayed, r, key, diff)
        return diff, rows

    diff, rows = run()
    assert diff == [] and max(r.judge_detail["hybrid"]["seen"] for r in rows) > 5
    diff, _ = run(bad_at=40)
    assert any("duel 40: pi" in d and "active rule" in d for d in diff), diff


@pytest.mark.parametrize("rate", [5e-324, 1e-9, 0.005])
async def test_a_human_rate_too_small_for_a_finite_useful_range_is_422(api, rate):
    # 5e-324 was taken, and its range 1/rate overflowed the policy state to NaN
    from service_helpers import campaign_body
    from test_hybrid_service import hybrid_judge

    r = await api.post("/v1/campaigns", json=campaign_body(judge=hybrid_judge(rate=rate)))
    assert r.status_code == 422 and "human_rate" in r.text and "[0.01, 1]" in r.text, r.text
    assert (await api.post("/v1/campaigns", json=campaign_body(judge=hybrid_judge(rate=0.01)))).status_code == 201


async def test_judged_duels_waiting_behind_a_selected_duel_count_as_pulled_when_planning(api, monkeypatch):
    # the policy must see a blocked pair's judged, unrecorded duels (as it sees those in flight),
    # or it keeps drawing that pair while its statistics cannot move
    from service.models import Duel

    cid, _ = await hybrid_campaign(api, monkeypatch)
    sel = await admin_duels_until_selected(api, cid)
    pair = sorted([sel["model_a"], sel["model_b"]])
    later = None
    for _ in range(80):
        full = (await api.get(f"/v1/duels/{(await api.post(f'/v1/campaigns/{cid}/duels')).json()['id']}")).json()
        if sorted([full["model_a"], full["model_b"]]) == pair and not full["judge"]["hybrid"]["selected"]:
            later = full
            break
    assert later is not None and later["status"] == "judged" and later["record_seq"] is None
    nxt = (await api.post(f"/v1/campaigns/{cid}/duels")).json()["id"]
    from sqlalchemy import select

    with api.app.state.db.read() as s:
        pending = [sorted(p) for p in s.get(Duel, nxt).pending_at_select or []]
        unrecorded = s.execute(
            select(Duel.model_i, Duel.model_j).where(
                Duel.campaign_id == cid,
                Duel.record_seq.is_(None),
                Duel.id < nxt,
                Duel.status.in_(("judged", "pending")),
            )
        ).all()
    assert pending.count(pair) == sum(sorted([r.model_i, r.model_j]) == pair for r in unrecorded) >= 2
    assert (await api.get(f"/v1/campaigns/{cid}/replay")).json()["ok"] is True


def test_the_policy_refuses_a_rate_whose_range_overflows():
    from algorithms.hybrid import HybridPolicy
    from algorithms.policies import PolicyError

    with pytest.raises(PolicyError, match="too small"):
        HybridPolicy([1.0, 1.0], 0.05, human_rate=5e-324)
    HybridPolicy([1.0, 1.0], 0.05, human_rate=1e-300)  # tiny but finite: allowed by the algorithm
