"""The decisions of a vote cycle (service/cycle/plan.py, answers.py, verdict.py: each stage's decisions beside its sequence), over plain data: no database, no server.

Each case the plan, store-answers and verdict transactions decide is here once: ended
campaigns, stale duels, the duel cap, the budget and pre-generation holds, background
runs, the annotator's own duels, reuse, the without-replacement order, certification,
judge charges and provider faults. The transactions that apply these decisions are
guarded by the end-to-end tests (tests/service/cycle/test_fastpath.py and the others named in
docs/architecture.md, *The duel*).
"""

from __future__ import annotations

import datetime as dt
from types import SimpleNamespace as Row

import pytest

from algorithms.vocabulary import CampaignStatus, DuelStatus
from service.auth import Principal
from service.campaigns.annotator_access import held_duel
from service.campaigns.leases import ORPHAN_REQUESTER, RUN_REQUESTER
from service.campaigns.limits import END_LIMIT_MAX_DUELS, END_LIMIT_PROVIDER
from service.campaigns.sampling import free_position, next_in_order
from service.campaigns.scoring import score_of
from service.campaigns.store_claims import Stored
from service.campaigns.types import CampaignEnded, Conflict, DuelPlan, Forbidden
from service.clients import ClientError, Completion
from service.cycle import answers, plan, verdict
from service.money import budget, reserve
from service.money.bounds import model_bound_nusd
from service.money.budget import END_LIMIT_BUDGET
from service.money.costs import vote_fee_nusd

NOW = dt.datetime(2026, 1, 1, 12, 0, tzinfo=dt.timezone.utc)
LATER = NOW + dt.timedelta(minutes=5)
EARLIER = NOW - dt.timedelta(seconds=1)
ADMIN = Principal(admin=True)
ANNOTATOR = Principal(admin=False, campaign_id=7, annotator_id=3)


def duel(id: int, requested_by: str = "admin", expires_at: dt.datetime = LATER, cost: int = 10, pair=(0, 1)) -> Row:
    return Row(
        id=id,
        model_i=pair[0],
        model_j=pair[1],
        expected_cost_nusd=cost,
        expires_at=expires_at,
        requested_by=requested_by,
    )


# ---------------------------------------------------------------- plan: who may, and the ended campaign
def test_access_refusal_names_each_reason():
    assert isinstance(plan.access_refusal(8, CampaignStatus.RUNNING, "human", ANNOTATOR), Forbidden)
    ended = plan.access_refusal(7, CampaignStatus.CERTIFIED, "human", ANNOTATOR)
    assert isinstance(ended, Conflict) and "has ended (status certified)" in ended.detail
    automatic = plan.access_refusal(7, CampaignStatus.RUNNING, "llm", ANNOTATOR)
    assert isinstance(automatic, Forbidden) and "human-judged" in automatic.detail
    assert plan.access_refusal(7, CampaignStatus.RUNNING, "human", ANNOTATOR) is None
    assert plan.access_refusal(7, CampaignStatus.RUNNING, "llm", ADMIN) is None
    assert plan.access_refusal(7, CampaignStatus.RUNNING, "llm", None) is None  # a background run


# ---------------------------------------------------------------- plan: background runs
def run_campaign(**kw) -> Row:
    return Row(**{"run_active": True, "run_owner": "me", "run_remaining": None, "run_concurrency": 2, **kw})


def test_run_refusal_fences_stops_and_fills_slots():
    assert plan.run_refusal(run_campaign(run_active=False), "me", [], NOW).detail == "the run was stopped"
    assert "another process" in plan.run_refusal(run_campaign(run_owner="other"), "me", [], NOW).detail
    assert "max_duels" in plan.run_refusal(run_campaign(run_remaining=0), "me", [], NOW).detail
    two = [duel(1, RUN_REQUESTER), duel(2, RUN_REQUESTER)]
    full = plan.run_refusal(run_campaign(), "me", two, NOW)
    assert full.retry_later and full.detail.startswith("2 duels of the run")
    # a stale run duel and an annotator's duel take no slot
    assert (
        plan.run_refusal(run_campaign(), "me", [duel(1, RUN_REQUESTER), duel(2, RUN_REQUESTER, EARLIER)], NOW) is None
    )
    assert plan.run_refusal(run_campaign(), "me", [duel(1, RUN_REQUESTER), duel(2, "annotator:1")], NOW) is None
    assert plan.run_refusal(run_campaign(run_remaining=1), "me", [], NOW) is None


