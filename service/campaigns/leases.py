"""One owner per background run: a lease in the campaign row, renewed by a heartbeat.

Every service process (every worker of ``llmduel serve --workers N``, every host on
the same database) has an owner id ``host:pid:random``. A background run belongs to
the process whose id is in ``campaigns.run_owner`` while ``run_lease_expires_at``
lies in the future. Taking a run (``POST /run``, or taking over an expired lease)
is a conditional update under the campaign's row lock (``SELECT ... FOR UPDATE`` on
PostgreSQL; SQLite's single writer serialises), so at most one process wins:

* ``POST /run`` while another owner's lease is valid: 409.
* the owner renews its leases every ``LLMDUEL_RUN_HEARTBEAT_SECONDS``;
* a process that finds an active run with a free or expired lease (its owner died
  or stalled past the lease) takes it over: the duels the old owner left in flight
  become *orphans* (``requested_by = 'run:orphan'``): they no longer take a slot of
  the run nor count toward ``max_duels``, and none of them is ever counted, but each
  keeps its budget reservation until its expiry (the hard deadline of its calls),
  because a stalled owner that wakes up may still complete their calls and must be
  able to pay for them (docs/reliability.md, *Ledger*); the run goes on with the new owner;
* every run transaction checks ``run_owner`` (the plan refuses a run duel to a
  process that lost its lease), so a stalled owner that wakes up cannot start
  duels: the lease is also a fencing token.

Lease times come from the database's clock (:meth:`Database.clock`: PostgreSQL's
``clock_timestamp()``, SQLite's clock on its one host), never from a worker's: a worker whose
clock runs ahead or behind neither takes a healthy owner's run early nor holds its own past
its lease.

See docs/reliability.md, *Run ownership*.
"""

from __future__ import annotations

import datetime as dt
import os
import secrets
import socket
from typing import Callable

from sqlalchemy import select, update

from algorithms.vocabulary import IN_FLIGHT, CampaignStatus, DuelStatus

from ..config import Settings
from ..db import Database, rowcount
from ..models import Campaign, Duel, utcnow
from .expiry import lease_free

#: The ``requested_by`` of the duels a background run starts.
RUN_REQUESTER = "run"
#: The ``requested_by`` of a run duel whose owner lost the run (a take-over): never counted, its
#: reservation kept until its expiry (its calls' hard deadline).
ORPHAN_REQUESTER = "run:orphan"

ORPHAN_ERROR = "its background run's owner stopped before the duel finished (the run was taken over)"
ABANDONED_ERROR = "the database was unreachable while this run duel was under way; it no longer counts"


def new_owner_id() -> str:
    """``host:pid:random``: unique per service instance, readable in the database."""
    return f"{socket.gethostname()[:120]}:{os.getpid()}:{secrets.token_hex(6)}"


