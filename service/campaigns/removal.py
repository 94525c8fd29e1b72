"""Archiving and deleting campaigns (``POST /v1/campaigns/{id}/archive``, ``DELETE /v1/campaigns/{id}``).

* **Archive** keeps everything: the campaign, its duels, its ledger. It only leaves the
  campaign out of ``GET /v1/campaigns`` and the campaign list page (``?archived=true`` lists the
  archived ones); it stays readable, exportable and continuable by id, and ``unarchive`` brings
  it back. Any campaign may be archived, a running one included (its run goes on).
* **Delete** removes the campaign and every row that belongs to it (prompts, duels, charges,
  annotators, skips, holds, batch jobs, webhook events: the foreign keys cascade). A running
  campaign is refused (409: stop it first), and so is a stopped one whose calls are still under
  way: a batch still at the provider (a stopped run cancels it and collects what it finished), a
  pre-generated answer's call. An open batch older than its window and the cancellation grace is
  a dead worker's and blocks nothing. The shared stores are
  the user's choice (``stored``): ``keep`` (the default) leaves the answers and verdicts it paid
  for in the answer and verdict stores, where other campaigns go on reusing them for free;
  ``remove`` deletes those rows too (other campaigns then pay for them again; duels already
  judged keep their own copy of the text). Deleting drops the campaign's ledger: export it first.
"""

from __future__ import annotations

import datetime as dt
from typing import Any

from sqlalchemy import delete, func, select

from algorithms.vocabulary import CampaignStatus

from ..db import Database, rowcount
from ..models import BatchJob, BudgetHold, Campaign, Charge, StoredAnswer, StoredVerdict, utcnow
from ..schemas.batch_config import MAX_WINDOW_SECONDS
from .batch_jobs import CANCEL_GRACE_S, OPEN
from .expiry import run_under_way
from .types import Conflict, NotFound

STORED_CHOICES = ("keep", "remove")


def set_archived(db: Database, campaign_id: int, archived: bool) -> dict[str, Any]:
    """Archive (or bring back) a campaign; idempotent. ``{"id", "archived", "archived_at"}``."""
    with db.write() as s:
        c = s.get(Campaign, campaign_id)
        if c is None:
            raise NotFound(f"campaign {campaign_id} not found")
        if archived and c.archived_at is None:
            c.archived_at = utcnow()
            c.version += 1
        elif not archived and c.archived_at is not None:
            c.archived_at = None
            c.version += 1
        at = c.archived_at
    return {"id": campaign_id, "archived": at is not None, "archived_at": at}


def delete_campaign(db: Database, campaign_id: int, stored: str = "keep") -> dict[str, Any]:
    """Delete an ended campaign and its rows; with ``stored="remove"`` also the store rows it paid for."""
    if stored not in STORED_CHOICES:
        raise ValueError(f"stored must be one of {STORED_CHOICES}")
    removed = {"answers": 0, "verdicts": 0}
    with db.write() as s:
        c = s.execute(select(Campaign).where(Campaign.id == campaign_id).with_for_update()).scalar_one_or_none()
        if c is None:
            raise NotFound(f"campaign {campaign_id} not found")
        if c.status == CampaignStatus.RUNNING:
            raise Conflict(f"campaign {campaign_id} is running: stop it first (POST /v1/campaigns/{campaign_id}/stop)")
        busy = _calls_under_way(s, c, db.clock(s))
        if busy:
            raise Conflict(f"campaign {campaign_id} is stopped but {busy}: delete it once they have ended")
        if stored == "remove":
            paid = select(Charge.id).where(Charge.campaign_id == campaign_id)
            for key, table in (("answers", StoredAnswer), ("verdicts", StoredVerdict)):
                removed[key] = rowcount(s.execute(delete(table).where(table.charge_id.in_(paid)))) or 0
        s.execute(delete(Campaign).where(Campaign.id == campaign_id))
    return {"id": campaign_id, "deleted": True, "stored": stored, "stored_removed": removed}


def _calls_under_way(s: Any, c: Campaign, clock: dt.datetime) -> str | None:
    """What of a stopped campaign is still paid for elsewhere (its run winding down on a worker, a batch
    at a provider, a pre-generated answer's call), or None. Deleting under it would drop the rows those
    calls store and charge into, and the provider would still bill them. ``clock``: the database's, which
    times the run's lease (service/campaigns/leases.py)."""
    if run_under_way(c.run_active, c.run_owner, c.run_lease_expires_at, clock):
        return "its background run has not ended yet"
    # a batch's collector gives up within its window plus the cancellation grace: an open row older than
    # that is a dead worker's, and blocks nothing (else a crash mid-batch would make the campaign undeletable)
    window = float((c.batch or {}).get("window_seconds") or MAX_WINDOW_SECONDS)
    since = utcnow() - dt.timedelta(seconds=2 * window + CANCEL_GRACE_S + 60)
    batches = s.scalar(
        select(func.count()).where(BatchJob.campaign_id == c.id, BatchJob.status.in_(OPEN), BatchJob.created_at > since)
    )
    if batches:
        return f"{batches} of its batches are still at the provider (submitted, not yet collected or cancelled)"
    holds = s.scalar(select(func.count()).where(BudgetHold.campaign_id == c.id, BudgetHold.expires_at > utcnow()))
    if holds:
        return f"{holds} of its model calls (pre-generated answers) are under way"
    return None
