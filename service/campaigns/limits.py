"""A campaign's limits: its duel cap and run concurrency, the limit that ended it, and whether
new limits can be set or continue an ended campaign. Pure functions."""

from __future__ import annotations

from ..money.budget import END_LIMIT_BUDGET, budget_spent


def run_slots_full(run_in_flight: int, concurrency: int | None) -> bool:
    """A background run may not start another duel: ``concurrency`` of its duels are in flight."""
    return run_in_flight >= max(1, concurrency or 1)


def max_duels_reached(max_duels: int | None, judged: int, in_flight: int = 0) -> bool:
    """No further duel may start: judged plus in-flight duels reach ``max_duels``."""
    return max_duels is not None and judged + in_flight >= max_duels


END_LIMIT_MAX_DUELS = "max_duels"


END_LIMIT_PROVIDER = "provider"  # paused on a provider fault (service.money.ledger): any PATCH continues it


END_LIMITS = (END_LIMIT_BUDGET, END_LIMIT_MAX_DUELS, END_LIMIT_PROVIDER)


def limit_below_use(
    *,
    new_budget_nusd: int | None,
    spent_nusd: int,
    reserved_nusd: int,
    new_max_duels: int | None,
    duels_judged: int,
    in_flight: int = 0,
) -> str | None:
    """Why new limits cannot be set, or None.

    A budget must cover what is spent plus what the duels in flight reserved (so the
    spend never passes it), a duel cap the duels judged plus those in flight.
    """
    if new_budget_nusd is not None and new_budget_nusd < spent_nusd + reserved_nusd:
        held = (
            f" plus {reserved_nusd / 1e9:.9g} USD reserved by duels in flight and pre-generation calls"
            if reserved_nusd
            else ""
        )
        return f"budget {new_budget_nusd / 1e9:.9g} USD is below the {spent_nusd / 1e9:.9g} USD already spent{held}"
    if new_max_duels is not None and new_max_duels < duels_judged + in_flight:
        held = f" plus {in_flight} in flight" if in_flight else ""
        return f"max_duels {new_max_duels} is below the {duels_judged} duels already judged{held}"
    return None


def continue_refusal(
    status: str,
    end_limit: str | None,
    *,
    budget_raised: bool,
    max_duels_raised: bool,
    budget_nusd: int | None,
    spent_nusd: int,
    max_duels: int | None,
    duels_judged: int,
) -> str | None:
    """Why an ended campaign does not go back to running with these (new) limits, or None when it does.

    Only a campaign that ended on its budget or duel cap continues, once that limit
    was raised (one paused on a provider fault continues without raising anything) and neither limit is reached any more (the policy state is untouched,
    so the certificate's guarantee is that of one uninterrupted campaign).
    """
    if end_limit not in END_LIMITS:
        return f"the campaign ended with status {status}, not on its budget or duel cap; it cannot be continued"
    if end_limit == END_LIMIT_BUDGET and not budget_raised:
        return "the campaign ended on its budget: raise the budget to continue it"
    if end_limit == END_LIMIT_MAX_DUELS and not max_duels_raised:
        return "the campaign ended on its duel cap: raise max_duels to continue it"
    if budget_spent(budget_nusd, spent_nusd):
        return f"the budget ({budget_nusd / 1e9 if budget_nusd else 0:.9g} USD) is already spent; raise it further"
    if max_duels_reached(max_duels, duels_judged):
        return f"max_duels ({max_duels}) is already reached; raise it further"
    return None
