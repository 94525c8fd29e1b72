"""A paid result's transaction whose connection was lost: tried again when it did not commit.

The answers and the verdict of a duel are stored (and charged) in one transaction each, after the
provider has billed the calls. When the database connection dies under that transaction (the server
restarted, a network cut, PostgreSQL's ``idle_in_transaction_session_timeout`` ending a stalled
session, SQLAlchemy then invalidating the connection), whether the commit happened is unknown. Giving
the duel up would leave what the provider billed out of the ledger; running the transaction again
blindly could charge it twice. :func:`once_committed` does neither: it waits for the database to
answer again (:data:`WAIT_S` at most), looks on a fresh connection at what the transaction writes, and

- when the lost transaction committed, takes what it wrote (:func:`store_paid`, a duel's answers or
  verdict: the duel left the state it was in before, see :func:`committed`; a pre-generated answer,
  service/campaigns/pregeneration.py: its budget hold is gone; one collected from a batch adopted after a
  take-over, service/cycle/pregen_recovery.py: the holds of its store key are gone when one outlived the
  retries, else its answer is stored);
- when it did not, runs it again (at most :data:`TRIES` times in all).

Both drivers' transactions are covered: SQLAlchemy's (a background run, a batch round, SQLite) and the
asyncpg one of an annotator's or the admin's duel on PostgreSQL (:func:`lost`). The transaction's own
statements are unchanged, so a run of it that commits is the only one that
did. A database still unreachable after :data:`WAIT_S` raises the error as before (the caller gives
the duel up; docs/reliability.md, Ledger).
"""

from __future__ import annotations

import asyncio
import logging
import time
from typing import Any, Awaitable, Callable, Protocol, TypeVar

from sqlalchemy.exc import DBAPIError

from algorithms.vocabulary import CampaignStatus, DuelStatus

from ..db import is_connection_error
from ..models import Campaign, Duel
from .tasks import in_thread
from .types import DuelOutcome


class _Deps(Protocol):
    @property
    def db(self) -> Any: ...

    @property
    def views(self) -> Any: ...


class CycleReads(Protocol):
    """What :func:`store_paid` reads through the cycle (service.cycle.service_port.HotService has it)."""

    @property
    def deps(self) -> _Deps: ...


T = TypeVar("T")

log = logging.getLogger("llmduel.campaigns")

#: How many times, in all, a paid result's transaction runs when its connection keeps being lost.
TRIES = 3
#: How long a lost transaction waits, at most, for the database to answer again before giving up.
WAIT_S = 60.0
#: The longest pause between two attempts to reach the database again.
PAUSE_MAX_S = 5.0


def lost(exc: BaseException) -> bool:
    """Whether ``exc`` says the transaction's connection was lost (SQLAlchemy invalidated it, or the
    asyncpg driver's connection broke: :func:`service.db.is_connection_error`)."""
    return (isinstance(exc, DBAPIError) and bool(exc.connection_invalidated)) or is_connection_error(exc)


def committed(stage: str, status: str, answered_at: Any, judged_at: Any) -> bool:
    """Whether a duel with these columns shows the ``stage`` ("answers" or "verdict") already written:
    its answers move it out of ``calling``; its verdict sets ``judged_at`` or moves it out of ``pending``."""
    if stage == "answers":
        return status != DuelStatus.CALLING or answered_at is not None
    return judged_at is not None or status != DuelStatus.PENDING


def stored_outcome_tx(svc: CycleReads, duel_id: int, stage: str) -> DuelOutcome | None:
    """The duel as the lost ``stage`` transaction left it when that committed; None when it did not
    (the transaction must run again). A duel deleted meanwhile: its outcome ``missing``."""
    with svc.deps.db.read() as s:
        d = s.get(Duel, duel_id)
        c = None if d is None else s.get(Campaign, d.campaign_id)
        if d is None or c is None:
            return DuelOutcome(duel_id, "missing", failed=True, error="campaign or duel deleted")
        if not committed(stage, d.status, d.answered_at, d.judged_at):
            return None
        return DuelOutcome(
            d.id,
            d.status,
            ended=c.status != CampaignStatus.RUNNING,
            failed=d.status == DuelStatus.FAILED,
            error=d.error,
            view=svc.deps.views.duel_view(d, c),
        )


async def store_paid(
    svc: CycleReads, duel_id: int, stage: str, attempt: Callable[[], Awaitable[DuelOutcome]]
) -> DuelOutcome:
    """``await attempt()`` (the duel's ``stage`` transaction); after a lost connection, its outcome as
    stored when it committed, else ``attempt()`` again (the module's rule)."""
    return await once_committed(
        attempt, lambda: in_thread(stored_outcome_tx, svc, duel_id, stage), what=f"duel {duel_id}'s {stage}"
    )


async def once_committed(
    attempt: Callable[[], Awaitable[T]], written: Callable[[], Awaitable[T | None]], *, what: str
) -> T:
    """``await attempt()`` (a paid result's transaction); after a lost connection, ``await written()``
    on a fresh one (once the database answers): its result when the lost transaction committed (not
    None), else ``attempt()`` again, :data:`TRIES` times in all."""
    for n in range(1, TRIES + 1):
        try:
            return await attempt()
        except Exception as exc:
            if not lost(exc) or n == TRIES:
                raise
            log.warning("the connection was lost under the transaction of %s; checking whether it committed", what)
            done = await _once_reachable(written, exc)
        if done is not None:
            return done
    raise AssertionError("unreachable")  # pragma: no cover - the loop returns or raises


async def _once_reachable(read: Callable[[], Awaitable[T | None]], error: Exception) -> T | None:
    """``await read()`` once the database answers again; ``error`` raised after :data:`WAIT_S` without it."""
    deadline, pause = time.monotonic() + WAIT_S, 0.1
    while True:
        try:
            return await read()
        except DBAPIError:
            if time.monotonic() + pause > deadline:
                raise error from None
        await asyncio.sleep(pause)
        pause = min(2 * pause, PAUSE_MAX_S)
