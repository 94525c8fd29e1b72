"""Provider rate limits shared through the database (docs/clients-and-judges.md, *Rate limits*).

:class:`DatabaseRateLimiter` is the :class:`service.clients.ratelimit.RateLimiter` of a
running service: every worker process and every campaign that calls a provider with the
same credential (base URL and API key) counts against one quota, because the count lives
in the database, not in a process.

**The rule.** A request may be sent at time ``t`` when, counting it, the credential's
requests sent in ``(t - 60 s, t]`` are at most ``rpm`` and their tokens at most ``tpm``,
and ``t`` is past the ``Retry-After`` of the provider's last 429 on that credential. The
window is a sliding log (one row per request in ``rate_limit_events``), so the bound
holds for *every* 60-second window, not only aligned minutes (a token bucket of the same
size would let up to twice the quota through a sliding minute). A request's tokens are
its estimate (input at 4 bytes per token plus ``max_tokens``) until the provider reports
its usage (:meth:`settle`).

**Atomicity.** The check and the insert run in one write transaction holding the
credential's row (``SELECT ... FOR UPDATE`` on PostgreSQL; SQLite serialises writers with
``BEGIN IMMEDIATE``), so two workers cannot both take the last slot. Clocks: the times
are the database's (:meth:`service.db.Database.clock`, read in the same transaction), so
workers on hosts whose clocks disagree still share one window.

A request that cannot be sent yet waits (``asyncio.sleep``, at most
:data:`MAX_POLL_S` at a time) and asks again; the model call's own deadline still
applies, so a call that waits past its reservation is abandoned as failed and never
charged. After each wait it asks the call's send guard
(:data:`service.clients.ratelimit.SEND_GUARD`): a call whose campaign ended or whose duel
was cancelled meanwhile is dropped unsent, within :data:`MAX_POLL_S` of the end, and
takes no slot.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Awaitable, Callable

import anyio
from sqlalchemy import delete, func, select, update
from sqlalchemy.dialects.postgresql import insert as pg_insert
from sqlalchemy.dialects.sqlite import insert as sqlite_insert

from .clients.ratelimit import WINDOW_S, Quota, check_still_wanted
from .db import Database
from .models import RateLimitEvent, RateLimitKey

log = logging.getLogger("llmduel.ratelimits")

#: The longest single wait before asking the database again.
MAX_POLL_S = 2.0


def wait_needed(
    now: float, blocked_until: float, events: list[tuple[float, int]], quota: Quota, *, tokens: int
) -> float:
    """Seconds to wait before one more request of ``tokens`` fits (0: send now).

    ``events``: the ``(at, tokens)`` of the requests in the window, oldest first. A request
    larger than ``tpm`` on its own is counted as ``tpm`` (it waits for an empty window
    instead of forever).
    """
    wait = max(0.0, blocked_until - now)
    if quota.rpm is not None and len(events) + 1 > quota.rpm:
        # the oldest requests must leave the window until len + 1 <= rpm
        leave = events[len(events) + 1 - quota.rpm - 1][0]
        wait = max(wait, leave + WINDOW_S - now)
    if quota.tpm is not None:
        need = min(tokens, quota.tpm)
        used = sum(t for _, t in events)
        for at, t in events:
            if used + need <= quota.tpm:
                break
            used -= t
            wait = max(wait, at + WINDOW_S - now)
    return max(0.0, wait)


class DatabaseRateLimiter:
    """Shared rpm/tpm quotas in ``rate_limit_keys`` and ``rate_limit_events``."""

    def __init__(
        self,
        db: Database,
        *,
        clock: Callable[[], float] | None = None,
        sleep: Callable[[float], Awaitable[object]] | None = None,
    ) -> None:
        self.db = db
        self.clock = clock  # None: the database's clock (tests pass their own)
        self.sleep = sleep or asyncio.sleep
        self.waits = 0  # times a request had to wait (tests and logs)

    # ------------------------------------------------------------ the transaction
    def _lock(self, s, key: str) -> RateLimitKey:
        ins = pg_insert if self.db.engine.dialect.name == "postgresql" else sqlite_insert
        s.execute(ins(RateLimitKey).values(key=key, blocked_until=0.0).on_conflict_do_nothing())
        return s.execute(select(RateLimitKey).where(RateLimitKey.key == key).with_for_update()).scalar_one()

    def try_acquire(self, quota: Quota, tokens: int) -> tuple[int | None, float]:
        """One attempt: ``(slot id, 0)`` when the request was counted, ``(None, wait)`` when not."""
        with self.db.write() as s:
            row = self._lock(s, quota.key)
            now = self._now(s)
            s.execute(
                delete(RateLimitEvent).where(RateLimitEvent.key == quota.key, RateLimitEvent.at <= now - WINDOW_S)
            )
            events = [
                (float(at), int(t))
                for at, t in s.execute(
                    select(RateLimitEvent.at, RateLimitEvent.tokens)
                    .where(RateLimitEvent.key == quota.key)
                    .order_by(RateLimitEvent.at, RateLimitEvent.id)
                ).all()
            ]
            wait = wait_needed(now, float(row.blocked_until), events, quota, tokens=tokens)
            if wait > 0:
                return None, wait
            event = RateLimitEvent(key=quota.key, at=now, tokens=int(min(tokens, quota.tpm or tokens)))
            s.add(event)
            s.flush()
            return int(event.id), 0.0

    def _settle(self, slot: int, tokens: int) -> None:
        with self.db.write() as s:
            s.execute(update(RateLimitEvent).where(RateLimitEvent.id == slot).values(tokens=max(0, int(tokens))))

    def _now(self, s) -> float:
        """Seconds since the epoch on the database's clock (or the clock the limiter was given)."""
        return self.clock() if self.clock is not None else self.db.clock(s).timestamp()

    def _block(self, quota: Quota, seconds: float) -> None:
        with self.db.write() as s:
            row = self._lock(s, quota.key)
            row.blocked_until = max(float(row.blocked_until), self._now(s) + max(0.0, float(seconds)))

    def window(self, key: str) -> tuple[int, int]:
        """(requests, tokens) of ``key`` in the last minute (the dashboard and tests)."""
        with self.db.read() as s:
            n, t = s.execute(
                select(func.count(RateLimitEvent.id), func.coalesce(func.sum(RateLimitEvent.tokens), 0)).where(
                    RateLimitEvent.key == key, RateLimitEvent.at > self._now(s) - WINDOW_S
                )
            ).one()
        return int(n), int(t)

    # ------------------------------------------------------------ RateLimiter
    async def acquire(self, quota: Quota, tokens: int) -> int:
        while True:
            slot, wait = await anyio.to_thread.run_sync(self.try_acquire, quota, tokens)
            if slot is not None:
                return slot
            self.waits += 1
            await self.sleep(min(wait, MAX_POLL_S))
            await check_still_wanted()  # a call queued when its campaign ends is dropped, never sent

    async def settle(self, slot: int, tokens: int | None) -> None:
        if tokens is not None:
            await anyio.to_thread.run_sync(self._settle, slot, tokens)

    async def block(self, quota: Quota, seconds: float) -> None:
        log.warning("rate limit: provider answered 429; credential %s waits %.1fs", quota.key[:8], seconds)
        await anyio.to_thread.run_sync(self._block, quota, seconds)