# ---------------------------------------------------------------- plan: stale duels and the annotator's own
def test_split_stale_expires_exactly_the_duels_past_their_expiry():
    rows = [duel(1), duel(2, expires_at=NOW), duel(3, expires_at=EARLIER)]
    stale, live = plan.split_stale(rows, NOW)
    assert stale == [2, 3] and [r.id for r in live] == [1]


def test_an_annotator_at_its_limit_gets_its_oldest_duel_back():
    label = ANNOTATOR.label
    rows = [duel(9, label), duel(4, label), duel(5, "annotator:99")]
    assert held_duel(rows, label, 2) == 4
    assert held_duel(rows, label, 3) is None
    assert held_duel([], label, 1) is None


# ---------------------------------------------------------------- plan: the duel cap
def test_cap_ends_the_campaign_only_with_nothing_in_flight():
    assert plan.cap_decision(7, None, 10**6, []) is None
    assert plan.cap_decision(7, 5, 4, []) is None
    end = plan.cap_decision(7, 5, 5, [])
    assert isinstance(end, plan.End) and end.status == CampaignStatus.STOPPED
    assert end.limit == END_LIMIT_MAX_DUELS and isinstance(end.error, CampaignEnded)
    wait = plan.cap_decision(7, 5, 4, [duel(1)])
    assert isinstance(wait, Conflict) and wait.retry_later and "1 duels in flight" in wait.detail


def test_orphaned_run_duels_never_count_toward_the_cap():
    assert plan.cap_decision(7, 5, 4, [duel(1, ORPHAN_REQUESTER)]) is None
    assert isinstance(plan.cap_decision(7, 5, 5, [duel(1, ORPHAN_REQUESTER)]), plan.End)


# ---------------------------------------------------------------- plan: budget, reservations, holds
def test_budget_counts_spend_reservations_holds_and_the_new_duel():
    live = [duel(1, cost=30), duel(2, cost=20)]
    assert (
        reserve.budget_decision(7, budget_nusd=100, spent_nusd=40, live=live, held_nusd=0, expected_nusd=10) is None
    )  # 40 + 50 + 10 = 100: fits exactly
    wait = reserve.budget_decision(7, budget_nusd=100, spent_nusd=40, live=live, held_nusd=0, expected_nusd=11)
    assert isinstance(wait, Conflict) and wait.retry_later and "2 duels in flight" in wait.detail
    held = reserve.budget_decision(
        7, budget_nusd=100, spent_nusd=40, live=[], held_nusd=55, expected_nusd=10
    )  # a pre-generation hold reserves too
    assert isinstance(held, Conflict) and "pre-generated" in held.detail
    assert reserve.budget_decision(7, budget_nusd=100, spent_nusd=40, live=[], held_nusd=50, expected_nusd=10) is None


def test_budget_ends_the_campaign_when_nothing_holds_money():
    end = reserve.budget_decision(7, budget_nusd=100, spent_nusd=95, live=[], held_nusd=0, expected_nusd=10)
    assert isinstance(end, plan.End) and end.status == CampaignStatus.BUDGET_EXHAUSTED
    assert end.limit == END_LIMIT_BUDGET and isinstance(end.error, CampaignEnded)
    assert "1e-08 USD" in end.reason and "5e-09 USD" in end.reason
    # no budget: the ledger's capacity bounds it, and raising a budget cannot continue it
    unbounded = reserve.budget_decision(
        7, budget_nusd=None, spent_nusd=budget.LEDGER_CAP_NUSD - 5, live=[], held_nusd=0, expected_nusd=10
    )
    assert isinstance(unbounded, plan.End) and unbounded.limit is None


