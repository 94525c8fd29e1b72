"""Archiving and deleting campaigns (``POST /v1/campaigns/{id}/archive``, ``DELETE /v1/campaigns/{id}``).

* **Archive** keeps everything: the campaign, its duels, its ledger. It only leaves the
  campaign out of ``GET /v1/campaigns`` and the campaign list page (``?archived=true`` lists the
  archived ones); it stays readable, exportable and continuable by id, and ``unarchive`` brings
  it back. Any campaign may be archived, a running one included (its run goes on).
* **Delete** removes the campaign and every row that belongs to it (prompts, duels, charges,
  annotators, skips, holds, batch jobs, webhook events: the foreign keys cascade). A running
  campaign is refused (409: stop it first), and so is a stopped one whose spend is not final
  (:mod:`.settlement`): its run still recording its duels in flight, a model or judge call of a duel
  before its deadline, a batch still at the provider (a stopped run cancels it and collects what it
  finished), a pre-generated answer's call. An open batch older than its window and the
  cancellation grace is a dead worker's and blocks nothing. The shared stores are
  the user's choice (``stored``): ``keep`` (the default) leaves the answers and verdicts it paid
  for in the answer and verdict stores, where other campaigns go on reusing them for free;
  ``remove`` deletes those rows too (other campaigns then pay for them again; duels already
  judged keep their own copy of the text). Deleting drops the campaign's ledger: export it first.
"""

from __future__ import annotations

from typing import Any

from sqlalchemy import delete, select

from algorithms.vocabulary import CampaignStatus

from ..db import Database, rowcount
from ..models import Campaign, Charge, StoredAnswer, StoredVerdict, utcnow
from .settlement import unsettled
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
        busy = unsettled(s, c, db.clock(s))
        if busy:
            raise Conflict(f"campaign {campaign_id} is stopped but {busy}: delete it once they have ended")
        if stored == "remove":
            paid = select(Charge.id).where(Charge.campaign_id == campaign_id)
            for key, table in (("answers", StoredAnswer), ("verdicts", StoredVerdict)):
                removed[key] = rowcount(s.execute(delete(table).where(table.charge_id.in_(paid)))) or 0
        s.execute(delete(Campaign).where(Campaign.id == campaign_id))
    return {"id": campaign_id, "deleted": True, "stored": stored, "stored_removed": removed}
