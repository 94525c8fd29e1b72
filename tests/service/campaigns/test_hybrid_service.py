"""The hybrid judge in the service: validation, the cycle (automatic verdict, keyed human coin,
votes on the pool), the ledger (the human fee reserved, charged only with a vote) and replay."""

from __future__ import annotations

import random

import pytest
from service_helpers import (
    HYBRID_FEE,
    admin_duels_until_selected,
    all_duels,
    campaign_body,
    check_hybrid_ledger,
    hybrid_campaign,
    hybrid_judge,
    ledger_rows,
    simulated_judge,
)

from service.campaigns import draws, hybrid_view


@pytest.mark.parametrize(
    "judge, extra, needle",
    [
        (hybrid_judge(llm={"kind": "human"}), {}, "must be an automatic judge"),
        (hybrid_judge(llm={"kind": "hybrid", "llm": simulated_judge()}), {}, "must be an automatic judge"),
        (hybrid_judge(rate=0), {}, "human_rate"),
        (hybrid_judge(rate=1.5), {}, "human_rate"),
        (hybrid_judge(rate="sometimes"), {}, "human_rate"),
        (hybrid_judge(rate=True), {}, "human_rate"),
        (hybrid_judge(fee=-1), {}, "fee_per_vote"),
        (hybrid_judge(fee=2e6), {}, "fee_per_vote"),
        (hybrid_judge(), {"algorithm": "dctas"}, "needs algorithm dctas-pc"),
        (hybrid_judge(), {"prompt_sampling": "without_replacement"}, "without_replacement"),
        (hybrid_judge(), {"tie_policy": "drop"}, "tie_policy half or random"),
    ],
)
async def test_bad_hybrid_campaigns_are_422_with_a_reason(api, judge, extra, needle):
    r = await api.post("/v1/campaigns", json=campaign_body(judge=judge, **extra))
    assert r.status_code == 422, r.text
    assert needle in r.text


async def test_a_hybrid_campaign_runs_as_dctas_pc_hybrid(api):
    r = await api.post("/v1/campaigns", json=campaign_body(judge=hybrid_judge(rate="active")))
    assert r.status_code == 201, r.text
    view = r.json()
    assert view["algorithm"] == "dctas-pc-hybrid"
    assert view["tie_policy"] == "half" and view["prompt_sampling"] == "with_replacement"
    assert view["judge"]["human_rate"] == "active" and view["judge"]["human"]["fee_per_vote"] == HYBRID_FEE


async def run_hybrid(api, cid: int, ann: dict, max_steps: int = 3000) -> dict:
    """Admin duels (judged by the automatic judge at once) and annotators voting on the selected
    ones until the campaign ends; the humans prefer the lower-numbered model 4 times in 5."""
    rng = random.Random(5)
    for _ in range(max_steps):
        view = (await api.get(f"/v1/campaigns/{cid}")).json()
        if view["status"] != "running":
            return view
        r = await api.post(f"/v1/campaigns/{cid}/duels")
        assert r.status_code in (201, 200, 409), r.text
        while True:
            r = await api.post(f"/v1/campaigns/{cid}/duels", headers=ann)
            if r.status_code == 409:
                break
            assert r.status_code in (200, 201), r.text
            shown = r.json()
            assert "model_a" not in shown and "judge" not in shown and "score" not in shown  # blind
            admin_view = (await api.get(f"/v1/duels/{shown['id']}")).json()
            better = "a" if admin_view["model_a"] < admin_view["model_b"] else "b"
            choice = better if rng.random() < 0.8 else ("b" if better == "a" else "a")
            r = await api.post(f"/v1/duels/{shown['id']}/vote", json={"choice": choice}, headers=ann)
            assert r.status_code == 200, r.text
    raise AssertionError("the campaign did not end")


