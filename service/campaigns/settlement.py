"""Whether a campaign's spend is final: no call it paid for, or may still be charged for, is under way.

A charge lands only while what reserved it still counts (docs/reliability.md, *Ledger*): a duel's
calls are charged up to its hard deadline (``duels.expires_at``; a call returning later is not
charged, :func:`service.cycle.answers.late_error`), a pre-generated answer's while its budget hold
lasts, a batch's until its collector gives up. So the spend of a campaign can still change while,
and only while, one of these is under way:

* a background run whose owner has not drained it (``run.active``,
  :func:`.expiry.run_under_way`);
* a duel whose hard deadline lies ahead, not judged, with a call that may still be out: its models
  being called (``calling``, or ``cancelled`` by the ending before its answers were stored), or,
  with its answers stored, an automatic judge's verdict awaited (``pending`` or ``cancelled``;
  a human's vote is not taken on a cancelled duel). A run's own duels count here only when its owner
  stopped renewing its lease before it drained (it died, or stalled past the lease and may still
  wake up and store them) or when they were orphaned by a take-over; while the owner drains, the
  run itself is under way, and once it has drained they are settled;
* a pre-generation hold that has not lapsed, or a batch still at the provider (within twice its
  window and the cancellation grace: an older open batch is a dead worker's).

:func:`unsettled` names the first of these (``None``: the spend is final). It is the campaign view's
``spend_final`` and the check of ``DELETE /v1/campaigns/{id}``, whose rows those calls would store
and charge into.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Sequence
from typing import Any

from sqlalchemy import and_, func, or_, select

from algorithms.vocabulary import CampaignStatus, DuelStatus

from ..models import BatchJob, BudgetHold, Campaign, Duel, utcnow
from ..schemas.batch_config import MAX_WINDOW_SECONDS
from .batch_jobs import CANCEL_GRACE_S, OPEN
from .expiry import run_under_way
from .leases import RUN_REQUESTER

#: The reasons :func:`unsettled` gives, in the order it looks.
RUN_UNDER_WAY = "its background run has not ended yet"


def _calls_out(campaign: Campaign, now: dt.datetime) -> Any:
    """The first duel of ``campaign`` with a call that may still be charged at ``now`` (the module's list),
    asked once its run is not under way."""
    may_call = [
        Duel.status == DuelStatus.CALLING,
        and_(Duel.status == DuelStatus.CANCELLED, Duel.answered_at.is_(None)),
    ]
    if campaign.judge.get("kind") != "human":  # an automatic judge may be deciding a duel whose answers are in
        may_call.append(Duel.status.in_([DuelStatus.PENDING, DuelStatus.CANCELLED]))
    q = select(Duel.id).where(
        Duel.campaign_id == campaign.id, Duel.expires_at > now, Duel.judged_at.is_(None), or_(*may_call)
    )
    if campaign.run_owner is None:  # the run drained (or gave its duels up, or never ran): its duels are settled
        q = q.where(or_(Duel.requested_by.is_(None), Duel.requested_by != RUN_REQUESTER))
    # else its owner's lease lapsed before it drained: the owner may still wake up and store them
    return q.limit(1)


def unsettled(s: Any, campaign: Campaign, clock: dt.datetime) -> str | None:
    """What of ``campaign`` can still change its spend, in words, or None when its spend is final.

    ``clock``: the database's (:meth:`service.db.Database.clock`), which times the run's lease; duel
    deadlines and holds are compared with this process's clock, as the process that stores a call's
    result compares them."""
    if run_under_way(campaign.run_active, campaign.run_owner, campaign.run_lease_expires_at, clock):
        return RUN_UNDER_WAY
    now = utcnow()
    if s.scalar(_calls_out(campaign, now)) is not None:
        return "a model or judge call of its duels in flight is still under way (until its deadline)"
    # a batch's collector gives up within its window plus the cancellation grace: an open row older than
    # that is a dead worker's, and blocks nothing (else a crash mid-batch would make the campaign undeletable)
    window = float((campaign.batch or {}).get("window_seconds") or MAX_WINDOW_SECONDS)
    since = now - dt.timedelta(seconds=2 * window + CANCEL_GRACE_S + 60)
    batches = s.scalar(
        select(func.count()).where(
            BatchJob.campaign_id == campaign.id, BatchJob.status.in_(OPEN), BatchJob.created_at > since
        )
    )
    if batches:
        return f"{batches} of its batches are still at the provider (submitted, not yet collected or cancelled)"
    holds = s.scalar(select(func.count()).where(BudgetHold.campaign_id == campaign.id, BudgetHold.expires_at > now))
    if holds:
        return f"{holds} of its model calls (pre-generated answers) are under way"
    return None


def spend_final(s: Any, campaign: Campaign, clock: dt.datetime) -> bool:
    """The campaign view's ``spend_final``: the campaign has ended and nothing of it can change its spend."""
    return campaign.status != CampaignStatus.RUNNING and unsettled(s, campaign, clock) is None


def spend_final_of(s: Any, campaigns: Sequence[Campaign], clock: dt.datetime) -> dict[int, bool]:
    """:func:`spend_final` of each of ``campaigns`` (a page of the list: the running ones cost no query)."""
    return {c.id: spend_final(s, c, clock) for c in campaigns}