def test_the_new_duel_is_calling_and_reserves_its_bound():
    cols = plan.new_duel_columns(
        7,
        number=3,
        pair=(0, 2),
        draw=(4, False),
        prompt="p",
        reserved_nusd=99,
        select_seq=12,
        pending=[[0, 1]],
        requested_by="run",
        now=NOW,
        expires_at=LATER,
    )
    assert cols["status"] == DuelStatus.CALLING and cols["expected_cost_nusd"] == 99
    assert (cols["model_i"], cols["model_j"], cols["prompt_index"], cols["a_is_i"]) == (0, 2, 4, False)
    assert cols["select_seq"] == 12 and cols["pending_at_select"] == [[0, 1]] and not cols["counted"]


# ---------------------------------------------------------------- plan: without replacement
def test_without_replacement_positions_and_the_no_pair_case():
    assert free_position([0, 1, 3], 5) == 2
    assert free_position(range(4), 4) is None
    wait = plan.no_pair_error(1, 2, "none")
    assert wait.retry_later and "counting the 3 duels" in wait.detail
    done = plan.no_pair_error(0, 0, "every pair is decided")
    assert not done.retry_later and "every pair is decided" in done.detail


def test_held_outcomes_enter_the_policy_in_position_order():
    held = {1: "q1", 2: "q2", 4: "q4"}
    assert next_in_order(0, held) == []  # position 0 still in flight: all wait
    assert next_in_order(1, held) == ["q1", "q2"]  # up to the gap at 3
    assert next_in_order(4, held) == ["q4"]


# ---------------------------------------------------------------- store answers
def plan_of(models: list[dict], a_is_i: bool = True) -> DuelPlan:
    return DuelPlan(7, 11, 1, 0, 1, a_is_i, "Say hi.", models, {"kind": "human"}, "half", 1)


def model(name: str, cost: float = 0.002) -> dict:
    return {"name": name, "cost": cost, "client": {"kind": "simulated"}}


def test_settled_answers_charge_what_was_spent_and_fill_the_duel():
    p = plan_of([model("m0"), model("m1")], a_is_i=False)
    results = {0: Completion("zero", 3, 4, 0.002, 0.1), 1: Completion("one sk-SECRET", 3, 5, 0.001, 0.2)}
    charges, total, fields, error, faults = answers.settle_answers(p, results, NOW, ("sk-SECRET",))
    assert error is None and faults == {}
    assert [c["amount_nusd"] for c in charges] == [2_000_000, 1_000_000] and total == 3_000_000
    assert fields["answer_a"] == "one ***"  # model 1 is shown first; the key is masked
    assert fields["answer_b"] == "zero" and fields["completion_a"]["model"] == "m1"


def test_a_reused_answer_costs_nothing_and_names_its_paying_charge():
    p = plan_of([model("m0"), model("m1")])
    results = {0: Stored(id=5, charge_id=40, text="kept"), 1: Completion("new", 1, 1, 0.002, 0.1)}
    charges, total, fields, error, _ = answers.settle_answers(p, results, NOW, ())
    assert error is None and total == 2_000_000 and fields["answer_a"] == "kept"
    reuse = [c for c in charges if c["model_index"] == 0]
    assert len(reuse) == 1 and reuse[0]["amount_nusd"] == 0 and fields["completion_a"]["reused_answer"] == 5


def test_a_failed_call_fails_the_duel_and_a_lying_provider_is_charged_its_bound():
    p = plan_of([model("m0"), model("m1")])
    results = {0: ClientError("HTTP 500"), 1: Completion("x", 1, 1, 1e6, 0.1)}  # claims a million USD
    charges, total, fields, error, faults = answers.settle_answers(p, results, NOW, ())
    assert "model 'm0': HTTP 500" in error and "provider fault" in error
    assert set(faults) == {1} and "m1" in faults[1]
    assert total == model_bound_nusd(p.models[1], p.prompt) and "answer_a" not in fields
    assert fields["completion_b"]["provider_fault"] == faults[1]


