"""Whether a campaign's spend is final: no call it paid for, or may still be charged for, is under way.

A charge lands only while what reserved it still counts (docs/reliability.md, *Ledger*): a duel's
calls are charged up to its hard deadline (``duels.expires_at``; a call returning later is not
charged, :func:`service.cycle.answers.late_error`), a pre-generated answer's while its budget hold
lasts, a batch's until its collector gives up. So the spend of a campaign can still change while,
and only while, one of these is under way:

* a background run whose owner has not drained it (``run.active``,
  :func:`.expiry.run_under_way`);
* a duel whose hard deadline lies ahead, without its judge's verdict, with a call that may still be out: its models
  being called (``calling``, or ``cancelled`` by the ending before its answers were stored), or,
  with its answers stored, an automatic judge's verdict awaited (``pending`` or ``cancelled``
  without a verdict's detail: a hybrid duel selected for a human has its automatic verdict, and a
  human's vote, and its fee, is taken only while the campaign runs), also when a human's vote (the
  admin's, on a duel of an automatic judge) judged it or it expired as an orphan meanwhile: the
  judge's call is charged when it returns, and its charge row says it is back (then the duel is
  settled, a verdict refused as on a duel the ending cancelled included). A run's own duels count
  here only when its owner stopped renewing its lease before it drained (it died, or stalled past
  the lease and may still wake up and store them) or when they were orphaned by a take-over; while the owner drains, the
  run itself is under way, and once it has drained they are settled;
* a pre-generation hold that has not lapsed, or a batch still at the provider (a run's within twice
  its window and the cancellation grace: an older open one is a dead worker's; a pre-generation
  batch while it is open, at any age: a process gone's is adopted and collected by another).

:func:`unsettled` names the first of these (``None``: the spend is final). It is the campaign view's
``spend_final`` and the check of ``DELETE /v1/campaigns/{id}``, whose rows those calls would store
and charge into.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Sequence
from typing import Any

from sqlalchemy import and_, exists, func, not_, or_, select

from algorithms.vocabulary import CampaignStatus, DuelStatus

from ..models import BatchJob, BudgetHold, Campaign, Charge, Duel, utcnow
from ..money.charges import JUDGE
from ..schemas.batch_config import MAX_WINDOW_SECONDS
from .batch_jobs import CANCEL_GRACE_S, OPEN
from .expiry import run_under_way
from .hybrid import is_hybrid
from .leases import RUN_REQUESTER

#: The reasons :func:`unsettled` gives, in the order it looks.
RUN_UNDER_WAY = "its background run has not ended yet"
CALLS_OUT = "a model or judge call of its duels in flight is still under way (until its deadline)"
#: The duel statuses under which a call may still be out (the module's list).
_MAY_CALL = (DuelStatus.CALLING, DuelStatus.PENDING, DuelStatus.CANCELLED)
#: A duel answered, then judged by a human's vote (the admin's, on a duel of an automatic judge) or expired as an
#: orphan, while its automatic judge's call may still be out: it is charged when it returns (verdict.decide_verdict).
#: An answered duel's judge charge row says its judge's call is back (a verdict refused, as on a duel cancelled by
#: the ending, is charged all the same); a call charged nothing leaves none: such a duel counts until its deadline.
_DECIDED = (DuelStatus.JUDGED, DuelStatus.EXPIRED)
#: How an automatic judge's verdict names its judge (``judged_by``: ``judge:<kind>``); a vote names its voter.
_BY_JUDGE = "judge:"
#: The ``batch_jobs.phase`` of a pre-generation batch (service/campaigns/pregeneration.py).
_PREGEN_PHASE = "pregen"


def _collector_gives_up(window_seconds: float) -> dt.timedelta:
    """How long after its sending a run's batch collector has given up a batch of this window: twice the window
    and the cancellation grace, and a minute's margin."""
    return dt.timedelta(seconds=2 * window_seconds + CANCEL_GRACE_S + 60)


