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

from sqlalchemy import func, select

from algorithms.vocabulary import CampaignStatus, DuelStatus

from ..models import BatchJob, BudgetHold, Campaign, Duel, utcnow
from ..schemas.batch_config import MAX_WINDOW_SECONDS
from .batch_jobs import CANCEL_GRACE_S, OPEN
from .expiry import run_under_way
from .leases import RUN_REQUESTER

#: The reasons :func:`unsettled` gives, in the order it looks.
RUN_UNDER_WAY = "its background run has not ended yet"
CALLS_OUT = "a model or judge call of its duels in flight is still under way (until its deadline)"
#: The duel statuses under which a call may still be out (the module's list).
_MAY_CALL = (DuelStatus.CALLING, DuelStatus.PENDING, DuelStatus.CANCELLED)


def _may_be_charged(campaign: Campaign, status: str, unanswered: bool, run_duel: bool) -> bool:
    """Whether a duel of ``campaign`` not judged, before its deadline, can still be charged for a call."""
    if run_duel and campaign.run_owner is None:  # the run drained (or gave its duels up): they are settled
        return False  # (an owner that still holds the run but whose lease lapsed may wake up and store them)
    if status == DuelStatus.CALLING or (status == DuelStatus.CANCELLED and unanswered):
        return True  # its models are being called
    return campaign.judge.get("kind") != "human"  # its answers are in: an automatic judge may be deciding


def _unsettled_many(s: Any, campaigns: Sequence[Campaign], clock: dt.datetime) -> dict[int, str | None]:
    """:func:`unsettled` of each of ``campaigns``, in three queries whatever their number."""
    out: dict[int, str | None] = {}
    rest = []
    for c in campaigns:
        under_way = run_under_way(c.run_active, c.run_owner, c.run_lease_expires_at, clock)
        out[c.id] = RUN_UNDER_WAY if under_way else None
        if not under_way:
            rest.append(c)
    if not rest:
        return out
    by_id = {c.id: c for c in rest}
    now = utcnow()
    duels = s.execute(
        select(
            Duel.campaign_id,
            Duel.status,
            Duel.answered_at.is_(None),
            func.coalesce(Duel.requested_by, "") == RUN_REQUESTER,
        )
        .where(
            Duel.campaign_id.in_(list(by_id)),
            Duel.status.in_([str(x) for x in _MAY_CALL]),
            Duel.expires_at > now,
            Duel.judged_at.is_(None),
        )
        .distinct()
    ).all()
    for cid, status, unanswered, run_duel in duels:
        if out[cid] is None and _may_be_charged(by_id[cid], status, bool(unanswered), bool(run_duel)):
            out[cid] = CALLS_OUT
    # a batch's collector gives up within its window plus the cancellation grace: an open row older than
    # that is a dead worker's, and blocks nothing (else a crash mid-batch would make the campaign undeletable)
    oldest = now - dt.timedelta(seconds=2 * MAX_WINDOW_SECONDS + CANCEL_GRACE_S + 60)
    open_batches: dict[int, int] = {}
    for cid, created in s.execute(
        select(BatchJob.campaign_id, BatchJob.created_at).where(
            BatchJob.campaign_id.in_(list(by_id)), BatchJob.status.in_(OPEN), BatchJob.created_at > oldest
        )
    ).all():
        window = float((by_id[cid].batch or {}).get("window_seconds") or MAX_WINDOW_SECONDS)
        if created > now - dt.timedelta(seconds=2 * window + CANCEL_GRACE_S + 60):
            open_batches[cid] = open_batches.get(cid, 0) + 1
    holds = dict(
        s.execute(
            select(BudgetHold.campaign_id, func.count())
            .where(BudgetHold.campaign_id.in_(list(by_id)), BudgetHold.expires_at > now)
            .group_by(BudgetHold.campaign_id)
        ).all()
    )
    for cid in by_id:
        if out[cid] is None and open_batches.get(cid):
            out[cid] = (
                f"{open_batches[cid]} of its batches are still at the provider (submitted, not yet collected or "
                "cancelled)"
            )
        if out[cid] is None and holds.get(cid):
            out[cid] = f"{holds[cid]} of its model calls (pre-generated answers) are under way"
    return out


def unsettled(s: Any, campaign: Campaign, clock: dt.datetime) -> str | None:
    """What of ``campaign`` can still change its spend, in words, or None when its spend is final.

    ``clock``: the database's (:meth:`service.db.Database.clock`), which times the run's lease; duel
    deadlines and holds are compared with this process's clock, as the process that stores a call's
    result compares them."""
    return _unsettled_many(s, [campaign], clock)[campaign.id]


def spend_final(s: Any, campaign: Campaign, clock: dt.datetime) -> bool:
    """The campaign view's ``spend_final``: the campaign has ended and nothing of it can change its spend."""
    return campaign.status != CampaignStatus.RUNNING and unsettled(s, campaign, clock) is None


def spend_final_of(s: Any, campaigns: Sequence[Campaign], clock: dt.datetime) -> dict[int, bool]:
    """:func:`spend_final` of each of ``campaigns`` (a page of the list), in at most three queries: the running
    ones cost none."""
    ended = [c for c in campaigns if c.status != CampaignStatus.RUNNING]
    left = _unsettled_many(s, ended, clock)
    return {c.id: c.status != CampaignStatus.RUNNING and left[c.id] is None for c in campaigns}