def test_the_duel_status_after_its_answers():
    calling, pending = DuelStatus.CALLING, DuelStatus.PENDING
    assert answers.after_answers(calling, "admin", None) == (pending, None, False)
    assert answers.after_answers(calling, "admin", "boom") == (DuelStatus.FAILED, "boom", True)
    assert answers.after_answers(DuelStatus.EXPIRED, "admin", "boom") == (DuelStatus.EXPIRED, "boom", False)
    assert answers.after_answers(calling, ORPHAN_REQUESTER, None) == (DuelStatus.EXPIRED, None, False)
    assert answers.after_answers(calling, ORPHAN_REQUESTER, "boom") == (DuelStatus.EXPIRED, None, False)
    assert answers.after_answers(DuelStatus.CANCELLED, "admin", None) == (DuelStatus.CANCELLED, None, False)
    assert "0.5 USD not charged" in answers.late_error(500_000_000)


def test_answers_after_the_end_are_marked_late_and_a_fault_pauses_only_a_running_campaign():
    p = plan_of([model("m0"), model("m1")])
    results = {0: Completion("x", 1, 1, 0.001, 0.1), 1: Completion("y", 1, 1, 1e6, 0.1)}
    charges, _, fields, _, faults = answers.settle_answers(p, results, NOW, ())
    charges, fields = answers.marked_late(charges, fields)
    assert charges and all(ch["detail"]["late"] for ch in charges)
    assert fields["completion_a"]["late"] and fields["completion_b"]["late"]
    assert answers.marked_late([], {"completion_a": None}) == ([], {"completion_a": None})  # a failure: nothing
    pause = answers.fault_pause(faults, CampaignStatus.RUNNING)
    assert pause is not None and pause.status == CampaignStatus.STOPPED and pause.limit == "provider"
    assert "m1" in pause.reason
    assert answers.fault_pause(faults, CampaignStatus.CERTIFIED) is None  # already ended: stays as it is
    assert answers.fault_pause({}, CampaignStatus.RUNNING) is None


# ---------------------------------------------------------------- record a verdict
@pytest.mark.parametrize(
    ("status", "requested_by", "expires_at", "campaign_status", "expire", "message"),
    [
        (DuelStatus.PENDING, ORPHAN_REQUESTER, LATER, CampaignStatus.RUNNING, True, "duel 5: taken over"),
        (DuelStatus.JUDGED, "admin", LATER, CampaignStatus.RUNNING, False, "already has a verdict"),
        (DuelStatus.CALLING, "admin", LATER, CampaignStatus.RUNNING, False, "still waiting"),
        (DuelStatus.CANCELLED, "admin", LATER, CampaignStatus.RUNNING, False, "was cancelled"),
        (DuelStatus.PENDING, "admin", EARLIER, CampaignStatus.RUNNING, True, "expired at"),
        (DuelStatus.PENDING, "admin", LATER, CampaignStatus.STOPPED, False, "campaign 7 has ended"),
    ],
)
def test_a_verdict_that_cannot_count(status, requested_by, expires_at, campaign_status, expire, message):
    out = verdict.refusal(
        5,
        status=status,
        requested_by=requested_by,
        error="taken over",
        expires_at=expires_at,
        campaign_id=7,
        campaign_status=campaign_status,
        now=NOW,
    )
    assert out is not None and out.expire is expire and message in out.error.detail


def test_a_pending_duel_of_a_running_campaign_counts():
    out = verdict.refusal(
        5,
        status=DuelStatus.PENDING,
        requested_by="admin",
        error=None,
        expires_at=LATER,
        campaign_id=7,
        campaign_status=CampaignStatus.RUNNING,
        now=NOW,
    )
    assert out is None


