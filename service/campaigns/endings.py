"""How a running campaign ends inside a locked transaction (:class:`Endings`)."""

from __future__ import annotations

import datetime as dt
from typing import Callable

from sqlalchemy import update

from algorithms.vocabulary import IN_FLIGHT, CampaignStatus, DuelStatus

from ..models import Campaign, Duel
from . import ledger, rules


class Endings:
    """End a campaign (its status and reason, the run stopped, the duels in flight cancelled, the
    ``campaign.ended`` outbox row) in the caller's session; no state of its own.

    ``enqueue_webhook``: :meth:`.webhooks.Webhooks.enqueue_webhook`, which writes the outbox
    row in the same transaction. The cycle's transactions, the hot path's general fallback
    and :class:`.pregeneration.Pregeneration` (a provider fault) end campaigns through it."""

    def __init__(self, enqueue_webhook: Callable[..., None]):
        self.enqueue_webhook = enqueue_webhook

    def finish(
        self,
        s,
        c: Campaign,
        status: str,
        reason: str,
        now: dt.datetime,
        keep_duel: int | None = None,
        limit: str | None = None,
    ) -> None:
        """End a running campaign: in-flight duels are cancelled, the run stops.

        ``limit``: the limit that ended it (``rules.END_LIMITS``), so that raising it continues the campaign.
        """
        c.status = status
        c.end_reason = reason
        c.end_limit = limit
        c.ended_at = now
        c.run_active = False
        c.run_owner = None
        c.run_lease_expires_at = None
        self.enqueue_webhook(s, c, now)  # the outbox row commits with the end, or not at all
        cond = [Duel.campaign_id == c.id, Duel.status.in_(IN_FLIGHT)]
        if keep_duel is not None:
            cond.append(Duel.id != keep_duel)
        s.execute(
            update(Duel)
            .where(*cond)
            .values(status=DuelStatus.CANCELLED, error=rules.CANCELLED_ERROR)
            .execution_options(synchronize_session=False)
        )

    def pause_for_fault(self, s, c: Campaign, fault: str, now: dt.datetime, keep_duel: int | None = None) -> None:
        """Pause a running campaign on a provider fault (:mod:`.ledger`): it ends as stopped with
        ``end_limit = 'provider'``, and a PATCH of its limits continues it (rules.continue_refusal)."""
        if c.status == CampaignStatus.RUNNING:
            reason = ledger.fault_reason(fault)
            self.finish(s, c, CampaignStatus.STOPPED, reason, now, keep_duel, limit=ledger.END_LIMIT_PROVIDER)