class Leases:
    """The lease transactions (synchronous: they run in worker threads) of the process ``owner_id``."""

    def __init__(self, settings: Settings, db: Database, owner_id: str):
        self.settings = settings
        self.db = db
        self.owner_id = owner_id
        self.lease_length = dt.timedelta(seconds=settings.run_lease_seconds)

    def settle_orphans(self, s, campaign_id: int) -> int:
        """Orphan the run duels a previous owner left in flight (inside the taking transaction).

        They stay in flight until their expiry, so the budget keeps their reservations while
        the old owner may still be charged for their calls; an orphan is never counted (its
        answers expire it, :meth:`store_answers_tx`), and it takes no slot of the run.
        """
        return s.execute(
            update(Duel)
            .where(
                Duel.campaign_id == campaign_id,
                Duel.status.in_(IN_FLIGHT),
                Duel.requested_by == RUN_REQUESTER,
            )
            .values(requested_by=ORPHAN_REQUESTER, error=ORPHAN_ERROR)
            .execution_options(synchronize_session=False)
        ).rowcount

    def release_run_duel_tx(self, campaign_id: int, duel_id: int) -> bool:
        """Expire one run duel whose execution met a database error (its task gave it up).

        Without this, the duel would stay ``calling`` until the call timeout and hold one
        of the run's ``concurrency`` slots (and its budget and ``max_duels`` reservations)
        the whole time: a database outage would stall the run. Returns whether it was in flight.
        """
        with self.db.write() as s:
            self.db.lock_campaign(s, campaign_id)
            return bool(
                rowcount(
                    s.execute(
                        update(Duel)
                        .where(Duel.id == duel_id, Duel.status.in_(IN_FLIGHT), Duel.requested_by == RUN_REQUESTER)
                        .values(status=DuelStatus.EXPIRED, error=ABANDONED_ERROR, expires_at=utcnow())
                        .execution_options(synchronize_session=False)
                    )
                )
            )

    def take_lease(self, s, c: Campaign, now: dt.datetime) -> None:
        """Make this process the run's owner (the caller holds the row lock and checked the lease is free)."""
        self.settle_orphans(s, c.id)  # no loop of this process drives the run yet: they are orphans
        c.run_owner = self.owner_id
        c.run_lease_expires_at = now + self.lease_length

    def take_over_runs_tx(self, driven_here: Callable[[int], bool] = lambda cid: False) -> list[tuple[int, int]]:
        """Take every active run whose lease is free or expired; returns [(campaign id, concurrency)].

        A run this process owns but does not drive (``driven_here(id)`` is false,
        asked under the row lock) is taken as well: its loop is gone. A campaign whose row lock
        another transaction holds is skipped, never waited for (``SKIP LOCKED``): a process
        stalled inside a transaction must not hold up this one's start or heartbeat; the next
        heartbeat tries again.
        """
        with self.db.read() as s:
            now = self.db.clock(s)
            candidates = s.execute(
                select(Campaign.id, Campaign.run_owner, Campaign.run_lease_expires_at).where(
                    Campaign.run_active.is_(True), Campaign.status == CampaignStatus.RUNNING
                )
            ).all()
        taken = []
        for cid, owner, expires in candidates:
            if driven_here(cid) or (owner != self.owner_id and not lease_free(owner, expires, now)):
                continue
            with self.db.write() as s:
                c = self.db.lock_campaign(s, cid, skip_locked=True)  # None: deleted, or locked elsewhere
                now = self.db.clock(s)
                if (
                    driven_here(cid)
                    or c is None
                    or not c.run_active
                    or c.status != CampaignStatus.RUNNING
                    or (c.run_owner != self.owner_id and not lease_free(c.run_owner, c.run_lease_expires_at, now))
                ):
                    continue  # another process was faster
                self.take_lease(s, c, now)
                taken.append((int(cid), int(c.run_concurrency or 1)))
        return taken

    def renew_leases_tx(self, campaign_ids: list[int]) -> set[int]:
        """The heartbeat: extend this process's leases; returns the campaigns it still owns."""
        if not campaign_ids:
            return set()
        with self.db.write() as s:
            now = self.db.clock(s)
            owned = set(
                s.execute(
                    select(Campaign.id)
                    .where(Campaign.id.in_(campaign_ids), Campaign.run_owner == self.owner_id)
                    .order_by(Campaign.id)
                    .with_for_update()
                ).scalars()
            )
            if owned:
                s.execute(
                    update(Campaign)
                    .where(Campaign.id.in_(owned), Campaign.run_owner == self.owner_id)
                    .values(run_lease_expires_at=now + self.lease_length)
                    .execution_options(synchronize_session=False)
                )
            return {int(x) for x in owned}

    def renew_calling_duels_tx(self, duels: dict) -> None:
        """The heartbeat of the annotators' duels whose models this process calls (duel id -> hard
        expiry): each still ``calling`` gets ``expires_at`` = now + the lease, never past its hard
        expiry. A process that dies stops renewing: its duels expire within the lease and their
        annotators get new ones (their reservations end with them, so nothing is charged later)."""
        with self.db.write() as s:
            now = self.db.clock(s)
            for duel_id, hard in sorted(duels.items()):
                s.execute(
                    update(Duel)
                    .where(Duel.id == duel_id, Duel.status == DuelStatus.CALLING)
                    .values(expires_at=min(now + self.lease_length, hard))
                    .execution_options(synchronize_session=False)
                )

    def release_leases_tx(self, campaign_ids: list[int]) -> None:
        """A graceful stop: give the leases up at once (the run stays active; another process takes it)."""
        if not campaign_ids:
            return
        with self.db.write() as s:
            s.execute(
                update(Campaign)
                .where(Campaign.id.in_(campaign_ids), Campaign.run_owner == self.owner_id)
                .values(run_owner=None, run_lease_expires_at=None)
                .execution_options(synchronize_session=False)
            )
