"""The hybrid judge in the service: validation, the cycle (automatic verdict, keyed human coin,
votes on the pool), the ledger (the human fee reserved, charged only with a vote) and replay."""

from __future__ import annotations

import random

import pytest
from service_helpers import SYNTHETIC_P, all_duels, campaign_body, simulated_judge

FEE = 0.05


def hybrid_judge(rate=0.5, fee=FEE, llm=None) -> dict:
    return {
        "kind": "hybrid",
        "llm": llm if llm is not None else simulated_judge(SYNTHETIC_P),
        "human": {"fee_per_vote": fee},
        "human_rate": rate,
    }


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
    assert view["judge"]["human_rate"] == "active" and view["judge"]["human"]["fee_per_vote"] == FEE


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


def ledger_rows(db, cid: int) -> list:
    """The campaign's ledger rows (kind, duel, amount, detail), read from the database."""
    from sqlalchemy import select

    from service.models import Charge

    with db.read() as s:
        return s.execute(
            select(Charge.kind, Charge.duel_id, Charge.amount_nusd, Charge.detail).where(Charge.campaign_id == cid)
        ).all()


def check_ledger(duels: list[dict], rows: list, fee: float) -> int:
    """Every human fee in the ledger belongs to a duel a human voted on, and every such duel paid
    exactly one; returns the number of human votes."""
    fees: dict[int, list[int]] = {}
    for r in rows:
        if r.kind == "judge" and (r.detail or {}).get("human_fee"):
            fees.setdefault(int(r.duel_id), []).append(int(r.amount_nusd))
    humans = 0
    by_id = {d["id"]: d for d in duels}
    assert set(fees) <= set(by_id)
    for d in duels:
        voted = (d["judged_by"] or "").startswith("annotator:")
        h = (d["judge"] or {}).get("hybrid")
        assert fees.get(d["id"], []) == ([round(fee * 1e9)] if voted else []), d
        if voted:
            humans += 1
            assert h["selected"] and d["status"] == "judged"
        elif h is not None and h["selected"]:
            assert d["status"] in ("pending", "cancelled"), d  # no human saw it: never charged
    return humans


async def test_a_hybrid_campaign_certifies_with_human_votes_on_the_selected_duels(api):
    body = campaign_body(judge=hybrid_judge(rate=0.5), delta=0.05, budget=1000.0)
    cid = (await api.post("/v1/campaigns", json=body)).json()["id"]
    token = (await api.post(f"/v1/campaigns/{cid}/annotators", json={"label": "h"})).json()["token"]
    ann = {"Authorization": f"Bearer {token}"}
    view = await run_hybrid(api, cid, ann)
    assert view["status"] == "certified", view
    assert view["winner"] == "m0"
    duels = await all_duels(api, cid)
    humans = check_ledger(duels, ledger_rows(api.app.state.db, cid), FEE)
    assert humans > 0 and view["judge_spend"] == pytest.approx(humans * FEE)
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
    # the simulated judge follows the synthetic matrix, where the lower-numbered model is preferred
    assert ag["rate"] > 0.5 and hv["agreement_warning"] is None