async def test_a_hybrid_campaign_certifies_with_human_votes_on_the_selected_duels(api, monkeypatch):
    # the draw key fixes the pairs, the judge's verdicts and the selection coins: a campaign that runs
    # out of its budget by chance (as one did, at rate up to delta and beyond) cannot fail this test
    monkeypatch.setattr(draws, "new_draw_key", lambda: "a0" * 32)  # certifies in 129 duels (633 USD of 1000)
    body = campaign_body(judge=hybrid_judge(rate=0.5), delta=0.05, budget=1000.0)
    cid = (await api.post("/v1/campaigns", json=body)).json()["id"]
    token = (await api.post(f"/v1/campaigns/{cid}/annotators", json={"label": "h"})).json()["token"]
    ann = {"Authorization": f"Bearer {token}"}
    view = await run_hybrid(api, cid, ann)
    assert view["status"] == "certified", view
    assert view["winner"] == "m0"
    duels = await all_duels(api, cid)
    humans = check_hybrid_ledger(duels, ledger_rows(api.app.state.db, cid), HYBRID_FEE)
    assert humans > 0 and view["judge_spend"] == pytest.approx(humans * HYBRID_FEE)
    judged = [d for d in duels if d["status"] == "judged"]
    selected = [d for d in judged if d["judge"]["hybrid"]["selected"]]
    assert {d["judged_by"] for d in selected} == {"annotator:1"} or all(
        d["judged_by"].startswith("annotator:") for d in selected
    )
    assert all(d["judged_by"] == "judge:hybrid" for d in judged if not d["judge"]["hybrid"]["selected"])
    rep = (await api.get(f"/v1/campaigns/{cid}/replay")).json()
    assert rep["ok"] is True, rep
    hv = view["hybrid"]
    assert hv["human_votes"] == humans and hv["human_votes_waiting"] == 0  # the end cancelled the waiting ones
    assert hv["human_votes_alone_estimate"] > 0
    ag = hv["agreement"]
    assert 0 < ag["decisive_votes"] <= humans and ag["interval"][0] <= ag["rate"] <= ag["interval"][1]
    # the simulated judge follows the synthetic matrix, where the lower-numbered model is preferred, and so do
    # 4 humans in 5: they agree more often than chance (about 0.6), which a 95% interval does not rule out
    # even on a short campaign; the warning appears exactly when that interval is below 1/2 on enough votes
    assert ag["interval"][1] > 0.5
    # (the rule of hybrid_view.agreement_warning: the whole Wilson interval below 1/2, not only the rate)
    below = ag["interval"][1] < 0.5 and ag["decisive_votes"] >= hybrid_view.WARN_MIN_VOTES
    assert (hv["agreement_warning"] is not None) == below, hv


# ---------------------------------------------------------------- the pool, the order, the ledger


async def test_a_judge_only_duel_waits_behind_an_earlier_selected_duel_of_its_pair(api, monkeypatch):
    cid, (ann, _) = await hybrid_campaign(api, monkeypatch)
    first = await admin_duels_until_selected(api, cid)
    pair = {first["model_a"], first["model_b"]}
    later = None
    for _ in range(80):  # a later judge-only duel of the same pair
        d = (await api.post(f"/v1/campaigns/{cid}/duels")).json()
        full = (await api.get(f"/v1/duels/{d['id']}")).json()
        if {full["model_a"], full["model_b"]} == pair and not full["judge"]["hybrid"]["selected"]:
            later = full
            break
    assert later is not None
    assert later["status"] == "judged" and later["record_seq"] is None and not later["counted"]  # held
    t_before = (await api.get(f"/v1/campaigns/{cid}")).json()["t"]
    shown = (await api.post(f"/v1/campaigns/{cid}/duels", headers=ann)).json()
    assert shown["id"] == first["id"]  # the oldest selected duel of the pool
    assert (await api.post(f"/v1/duels/{first['id']}/vote", json={"choice": "a"}, headers=ann)).status_code == 200
    a = (await api.get(f"/v1/duels/{first['id']}")).json()
    b = (await api.get(f"/v1/duels/{later['id']}")).json()
    assert a["record_seq"] is not None and b["record_seq"] is not None and a["record_seq"] < b["record_seq"]
    assert (await api.get(f"/v1/campaigns/{cid}")).json()["t"] >= t_before + 2
    assert (await api.get(f"/v1/campaigns/{cid}/replay")).json()["ok"] is True


