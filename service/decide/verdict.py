"""Recording a verdict: whether it may count, and whether the campaign ends with it.

Pure functions over the locked campaign's and the duel's fields. The transactions
apply them in this order: :func:`refusal` (the duel or the campaign no longer takes
a verdict), the score (:func:`service.campaigns.scoring.score_of`), the policy's
record, then :func:`ending` (certification, ``max_duels``, budget, a provider fault).
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass

from algorithms.vocabulary import CampaignStatus, DuelStatus

from ..campaigns.expiry import is_stale
from ..campaigns.leases import ORPHAN_REQUESTER
from ..campaigns.limits import END_LIMIT_MAX_DUELS, END_LIMIT_PROVIDER, max_duels_reached
from ..campaigns.types import Conflict
from ..money import budget
from ..money.budget import END_LIMIT_BUDGET
from ..money.ledger import fault_reason

#: The stopping verdicts that certify no model.
NO_WINNER = (CampaignStatus.UNDECIDABLE, CampaignStatus.NO_CONDORCET_WINNER)


@dataclass(frozen=True)
class Refusal:
    """The verdict does not count: raise ``error``; ``expire``: the duel becomes expired first."""

    error: Conflict
    expire: bool = False


@dataclass(frozen=True)
class Ending:
    """The campaign ends with this verdict: :meth:`finish` ``status``, ``reason``, ``limit``;
    ``winner``: the certified model (CERTIFIED only)."""

    status: str
    reason: str
    limit: str | None = None
    winner: int | None = None


def not_pending_message(duel_id: int, status: str) -> str:
    """Why a duel in ``status`` (not pending) takes no verdict."""
    messages = {
        DuelStatus.JUDGED: "already has a verdict",
        DuelStatus.CALLING: "is still waiting for the models' answers",
        DuelStatus.EXPIRED: "expired and no longer counts",
        DuelStatus.FAILED: "failed and cannot be judged",
        DuelStatus.CANCELLED: "was cancelled: the campaign ended before it was judged",
    }
    return f"duel {duel_id} {messages.get(status, f'cannot be judged (status {status})')}"


def refusal(
    duel_id: int,
    status: str,
    requested_by: str | None,
    error: str | None,
    expires_at: dt.datetime,
    campaign_id: int,
    campaign_status: str,
    now: dt.datetime,
) -> Refusal | None:
    """Why a verdict on this duel does not count, or None when it does.

    A pending duel of a run taken over (an orphan) and a pending duel past its expiry
    become expired; a duel not pending, or of an ended campaign, is left as it is.
    """
    if status == DuelStatus.PENDING and requested_by == ORPHAN_REQUESTER:
        return Refusal(Conflict(f"duel {duel_id}: {error}"), expire=True)  # its run has another owner
    if status != DuelStatus.PENDING:
        return Refusal(Conflict(not_pending_message(duel_id, status)))
    if is_stale(expires_at, now):
        return Refusal(Conflict(f"duel {duel_id} expired at {expires_at.isoformat()} and no longer counts"), True)
    if campaign_status != CampaignStatus.RUNNING:
        return Refusal(Conflict(f"campaign {campaign_id} has ended (status {campaign_status})"))
    return None


def stop_ending(verdict: str | None, winner: int | None, algorithm: str, delta: float, n_prompts: int) -> Ending:
    """The ending of a policy whose stopping rule fired: its ``verdict`` (undecidable, no Condorcet
    winner) or else certification of ``winner``."""
    if verdict == CampaignStatus.UNDECIDABLE:
        return Ending(
            CampaignStatus.UNDECIDABLE,
            f"no model can be certified on this prompt set ({n_prompts} prompts, "
            f"sampled without replacement): no pair left can decide between the models "
            f"not shown to lose (the {algorithm} certificates at delta={delta:g})",
        )
    if verdict == CampaignStatus.NO_CONDORCET_WINNER:
        return Ending(
            CampaignStatus.NO_CONDORCET_WINNER,
            f"every model was shown to lose to another (the {algorithm} "
            f"certificates at delta={delta:g}): no Condorcet winner",
        )
    return Ending(
        CampaignStatus.CERTIFIED,
        f"certified by the {algorithm} stopping rule at delta={delta:g}",
        winner=None if winner is None else int(winner),
    )


def policy_ending(policy, algorithm: str, delta: float, n_prompts: int) -> Ending | None:
    """:func:`stop_ending` of a policy whose stopping rule fired with the scores just recorded, else None."""
    if not policy.should_stop():
        return None
    verdict = getattr(policy, "verdict", None)
    rec = None if verdict in NO_WINNER else policy.recommendation()
    winner = None if rec is None else int(rec)  # a leaderboard goal certified without one best model: None
    return stop_ending(verdict, winner, algorithm, delta, n_prompts)


def paused(fault: str) -> Ending:
    """A running campaign paused on a provider fault (``end_limit = 'provider'``; a PATCH continues it)."""
    return Ending(CampaignStatus.STOPPED, fault_reason(fault), END_LIMIT_PROVIDER)


def ending(
    stopped: Ending | None,
    judged: bool,
    max_duels: int | None,
    duels_judged: int,
    budget_nusd: int | None,
    spend_nusd: int,
    fault: str | None,
) -> Ending | None:
    """How the campaign ends once this verdict is written, or None (it goes on).

    ``stopped``: the policy's stopping rule fired (:func:`stop_ending`); ``judged``: the verdict was
    a choice (a failed judgement does not count toward ``max_duels``); ``duels_judged``,
    ``spend_nusd``: the campaign's counters with this verdict and its charges; ``fault``: the
    judge's provider fault. The first that applies wins, in this order.
    """
    if stopped is not None:
        return stopped
    if judged and max_duels_reached(max_duels, duels_judged):
        return Ending(CampaignStatus.STOPPED, f"max_duels ({max_duels}) reached", END_LIMIT_MAX_DUELS)
    if budget.budget_spent(budget_nusd, spend_nusd):
        limit = END_LIMIT_BUDGET if budget_nusd is not None else None
        return Ending(CampaignStatus.BUDGET_EXHAUSTED, "spend reached the budget", limit)
    if fault is not None:
        return paused(fault)
    return None
