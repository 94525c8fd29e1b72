"""Planning a duel: who may, whether the campaign ends or waits, what the new duel is.

Every function here is pure: it takes the locked campaign's fields and the
campaign's in-flight duels (rows with ``id``, ``model_i``, ``model_j``,
``expected_cost_nusd``, ``expires_at``, ``requested_by``) and returns a decision.
The order the transactions apply them in is the order of this module:
:func:`access_refusal`, :func:`run_refusal`, :func:`split_stale`,
:func:`cap_decision`, :func:`no_pair_error`, :func:`service.money.reserve.budget_decision`,
:func:`new_duel_columns`.
"""

from __future__ import annotations

import datetime as dt
from typing import Any, Iterable

from algorithms.vocabulary import CampaignStatus, DuelStatus

from ..campaigns.expiry import is_stale
from ..campaigns.leases import ORPHAN_REQUESTER, RUN_REQUESTER
from ..campaigns.limits import END_LIMIT_MAX_DUELS, max_duels_reached, run_slots_full
from ..campaigns.types import CampaignEnded, Conflict, DomainError, End, Forbidden


def access_refusal(campaign_id: int, status: str, judge_kind: str | None, principal: Any) -> DomainError | None:
    """Why ``principal`` (None: a background run) may not plan a duel of this campaign, or None."""
    if principal is not None and not principal.can_access(campaign_id):
        return Forbidden("this token does not give access to this campaign")
    if status != CampaignStatus.RUNNING:
        return Conflict(f"campaign {campaign_id} has ended (status {status})")
    if (
        principal is not None and not principal.admin and judge_kind not in ("human", "hybrid")
    ):  # hybrid: annotators take its pool
        return Forbidden("annotators can only request duels of human-judged campaigns")
    return None


def run_refusal(c: Any, owner_id: str, inflight: Iterable[Any], now: dt.datetime) -> DomainError | None:
    """Why a background run may not start a duel now (``c``: the campaign's ``run_*`` fields), or None.

    The run's live duels in ``inflight`` fill its ``run_concurrency`` slots.
    """
    if not c.run_active:
        return Conflict("the run was stopped")
    if c.run_owner != owner_id:  # fencing: the lease went to another process
        return Conflict("the run is owned by another process")
    if c.run_remaining is not None and c.run_remaining <= 0:
        return Conflict("the run reached its max_duels")  # the loop ends; run_active drops later
    running = sum(1 for r in inflight if r.requested_by == RUN_REQUESTER and not is_stale(r.expires_at, now))
    if run_slots_full(running, c.run_concurrency):
        return Conflict(f"{running} duels of the run are in flight", retry_later=True)
    return None


def split_stale(inflight: Iterable[Any], now: dt.datetime) -> tuple[list[int], list[Any]]:
    """(ids of the in-flight duels past their expiry, to expire; the live ones)."""
    stale, live = [], []
    for r in inflight:
        (stale if is_stale(r.expires_at, now) else live).append(r)
    return [int(r.id) for r in stale], live


def cap_decision(campaign_id: int, max_duels: int | None, duels_judged: int, live: list[Any]) -> End | Conflict | None:
    """``max_duels`` against the judged duels and the live in-flight ones (orphans never count).

    Reached with nothing in flight: the campaign ends (:class:`End`); reached counting duels in
    flight: wait for them (a retryable :class:`Conflict`); else None.
    """
    counting = [r for r in live if r.requested_by != ORPHAN_REQUESTER]
    if not max_duels_reached(max_duels, duels_judged, len(counting)):
        return None
    if counting:
        return Conflict(
            f"max_duels ({max_duels}) is reached counting the {len(counting)} duels in flight", retry_later=True
        )
    return End(
        CampaignStatus.STOPPED,
        f"max_duels ({max_duels}) reached",
        END_LIMIT_MAX_DUELS,
        CampaignEnded(f"campaign {campaign_id} has ended: max_duels ({max_duels}) reached"),
    )


def no_pair_error(in_flight: int, held: int, why: str) -> Conflict:
    """Without replacement, when the policy has no pair left: wait for the ``in_flight`` duels and
    the ``held`` judged ones (outcomes waiting for an earlier position), or nothing is left at all."""
    if in_flight or held:
        return Conflict(
            f"every useful pair is exhausted counting the {in_flight + held} "
            "duels in flight or waiting for an earlier position; retry once they settle",
            retry_later=True,
        )
    return Conflict(f"no pair is available and nothing is in flight ({why})")


def new_duel_columns(
    campaign_id: int,
    *,
    number: int,
    pair: tuple[int, int],
    draw: tuple[int, bool],
    prompt: str,
    reserved_nusd: int,
    select_seq: int,
    pending: list,
    requested_by: str,
    now: dt.datetime,
    expires_at: dt.datetime,
) -> dict[str, Any]:
    """The columns of a newly planned duel (status ``calling``), for every path that inserts one.

    Columns left out are NULL until the answers and the verdict arrive.
    """
    (i, j), (prompt_index, a_is_i) = pair, draw
    return dict(
        campaign_id=campaign_id,
        number=number,
        model_i=i,
        model_j=j,
        a_is_i=a_is_i,
        prompt_index=prompt_index,
        prompt=prompt,
        status=DuelStatus.CALLING,
        counted=False,
        cost_nusd=0,
        expected_cost_nusd=reserved_nusd,
        select_seq=select_seq,
        pending_at_select=pending,
        requested_by=requested_by,
        created_at=now,
        expires_at=expires_at,
    )
