"""Per-annotator request limits: each annotator token may make ``LLMDUEL_ANNOTATOR_REQUESTS_PER_MINUTE``
requests a minute (a token bucket of that size, refilled evenly), API routes and voting-page
routes alike; beyond, 429 with ``Retry-After``. The admin key is not limited.

**Shared.** The bucket lives in the database (``annotator_request_buckets``, one row per
annotator), so every worker process of ``llmduel serve --workers N`` and every host on one
PostgreSQL database count against the one limit. Each request takes a token in one statement
(``INSERT ... ON CONFLICT DO UPDATE ... WHERE`` a token is there), which locks the annotator's
row on PostgreSQL (SQLite serialises writers with ``BEGIN IMMEDIATE``), timed by the database's
clock (as :meth:`service.db.Database.clock`), so two processes cannot both take the last token
and hosts whose clocks disagree share one refill.

**Fast path.** A process remembers, per annotator, until when the shared bucket told it it
would stay empty, and refuses locally until then without asking the database. It only ever
refuses: a bucket refills at ``per_minute / 60`` tokens a second whatever other processes do,
so no token can exist before that time, and the local path cannot admit a request the shared
bucket would refuse. A flooding annotator costs one database write per refill interval per
process, not one per request.
"""

from __future__ import annotations

import math
import time
from typing import Callable

import anyio
from sqlalchemy import text

from ..db import Database

MESSAGE = "too many requests from this annotator token (LLMDUEL_ANNOTATOR_REQUESTS_PER_MINUTE); retry later"


def refill(tokens: float, last: float, now: float, *, capacity: float, rate: float) -> float:
    """The bucket's tokens at ``now``, from ``tokens`` at ``last`` (a clock step back adds nothing)."""
    return min(capacity, tokens + max(0.0, now - last) * rate)


class AnnotatorRequestLimiter:
    """One token bucket per annotator id in ``annotator_request_buckets``: ``per_minute``
    requests of burst, ``per_minute / 60`` a second, shared by every process on the database."""

    def __init__(
        self,
        db: Database,
        per_minute: int,
        *,
        local_clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.db = db
        self.capacity = float(per_minute)
        self.rate = per_minute / 60.0
        self.local_clock = local_clock
        self._empty_until: dict[int, float] = {}  # annotator id -> local time before which its bucket is empty
        self.asked = 0  # database transactions (tests)

    def take(self, annotator_id: int) -> float | None:
        """Count one request: None when allowed, else the seconds until the next one can be."""
        here = self.local_clock()
        until = self._empty_until.get(annotator_id)
        if until is not None:
            if here < until:
                return until - here
            del self._empty_until[annotator_id]
        wait = self._take_shared(annotator_id)
        if wait is not None:
            if len(self._empty_until) > 100_000:  # bounded memory: forget the ones already past
                self._empty_until = {k: v for k, v in self._empty_until.items() if v > here}
            self._empty_until[annotator_id] = here + wait
        return wait

    async def take_async(self, annotator_id: int) -> float | None:
        """:meth:`take` off the event loop when it must ask the database."""
        until = self._empty_until.get(annotator_id)
        if until is not None and self.local_clock() < until:
            return until - self.local_clock()
        return await anyio.to_thread.run_sync(self.take, annotator_id)

    def _take_shared(self, annotator_id: int) -> float | None:
        self.asked += 1
        pg = self.db.engine.dialect.name == "postgresql"
        take = TAKE_PG if pg else TAKE_SQLITE
        params = {"id": annotator_id, "cap": self.capacity, "rate": self.rate}
        with self.db.write() as s:
            if s.execute(take, params).first() is not None:
                return None  # one statement: the row locked, refilled and taken, or made full less one
            tokens, last, now = s.execute(READ_PG if pg else READ_SQLITE, params).one()
            return (
                1.0 - refill(float(tokens), float(last), float(now), capacity=self.capacity, rate=self.rate)
            ) / self.rate


#: The database's clock in seconds since the epoch (service.db.Database.clock).
_NOW_PG = "extract(epoch from clock_timestamp())"
_NOW_SQLITE = "((julianday('now') - 2440587.5) * 86400.0)"
#: Take a token: insert the bucket full less one, or refill and take one when at least one is there
#: (the ``WHERE`` of ``DO UPDATE``: no row comes back when the bucket is empty). ``excluded.at`` is
#: the clock read once for the statement; a clock step back refills nothing.
_TAKE = """
INSERT INTO annotator_request_buckets AS b (annotator_id, tokens, at) VALUES (:id, :cap - 1, {now})
ON CONFLICT (annotator_id) DO UPDATE
SET tokens = {least}(:cap, b.tokens + {greatest}(0, excluded.at - b.at) * :rate) - 1, at = {greatest}(b.at, excluded.at)
WHERE {least}(:cap, b.tokens + {greatest}(0, excluded.at - b.at) * :rate) >= 1
RETURNING tokens
"""
TAKE_PG = text(_TAKE.format(now=_NOW_PG, least="LEAST", greatest="GREATEST"))
TAKE_SQLITE = text(_TAKE.format(now=_NOW_SQLITE, least="min", greatest="max"))
_READ = "SELECT tokens, at, {now} FROM annotator_request_buckets WHERE annotator_id = :id"
READ_PG = text(_READ.format(now=_NOW_PG))
READ_SQLITE = text(_READ.format(now=_NOW_SQLITE))


def retry_after(seconds: float) -> str:
    return str(max(1, math.ceil(seconds)))
