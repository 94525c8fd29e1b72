"""``/healthz``: can the database be reached, and does it still accept writes?

The write check commits one tiny write (the row of ``health_checks``): a database
that still answers reads but refuses writes (a full disk, a read-only file or
mount, a PostgreSQL standby or read-only transaction default) is reported, with a
reason, instead of "ok". A good answer is cached per process for
:data:`CACHE_SECONDS`, so probes of a healthy database cost at most one small
transaction per process every couple of seconds; a bad one is not cached (every
probe then checks again, no dearer than any other request during an outage, and
recovery shows at once).

Answers: ``{"status": "ok", "database": "ok"}`` (200);
``{"status": "degraded", "database": "unavailable"}`` (503, no connection or no
answer); ``{"status": "degraded", "database": "read-only", "reason": ...}`` (503,
reads work, the write failed: the database's own message).
"""

from __future__ import annotations

import math
import threading
import time

from sqlalchemy import inspect, text
from sqlalchemy.dialects.postgresql import insert as pg_insert
from sqlalchemy.dialects.sqlite import insert as sqlite_insert

from .db import Database
from .models import HealthCheck, utcnow

CACHE_SECONDS = 1.5
REASON_CHARS = 160


def _reason(exc: BaseException) -> str:
    """The database's own message (first line, short), else the exception's type."""
    orig = getattr(exc, "orig", None) or exc
    first = (str(orig).strip().splitlines() or [""])[0]
    return (f"{type(orig).__name__}: {first}" if first else type(orig).__name__)[:REASON_CHARS]


class DatabaseHealth:
    """The cached answer of ``/healthz`` for one process."""

    def __init__(self, db: Database, cache_seconds: float = CACHE_SECONDS):
        self.db = db
        self.cache_seconds = cache_seconds
        self._lock = threading.Lock()
        self._at = -math.inf
        self._answer: dict | None = None
        self._has_table = False

    def forget(self) -> None:
        """Drop the cached answer (the next call checks again)."""
        with self._lock:
            self._answer, self._at = None, -math.inf

    def check(self) -> dict:
        """The answer (see the module); ``status`` is ``ok`` or ``degraded``."""
        with self._lock:
            if self._answer is not None and time.monotonic() - self._at < self.cache_seconds:
                return dict(self._answer)
            answer = self._probe()
            if answer["status"] == "ok":
                self._answer, self._at = answer, time.monotonic()
            else:
                self._answer = None
            return dict(answer)

    def _probe(self) -> dict:
        try:
            with self.db.engine.connect() as conn:
                conn.execute(text("SELECT 1"))
                if not self._has_table:
                    self._has_table = inspect(conn).has_table(HealthCheck.__tablename__)
        except Exception:
            return {"status": "degraded", "database": "unavailable"}
        if not self._has_table:  # a schema older than 0012 (LLMDUEL_AUTO_MIGRATE=never): reads only
            return {"status": "ok", "database": "ok", "writes": "unchecked (run `llmduel db upgrade`)"}
        try:
            with self.db.write() as s:
                insert = sqlite_insert if self.db.is_sqlite else pg_insert
                now = utcnow()
                stmt = insert(HealthCheck).values(id=1, checked_at=now)
                s.execute(stmt.on_conflict_do_update(index_elements=["id"], set_={"checked_at": now}))
        except Exception as exc:
            if getattr(exc, "connection_invalidated", False):  # the connection died meanwhile
                return {"status": "degraded", "database": "unavailable"}
            return {"status": "degraded", "database": "read-only", "reason": "writes fail: " + _reason(exc)}
        return {"status": "ok", "database": "ok"}
