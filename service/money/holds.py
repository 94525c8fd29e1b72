"""Budget holds: the budget reserved by model calls that are not a duel's (pre-generation).

A duel reserves the bound of what it may still pay in its own row
(``duels.expected_cost_nusd``, counted while it is in flight and not expired). A
pre-generated answer (:mod:`service.campaigns.pregeneration`) has no duel: its
call's bound is held in a ``budget_holds`` row instead. The budget check of every
path counts both::

    spend + (reservations of the duels in flight) + (live holds) + new <= budget

* a hold is made before the call, in a transaction holding the campaign's row lock
  (:func:`take_hold`), only when it fits, so concurrent planners and pre-generators,
  in any process, see each other's reservations;
* it is deleted in the transaction that stores and charges the answer (the charge
  replaces it atomically), or when the call fails;
* it counts only while ``expires_at`` (the call expiry, as for a duel still being
  answered) is in the future: a process that died mid-call does not hold the budget
  for longer than that.

Holds are taken only by pre-generation: the plan reads a campaign's holds only when the
stores say it pre-generates answers (``service.campaigns.store_lookup.DuelStores.pregenerated``),
to save a round trip; a new kind of hold must widen that flag.
"""

from __future__ import annotations

import datetime as dt

from sqlalchemy import bindparam, delete, func, insert, select

from ..models import BudgetHold

H = BudgetHold.__table__.c

PREGENERATION = "pregeneration"


#: The live holds of a campaign (one indexed range read); also compiled for the asyncpg driver.
HELD = select(func.coalesce(func.sum(H.amount_nusd), 0).label("held")).where(
    H.campaign_id == bindparam("cid"), H.expires_at > bindparam("now")
)


def held_nusd(conn, campaign_id: int, now: dt.datetime) -> int:
    """What a campaign's live holds reserve (nano-USD), read in the caller's transaction."""
    return int(conn.execute(HELD, {"cid": campaign_id, "now": now}).scalar_one())


def take_hold(
    conn,
    campaign_id: int,
    *,
    amount_nusd: int,
    now: dt.datetime,
    expires_at: dt.datetime,
    model_index: int | None = None,
    key: str | None = None,
) -> int:
    """Insert a hold (the caller holds the campaign's row lock and checked that it fits); its id.

    Expired holds of the campaign are deleted on the way (they no longer count anyway).
    """
    conn.execute(
        delete(BudgetHold)
        .where(BudgetHold.campaign_id == campaign_id, BudgetHold.expires_at <= now)
        .execution_options(synchronize_session=False)
    )
    return int(
        conn.execute(
            insert(BudgetHold)
            .values(
                campaign_id=campaign_id,
                amount_nusd=amount_nusd,
                purpose=PREGENERATION,
                model_index=model_index,
                key=key,
                created_at=now,
                expires_at=expires_at,
            )
            .returning(BudgetHold.id)
        ).scalar_one()
    )


def hold_live(conn, hold_id: int, now: dt.datetime) -> bool:
    """Whether a hold still counts against the budget (it exists and has not expired)."""
    return conn.execute(select(H.id).where(H.id == hold_id, H.expires_at > now)).scalar_one_or_none() is not None


def hold_exists(conn, hold_id: int) -> bool:
    """Whether a hold is still there, expired or not (a transaction that charges its answer drops it)."""
    return conn.execute(select(H.id).where(H.id == hold_id)).scalar_one_or_none() is not None


def drop_hold(conn, hold_id: int) -> None:
    """Release a hold (its answer was charged, or its call failed)."""
    conn.execute(delete(BudgetHold).where(BudgetHold.id == hold_id).execution_options(synchronize_session=False))


def key_held(conn, campaign_id: int, key: str, until: dt.datetime) -> bool:
    """Whether a hold of one answer's call, by its store key, is there and runs past ``until`` (an expired one
    may be deleted by any :func:`take_hold` of the campaign)."""
    q = select(H.id).where(H.campaign_id == campaign_id, H.key == key, H.expires_at > until).limit(1)
    return conn.execute(q).scalar_one_or_none() is not None


def drop_holds_of_key(conn, campaign_id: int, key: str) -> None:
    """Release the holds of one answer's call by its store key (a batch adopted from a process gone is
    charged without the hold id only that process knew, service/cycle/pregen_recovery.py)."""
    conn.execute(
        delete(BudgetHold)
        .where(BudgetHold.campaign_id == campaign_id, BudgetHold.key == key)
        .execution_options(synchronize_session=False)
    )