async def test_skips_lapsed_leases_and_revoked_annotators_return_a_selected_duel_to_the_pool(api, monkeypatch):
    from sqlalchemy import update

    from service.models import Duel, utcnow

    cid, (p, q) = await hybrid_campaign(api, monkeypatch)
    # nothing waits for a human yet: 409, nothing planned for the annotator
    r = await api.post(f"/v1/campaigns/{cid}/duels", headers=p)
    assert r.status_code == 409 and "waits for a human vote" in r.text
    sel = await admin_duels_until_selected(api, cid)
    assert (await api.post(f"/v1/campaigns/{cid}/duels", headers=p)).json()["id"] == sel["id"]
    # q cannot vote on p's duel
    assert (await api.post(f"/v1/duels/{sel['id']}/vote", json={"choice": "a"}, headers=q)).status_code == 404
    # a skip hands it to q
    assert (await api.post(f"/v1/duels/{sel['id']}/skip", headers=p)).status_code in (200, 204)
    assert (await api.post(f"/v1/campaigns/{cid}/duels", headers=q)).json()["id"] == sel["id"]
    # q's lease lapses: the next plan hands it back to the pool, never expires it
    with api.app.state.db.write() as s:
        s.execute(update(Duel).where(Duel.id == sel["id"]).values(expires_at=utcnow()))
    r = await api.post(f"/v1/campaigns/{cid}/duels", headers=p)  # p skipped it: not offered to p again
    assert r.status_code == 409, r.text
    assert (await api.get(f"/v1/duels/{sel['id']}")).json()["status"] == "pending"
    assert (await api.post(f"/v1/campaigns/{cid}/duels", headers=q)).json()["id"] == sel["id"]
    # q is revoked: the duel goes back to the pool; a third annotator takes it and votes
    token = (await api.post(f"/v1/campaigns/{cid}/annotators", json={"label": "r"})).json()["token"]
    third = {"Authorization": f"Bearer {token}"}
    annotators = (await api.get(f"/v1/campaigns/{cid}/annotators")).json()
    rows = annotators["items"] if isinstance(annotators, dict) else annotators
    q_id = next(a["id"] for a in rows if a["label"] == "q")
    assert (await api.delete(f"/v1/campaigns/{cid}/annotators/{q_id}")).status_code == 200
    assert (await api.get(f"/v1/duels/{sel['id']}")).json()["status"] == "pending"
    assert (await api.post(f"/v1/campaigns/{cid}/duels", headers=third)).json()["id"] == sel["id"]
    r = await api.post(f"/v1/duels/{sel['id']}/vote", json={"choice": "b"}, headers=third)
    assert r.status_code == 200, r.text
    assert (await api.post(f"/v1/duels/{sel['id']}/vote", json={"choice": "b"}, headers=third)).status_code == 409
    rows = ledger_rows(api.app.state.db, cid)
    fees = [r for r in rows if (r.detail or {}).get("human_fee")]
    assert [(int(r.duel_id), int(r.amount_nusd)) for r in fees] == [(sel["id"], round(HYBRID_FEE * 1e9))]
    assert (await api.get(f"/v1/campaigns/{cid}/replay")).json()["ok"] is True


async def test_a_campaign_that_ends_cancels_its_waiting_duels_without_a_fee(api, monkeypatch):
    cid, (p, _) = await hybrid_campaign(api, monkeypatch, rate=1.0)
    sel = await admin_duels_until_selected(api, cid)
    view = (await api.get(f"/v1/campaigns/{cid}")).json()
    assert view["hybrid"]["human_votes_waiting"] == 1 and view["hybrid"]["human_votes"] == 0
    assert (await api.post(f"/v1/campaigns/{cid}/stop")).status_code == 200
    assert (await api.get(f"/v1/duels/{sel['id']}")).json()["status"] == "cancelled"
    assert not [r for r in ledger_rows(api.app.state.db, cid) if (r.detail or {}).get("human_fee")]
    # the admin is not blind: its vote is refused on a hybrid campaign (403), and p's comes too late (409)
    assert (await api.post(f"/v1/duels/{sel['id']}/vote", json={"choice": "a"})).status_code == 403
    assert (await api.post(f"/v1/campaigns/{cid}/duels", headers=p)).status_code == 409
    assert (await api.get(f"/v1/campaigns/{cid}/replay")).json()["ok"] is True


async def test_the_budget_reserves_the_fee_of_each_waiting_duel(api, monkeypatch):
    from service.money.bounds import judge_bound_nusd
    from service.money.costs import cost_nusd

    cid, _ = await hybrid_campaign(api, monkeypatch, rate=1.0)
    sel = await admin_duels_until_selected(api, cid)
    with api.app.state.db.read() as s:
        from service.models import Duel

        d = s.get(Duel, sel["id"])
        assert d.expected_cost_nusd == cost_nusd(HYBRID_FEE)  # what it may still pay: the human fee
    body = campaign_body(judge=hybrid_judge(rate=1.0))
    judge = body["judge"]
    assert judge_bound_nusd(judge, "x") == cost_nusd(HYBRID_FEE)  # simulated judge: free; plus one fee


async def test_the_dashboard_and_campaign_show_report_the_human_votes(api, monkeypatch):
    from service.cli.campaign_text import summary

    cid, (p, _) = await hybrid_campaign(api, monkeypatch)
    sel = await admin_duels_until_selected(api, cid)
    (await api.post(f"/v1/campaigns/{cid}/duels", headers=p)).json()
    assert (await api.post(f"/v1/duels/{sel['id']}/vote", json={"choice": "a"}, headers=p)).status_code == 200
    view = (await api.get(f"/v1/campaigns/{cid}")).json()
    page = (await api.get(f"/campaigns/{cid}")).text
    assert 'id="human-votes">1<' in page and "Judge agrees with humans" in page
    text = summary(view)
    assert "humans     1 votes, human_rate 0.5" in text
    shown = (await api.get(f"/v1/campaigns/{cid}", headers=p)).json()  # an annotator counts human votes only
    assert shown["votes_counted"] == 1 and view["duels"] > 1 and "hybrid" not in shown


