"""The hybrid judge's pool of selected duels (decisions in :mod:`.hybrid`).

A selected duel waits in the annotators' pool (``requested_by`` = the pool) with its human fee
reserved: a plan renews an annotator's lapsed lease (:func:`renew_lapsed`, never expired while
the campaign runs), an annotator asking for a duel takes one (:func:`lease_selected`), a
continued campaign revives its cancelled ones (:func:`revive_selected`). Recording the
automatic verdict, its human coin and the human vote is the vote cycle's
(:mod:`service.cycle.hybrid_verdict`).
"""

from __future__ import annotations

import datetime as dt
from types import SimpleNamespace
from typing import Any

from sqlalchemy import select, update

from algorithms.vocabulary import DuelStatus

from ..models import Campaign, Duel
from ..money import budget
from . import hybrid
from .annotator_access import ANNOTATOR_LABEL_PREFIX
from .expiry import is_stale
from .skips import POOL_REQUESTER
from .types import Conflict

#: How long a selected duel waits in the pool before a plan renews it (renewed while the campaign runs).
POOL_HOLD = dt.timedelta(days=30)
HUMAN_FEE_DETAIL = {"human_fee": True}


# ---------------------------------------------------------------- the pool
def _selected_waiting(r: Any) -> bool:
    return (r.requested_by or "").startswith(ANNOTATOR_LABEL_PREFIX)


def waits_for_human(c: Campaign, r: Any) -> bool:
    """Is in-flight duel ``r`` (``requested_by``) a selected duel of hybrid campaign ``c``? Its
    lease may have lapsed, but it is never expired: its fee stays reserved and it stays in flight."""
    return hybrid.is_hybrid(c.judge) and _selected_waiting(r)


def renew_lapsed(conn, inflight: list, now: dt.datetime) -> list:
    """Inside the plan transaction of a hybrid campaign: a selected duel whose annotator let its
    lease lapse goes back to the pool (renewed, never expired); returns ``inflight`` as the caller
    should see it."""
    out, lapsed = [], []
    for r in inflight:
        if _selected_waiting(r) and is_stale(r.expires_at, now):
            lapsed.append(int(r.id))
            r = SimpleNamespace(**{**r._asdict(), "requested_by": POOL_REQUESTER, "expires_at": now + POOL_HOLD})
        out.append(r)
    if lapsed:
        conn.execute(
            update(Duel)
            .where(Duel.id.in_(lapsed), Duel.status == DuelStatus.PENDING)
            .values(requested_by=POOL_REQUESTER, expires_at=now + POOL_HOLD)
            .execution_options(synchronize_session=False)
        )
    return out


def lease_selected(conn, duel_id: int | None, now: dt.datetime, lease: dt.timedelta) -> int:
    """Inside the plan transaction, for an annotator of a hybrid campaign: the duel it gets (one
    from the pool, its lease starting now, or its own, its lease unchanged); a retryable 409
    (raised after the commit, so the pool's renewals stay) when none waits for a human. Only a
    duel taken from the pool still has the pool's hold (longer than a lease): asking again never
    extends a lease, so one annotator cannot keep a duel (and the later duels of its pair, waiting
    behind it) past its lease."""
    if duel_id is None:
        raise Conflict("no duel of this campaign waits for a human vote yet; retry shortly", retry_later=True)
    conn.execute(
        update(Duel)
        .where(Duel.id == duel_id, Duel.expires_at > now + lease)
        .values(expires_at=now + lease)
        .execution_options(synchronize_session=False)
    )
    return duel_id


def released_values(judge: dict, now: dt.datetime) -> dict | None:
    """What a revoked annotator's pending duels become in a hybrid campaign: back to the pool."""
    if not hybrid.is_hybrid(judge):
        return None
    return {"requested_by": POOL_REQUESTER, "expires_at": now + POOL_HOLD}


def revive_selected(s, c: Campaign, budget_nusd: int | None, now: dt.datetime) -> int:
    """Inside the continue transaction of an ended hybrid campaign: the selected duels its end
    cancelled go back to the pool (their fee reserved again); returns how many.

    An end cancels the duels waiting for a human, but the judge-only duels drawn after them stay
    judged. Were the cancelled ones dropped, a continue would record those later duels without
    them: the dropped duels would be exactly those the coin sent to a human, and the pair's
    estimate (H1) would lean toward the judge. Given back, every pair's record stays its draw
    order. Raises :class:`Conflict` when the budget does not cover their fees."""
    if not hybrid.is_hybrid(c.judge):
        return 0
    rows = s.execute(
        select(Duel.id, Duel.judge_detail).where(
            Duel.campaign_id == c.id,
            Duel.status == DuelStatus.CANCELLED,
            Duel.record_seq.is_(None),
            Duel.choice.is_(None),
        )
    ).all()
    ids = [int(r.id) for r in rows if (hybrid.detail_of(r.judge_detail) or {}).get("selected")]
    if not ids:
        return 0
    fee = hybrid.fee_nusd(c.judge)
    if budget.over_budget(budget_nusd, c.spend_nusd, 0, fee * len(ids)):
        raise Conflict(
            f"campaign {c.id}: its {len(ids)} selected duels cancelled by the end wait for a human again when "
            f"it continues (a fee of {fee * len(ids) / 1e9:.9g} USD reserved); raise the budget to cover them"
        )
    s.execute(
        update(Duel)
        .where(Duel.id.in_(ids))
        .values(
            status=DuelStatus.PENDING,
            error=None,
            requested_by=POOL_REQUESTER,
            expires_at=now + POOL_HOLD,
            expected_cost_nusd=fee,
        )
        .execution_options(synchronize_session=False)
    )
    return len(ids)