def test_scores_follow_the_display_order_and_the_tie_policy():
    assert (
        score_of("a", model_i=0, model_a=1, model_b=0, tie_policy="half", seed=1, number=1) == 0.0
    )  # model 1 shown as a won
    assert score_of("b", model_i=0, model_a=1, model_b=0, tie_policy="half", seed=1, number=1) == 1.0
    assert score_of("tie", model_i=0, model_a=0, model_b=1, tie_policy="half", seed=1, number=1) == 0.5
    assert score_of("tie", model_i=0, model_a=0, model_b=1, tie_policy="drop", seed=1, number=1) is None
    assert (
        score_of("a", model_i=0, model_a=0, model_b=1, tie_policy="half", seed=1, number=1, score_a=0.8) == 0.8
    )  # a graded judge


def test_certification_comes_first_then_cap_budget_and_fault():
    certified = verdict.stop_ending(None, 2, algorithm="dctas", delta=0.05, n_prompts=10)
    assert certified.status == CampaignStatus.CERTIFIED and certified.winner == 2 and "delta=0.05" in certified.reason
    assert (
        verdict.ending(certified, judged=True, max_duels=1, duels_judged=1, budget_nusd=1, spent_nusd=1, fault="lie")
        is certified
    )
    cap = verdict.ending(None, judged=True, max_duels=3, duels_judged=3, budget_nusd=None, spent_nusd=0, fault="lie")
    assert cap.status == CampaignStatus.STOPPED and cap.limit == END_LIMIT_MAX_DUELS
    # a failed judgement does not count toward max_duels; the spent budget ends it still
    spent = verdict.ending(None, judged=False, max_duels=3, duels_judged=3, budget_nusd=100, spent_nusd=100, fault=None)
    assert spent.status == CampaignStatus.BUDGET_EXHAUSTED and spent.limit == END_LIMIT_BUDGET
    fault = verdict.ending(
        None,
        judged=True,
        max_duels=None,
        duels_judged=3,
        budget_nusd=100,
        spent_nusd=99,
        fault="judge model 'x' reported 9 USD",
    )
    assert fault.status == CampaignStatus.STOPPED and fault.limit == END_LIMIT_PROVIDER
    assert "judge model 'x' reported 9 USD" in fault.reason and "PATCH" in fault.reason
    assert (
        verdict.ending(None, judged=True, max_duels=4, duels_judged=3, budget_nusd=100, spent_nusd=99, fault=None)
        is None
    )


def test_stopping_verdicts_without_a_winner():
    undecidable = verdict.stop_ending(CampaignStatus.UNDECIDABLE, None, algorithm="dctas-pc", delta=0.1, n_prompts=12)
    assert undecidable.status == CampaignStatus.UNDECIDABLE and "12 prompts" in undecidable.reason
    assert undecidable.winner is None
    cycle = verdict.stop_ending(CampaignStatus.NO_CONDORCET_WINNER, None, algorithm="dctas", delta=0.1, n_prompts=12)
    assert cycle.status == CampaignStatus.NO_CONDORCET_WINNER and cycle.winner is None


def test_judge_charges_are_capped_at_their_bound_and_a_human_fee_is_charged_per_vote():
    from service.money import ledger

    judge = {"kind": "llm", "cost": 0.001, "client": {"kind": "simulated", "model": "j"}}
    normal = ledger.judge_charge(judge, "p", None, cost=0.0005, detail=None)
    assert normal.fault is None and normal.amount_nusd == 500_000
    lying = ledger.judge_charge(judge, "p", None, cost=50.0, detail=None)
    assert lying.amount_nusd == lying.bound_nusd == 2_000_000  # both orders at 0.001 USD
    assert "reported a cost of 50 USD" in lying.fault
    assert vote_fee_nusd({"kind": "human", "fee_per_vote": 0.25}) == 250_000_000
    assert vote_fee_nusd({"kind": "llm", "fee_per_vote": 0.25}) == 0