def test_the_view_numbers():
    from service.campaigns.hybrid import human_coin
    from service.campaigns.hybrid_view import humans_alone_estimate, wilson
    from service.cli.hybrid_show import hybrid_lines

    lo, hi = wilson(8, 10)
    assert 0.49 < lo < 0.50 and 0.94 < hi < 0.95  # Wilson 95% for 8/10: 0.490 to 0.943
    assert wilson(0, 0) is None
    coins = [human_coin("ab" * 32, n) for n in range(1, 4001)]
    assert all(0 <= u < 1 for u in coins) and coins == [human_coin("ab" * 32, n) for n in range(1, 4001)]
    assert abs(sum(coins) / len(coins) - 0.5) < 0.03 and len(set(coins)) == len(coins)
    assert human_coin("cd" * 32, 1) != coins[0]
    # per pair: n * Var(H) / Var(Y); a pair with Var(Y) = 4 Var(H) needs a quarter of the votes
    from algorithms.hybrid import N_, NH, NSTAT, SY, SY2

    row = [0.0] * NSTAT
    row[N_], row[SY], row[SY2], row[NH] = 100.0, 0.0, 100.0 * 1.0, 50.0  # Var(Y) = 1
    assert humans_alone_estimate({"stats": [row]}, {0: 0.25}) == 25
    lines = hybrid_lines(
        {
            "hybrid": {
                "human_rate": "active",
                "human_votes": 12,
                "human_votes_waiting": 2,
                "human_votes_alone_estimate": 40,
                "agreement": {
                    "decisive_votes": 10,
                    "agreeing": 3,
                    "rate": 0.3,
                    "interval": [0.1, 0.6],
                    "confidence": 0.95,
                },
                "agreement_warning": "below chance",
            }
        }
    )
    assert lines[0].endswith("12 votes (2 waiting), human_rate active; humans alone would have needed about 40")
    assert "3 of 10 decisive votes (30%" in lines[1] and lines[2] == "  warning    below chance"


def test_next_records_follow_the_draw_order_and_stop_at_the_first_unresolved_duel():
    from types import SimpleNamespace as NS

    from service.campaigns.hybrid import hybrid_record, next_records

    def duel(seq, status, selected, score=None, detail=True):
        rec = hybrid_record("a", 0.7, 0.5, 0.2 if selected else 0.9) if detail else None
        return NS(id=seq, select_seq=seq, status=status, judge_detail={"hybrid": rec} if rec else {}, score=score)

    judge_only = duel(5, "judged", False, 0.7)
    waiting = duel(3, "pending", True)  # selected, no human vote yet
    voted = duel(1, "judged", True, 1.0)
    assert [r.id for r in next_records([judge_only, waiting, voted])] == [1]
    waiting.status, waiting.score = "judged", 0.0
    assert [r.id for r in next_records([judge_only, waiting, voted])] == [1, 3, 5]
    no_verdict = duel(2, "calling", False, detail=False)  # still waiting for its answers or verdict
    assert [r.id for r in next_records([judge_only, no_verdict, voted])] == [1]


async def test_an_active_rate_gives_each_duel_its_own_pi_and_replays(api, monkeypatch):
    cid, (p, _) = await hybrid_campaign(api, monkeypatch, rate="active")
    pis = []
    for _ in range(30):
        r = await api.post(f"/v1/campaigns/{cid}/duels")
        if r.status_code != 201:  # the campaign ended (its budget of 100 buys about 20 duels)
            assert (await api.get(f"/v1/campaigns/{cid}")).json()["status"] != "running", r.text
            break
        h = (await api.get(f"/v1/duels/{r.json()['id']}")).json()["judge"]["hybrid"]
        assert 0.1 <= h["pi"] <= 1.0 and h["selected"] == (h["coin"] < h["pi"])
        pis.append(h["pi"])
        while True:
            r = await api.post(f"/v1/campaigns/{cid}/duels", headers=p)
            if r.status_code == 409:
                break
            assert (
                await api.post(f"/v1/duels/{r.json()['id']}/vote", json={"choice": "b"}, headers=p)
            ).status_code == 200
    assert len(set(pis)) > 1  # the active rule moves pi with the judge's verdict and the pair's past
    assert (await api.get(f"/v1/campaigns/{cid}/replay")).json()["ok"] is True
