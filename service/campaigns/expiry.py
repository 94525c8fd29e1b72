"""When a duel, a call and a background run's lease lapse."""

from __future__ import annotations

import datetime as dt
import time


def call_deadline(expiry: dt.timedelta) -> float:
    """The ``time.monotonic()`` by which a call must have returned when what it is reserved
    by (a duel, a pre-generation hold) lapses after ``expiry``: a call still running then
    is abandoned as failed, so it is never charged after its reservation stopped counting
    (docs/reliability.md, *Budget*). The margin is 10% of the expiry, at most 5 s."""
    seconds = expiry.total_seconds()
    return time.monotonic() + seconds - min(5.0, 0.1 * seconds)


def is_stale(expires_at: dt.datetime, now: dt.datetime) -> bool:
    """An in-flight duel past its expiry no longer counts (it is expired by the next plan)."""
    return expires_at <= now


def lease_free(owner: str | None, expires_at: dt.datetime | None, now: dt.datetime) -> bool:
    """A background run's lease can be taken: nobody holds it, or its holder let it expire."""
    return owner is None or expires_at is None or expires_at <= now


def run_under_way(run_active: bool, owner: str | None, expires_at: dt.datetime | None, now: dt.datetime) -> bool:
    """A background run as its campaign's views report it (``run.active``): it plans duels (``run_active``), or
    it was ended (the campaign's ending, a stop) while its task still records what its duels in flight bring:
    its owner keeps the lease, renewed every heartbeat, until that task has drained (service/cycle/runs.py).
    False once the task drained, or once its owner's lease lapsed: a process gone records nothing, but one that
    only stalled may still store its duels' calls until their deadlines, which :mod:`.settlement` (the view's
    ``spend_final``) also waits for."""
    return bool(run_active) or not lease_free(owner, expires_at, now)
