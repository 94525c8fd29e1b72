"""Reservations: what the budget holds back for a call or a duel before it is made.

A new duel reserves an upper bound of what it may still have to pay (:func:`reserve_duel_nusd`,
stored as ``duels.expected_cost_nusd`` while it is in flight); a pre-generated answer reserves
its call's bound in a hold (:func:`answer_reserve_nusd`, :mod:`service.money.holds`). The
bounds themselves are the price x token-limit bounds of :mod:`service.money.bounds`
(``model_bound_nusd``, ``judge_bound_nusd``); the ledger charges a call at most its bound
(:mod:`service.money.ledger`), so a reservation is never exceeded. :func:`budget_decision` is
the one check whether a new reservation fits the budget (:mod:`service.money.budget`). A duel's
plan asks both in one call, :func:`duel_budget`.
"""

from __future__ import annotations

from typing import Any, Iterable, Sequence

from algorithms.vocabulary import CampaignStatus

from ..campaigns.types import CampaignEnded, Conflict, End
from ..models import to_nusd
from ..stored_config import image_answers, judge_orders, stored
from .bounds import judge_bound_nusd, model_bound_nusd
from .budget import END_LIMIT_BUDGET, effective_budget, over_budget, reserved_nusd


def expected_model_nusd(models: Sequence[dict], i: int, j: int) -> int:
    """The two models' expected cost of one duel (their configured per-call costs)."""
    return to_nusd(float(models[i]["cost"]) + float(models[j]["cost"]))


def expected_judge_nusd(judge_spend_nusd: int, duels_done: int) -> int:
    """The next duel's expected judge cost: the mean judge spend so far, rounded up."""
    if judge_spend_nusd <= 0:
        return 0
    return -(-judge_spend_nusd // max(1, duels_done))


def expected_duel_nusd(models: Sequence[dict], i: int, j: int, judge_spend_nusd: int, duels_done: int) -> int:
    """What the budget reserves for a new duel: models plus the expected judge cost."""
    return expected_model_nusd(models, i, j) + expected_judge_nusd(judge_spend_nusd, duels_done)


def answer_reserve_nusd(model: dict, prompt: str) -> int:
    """What the budget reserves for one model call on ``prompt``: its bound (:func:`model_bound_nusd`),
    or its configured cost when none can be derived (a campaign made before bounds were required)."""
    b = model_bound_nusd(model, prompt)
    return b if b is not None else to_nusd(float(model["cost"]))


def reserve_duel_nusd(
    models: Sequence[dict],
    i: int,
    j: int,
    *,
    judge: dict,
    prompt: str,
    judge_spent_nusd: int,
    duels_done: int,
    stored_answers: Iterable[int] = (),
    stored_orders: int = 0,
) -> int:
    """What the budget reserves for a new duel: an upper bound of what it may still have to pay.

    Models ``i`` and ``j`` answer ``prompt`` once each, then the judge judges. A
    model in ``stored_answers`` takes its answer from the answer store (a STORED
    answer: it costs the duel nothing) and reserves 0; an LLM judge reserves its
    per-order bound for each of its orders except the ``stored_orders`` already in
    the verdict store. A component without a derivable bound (a campaign made
    before bounds were required) falls back to its expected cost.
    """
    free = {int(k) for k in stored_answers}
    total = sum(answer_reserve_nusd(models[k], prompt) for k in (i, j) if k not in free)
    jb = judge_bound_nusd(judge, prompt, image_answers=image_answers(models))
    if stored(judge).get("kind") in ("llm", "jury") and stored_orders > 0:
        orders = judge_orders(judge)
        left = max(0, orders - int(stored_orders))
        if jb is None:
            return total + (expected_judge_nusd(judge_spent_nusd, duels_done) if left else 0)
        return total + jb // orders * left
    total += jb if jb is not None else expected_judge_nusd(judge_spent_nusd, duels_done)
    return total


def duel_budget(
    campaign_id: int,
    campaign: Any,
    *,
    models: Sequence[dict],
    judge: dict,
    pair: tuple[int, int],
    prompt: str,
    stored_answers: Iterable[int],
    stored_orders: int,
    live: list[Any],
    held_nusd: int,
) -> tuple[int, End | Conflict | None]:
    """A new duel's reservation and whether it fits: (:func:`reserve_duel_nusd` given what the stores
    hold, :func:`budget_decision` with the duels ``live`` in flight and the ``held_nusd`` of the holds).

    ``campaign``: the locked campaign row (its budget, spend, judge spend and duels judged and failed).
    """
    i, j = pair
    expected = reserve_duel_nusd(
        models,
        i,
        j,
        judge=judge,
        prompt=prompt,
        judge_spent_nusd=campaign.judge_spend_nusd,
        duels_done=campaign.duels_judged + campaign.duels_failed,
        stored_answers=stored_answers,
        stored_orders=stored_orders,
    )
    decision = budget_decision(
        campaign_id,
        budget_nusd=campaign.budget_nusd,
        spent_nusd=campaign.spend_nusd,
        live=live,
        held_nusd=held_nusd,
        expected_nusd=expected,
    )
    return expected, decision


def budget_decision(
    campaign_id: int, *, budget_nusd: int | None, spent_nusd: int, live: list[Any], held_nusd: int, expected_nusd: int
) -> End | Conflict | None:
    """The reservation check of a new duel bounded by ``expected_nusd``.

    Over the budget with nothing in flight and nothing held: the campaign ends; over it while
    duels or pre-generation calls hold reservations: wait for them; else None (the duel may start).
    """
    reserved = reserved_nusd(live, held_nusd)
    if not over_budget(budget_nusd, spent_nusd, reserved, expected_nusd):
        return None
    if live or held_nusd:
        return Conflict(
            f"the remaining budget is reserved by {len(live)} duels in flight"
            + (" and answers being pre-generated" if held_nusd else ""),
            retry_later=True,
        )
    remaining = effective_budget(budget_nusd) - spent_nusd
    return End(
        CampaignStatus.BUDGET_EXHAUSTED,
        f"the next duel's cost bound ({expected_nusd / 1e9:.6g} USD) exceeds the "
        f"remaining budget ({remaining / 1e9:.6g} USD)",
        END_LIMIT_BUDGET if budget_nusd is not None else None,
        CampaignEnded(f"campaign {campaign_id} has ended: budget exhausted"),
    )