def _may_be_charged(campaign: Campaign, status: str, *, unanswered: bool, run_duel: bool, verdict_in: bool) -> bool:
    """Whether a duel of ``campaign`` not judged, before its deadline, can still be charged for a call.
    ``verdict_in``: its automatic verdict is recorded (a hybrid duel waiting for a human's vote)."""
    if run_duel and campaign.run_owner is None:  # the run drained (or gave its duels up): they are settled
        return False  # (an owner that still holds the run but whose lease lapsed may wake up and store them)
    if status == DuelStatus.CALLING or (status == DuelStatus.CANCELLED and unanswered):
        return True  # its models are being called
    automatic = campaign.judge.get("kind") != "human"
    if status in _DECIDED:  # a vote judged it, or it expired as an orphan, while its judge may still be deciding
        return automatic and not is_hybrid(campaign.judge)  # (a hybrid duel takes no vote before its verdict)
    if verdict_in and is_hybrid(campaign.judge):  # its automatic verdict is in: what is left is a human's vote,
        return False  # never taken (nor its fee charged) once the campaign ended; its pool hold is no call's deadline
    return automatic  # its answers are in: an automatic judge may be deciding


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
            Duel.judge_detail.is_not(None),
        )
        .where(
            Duel.campaign_id.in_(list(by_id)),
            Duel.expires_at > now,
            # its models' calls may be out, or, answered, its judge's call is not back (charged: its charge row)
            or_(Duel.answered_at.is_(None), ~exists().where(Charge.duel_id == Duel.id, Charge.kind == JUDGE)),
            or_(
                and_(Duel.status.in_([str(x) for x in _MAY_CALL]), Duel.judged_at.is_(None)),
                and_(
                    Duel.status.in_([str(x) for x in _DECIDED]),
                    Duel.answered_at.is_not(None),
                    not_(func.coalesce(Duel.judged_by, "").startswith(_BY_JUDGE)),
                ),
            ),
        )
        .distinct()
    ).all()
    for cid, status, unanswered, run_duel, verdict_in in duels:
        if out[cid] is None and _may_be_charged(
            by_id[cid], status, unanswered=bool(unanswered), run_duel=bool(run_duel), verdict_in=bool(verdict_in)
        ):
            out[cid] = CALLS_OUT
    # a run's batch collector gives up within its window plus the cancellation grace: an open row older than
    # that is a dead worker's, and blocks nothing (else a crash mid-batch would make the campaign undeletable);
    # a pre-generation batch a process gone left open is adopted and collected, and its answers charged, by any
    # process's heartbeat at any age (service/cycle/pregen_recovery.py), which closes it: it counts while open
    oldest = now - _collector_gives_up(MAX_WINDOW_SECONDS)
    open_batches: dict[int, int] = {}
    for cid, created, pregen in s.execute(
        select(BatchJob.campaign_id, BatchJob.created_at, BatchJob.phase == _PREGEN_PHASE).where(
            BatchJob.campaign_id.in_(list(by_id)),
            BatchJob.status.in_(OPEN),
            or_(BatchJob.created_at > oldest, BatchJob.phase == _PREGEN_PHASE),
        )
    ).all():
        window = float((by_id[cid].batch or {}).get("window_seconds") or MAX_WINDOW_SECONDS)
        if pregen or created > now - _collector_gives_up(window):
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
    """The campaign view's ``spend_final``: the campaign has ended, nothing of it can change its spend, and
    ``campaign`` (as the caller read it) shows that spend."""
    return spend_final_of(s, [campaign], clock)[campaign.id]


def spend_final_of(s: Any, campaigns: Sequence[Campaign], clock: dt.datetime) -> dict[int, bool]:
    """:func:`spend_final` of each of ``campaigns`` (a page of the list), in at most four queries: the running
    ones cost none.

    A read transaction of PostgreSQL reads each statement at its own snapshot: a call stored and charged after
    the caller read ``campaigns`` and before the queries above finds nothing under way, yet the spend the caller
    holds is not the final one. So the spend is read again once nothing can change it: final only if unchanged."""
    ended = [c for c in campaigns if c.status != CampaignStatus.RUNNING]
    left = _unsettled_many(s, ended, clock)
    settled = [c.id for c in ended if left[c.id] is None]
    spend_now = (
        dict(s.execute(select(Campaign.id, Campaign.spend_nusd).where(Campaign.id.in_(settled))).all())
        if settled
        else {}
    )
    return {c.id: c.id in spend_now and spend_now[c.id] == c.spend_nusd for c in campaigns}
