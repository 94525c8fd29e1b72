"""The budget: what a campaign may still spend, and the one check every path makes.

A campaign's money is ``spend`` (the sum of its charge rows, :mod:`service.money.charges`)
plus what is *reserved*: the bounds of its duels in flight (``duels.expected_cost_nusd``,
:mod:`service.money.reserve`) and the live budget holds of pre-generation calls
(:mod:`service.money.holds`). A new reservation of ``expected`` fits when::

    spend + reserved + expected <= budget        (the ledger's capacity without a budget)

:func:`over_budget` is that check (:func:`service.money.reserve.budget_decision` makes it for a
new duel and for a pre-generation hold); :func:`budget_spent` is the end condition a verdict
checks. Pure functions: plain values in, plain values out. This module imports nothing of
``service.campaigns``: the campaign rules read the ledger's capacity and the budget's end from it.
"""

from __future__ import annotations

from typing import Any, Iterable

#: What the ledger can hold: amounts are int64 nano-USD (max ~9.2e18); a campaign never
#: spends past 2**62 nano-USD (~4.6e9 USD), which leaves room for one more duel's charges.
#: A campaign without a budget has this one (docs/service.md, Budget and caps).
LEDGER_CAP_NUSD = 2**62

#: The ``end_limit`` of a campaign its budget ended (raising the budget continues it).
END_LIMIT_BUDGET = "budget"


def effective_budget(budget_nusd: int | None) -> int:
    """The campaign's budget, or the ledger's capacity when it has none."""
    return LEDGER_CAP_NUSD if budget_nusd is None else min(budget_nusd, LEDGER_CAP_NUSD)


def reserved_nusd(inflight: Iterable[Any], held_nusd: int = 0) -> int:
    """What the budget check counts as reserved besides the spend: the bounds of the duels in
    flight and not expired (``expected_cost_nusd``) plus the live budget holds of
    pre-generation calls (:mod:`service.money.holds`). Every path sums it here."""
    return sum(int(r.expected_cost_nusd) for r in inflight) + int(held_nusd)


def over_budget(budget_nusd: int | None, spend_nusd: int, reserved_nusd: int, expected_nusd: int) -> bool:
    """The budget reservation check: spend, in-flight reservations and the new duel exceed the budget."""
    return spend_nusd + reserved_nusd + expected_nusd > effective_budget(budget_nusd)


def budget_spent(budget_nusd: int | None, spend_nusd: int) -> bool:
    """An end condition: the campaign's spend reached its budget."""
    return spend_nusd >= effective_budget(budget_nusd)
