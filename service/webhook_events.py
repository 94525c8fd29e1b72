"""The events a campaign's webhook can receive, and how a campaign stores its choice of them.

* ``campaign.ended``: written in the transaction that ends the campaign (a verdict, a cap, the
  budget, a stop, a provider fault); its ``campaign`` is the view at its first delivery attempt,
  when a run may still be recording its last duels in flight (``spend_final`` false).
* ``campaign.settled``: written once that ending's spend is final (``spend_final`` true,
  :mod:`service.campaigns.settlement`), within a heartbeat; its ``campaign`` carries the final spend.

A campaign receives ``campaign.ended`` alone unless its ``webhook_events`` says otherwise
(docs/service.md, *Webhook*).
"""

from __future__ import annotations

from collections.abc import Sequence

CAMPAIGN_ENDED = "campaign.ended"
CAMPAIGN_SETTLED = "campaign.settled"
#: Every event, in the order a campaign's ending sends them.
WEBHOOK_EVENTS = (CAMPAIGN_ENDED, CAMPAIGN_SETTLED)
DEFAULT_WEBHOOK_EVENTS = (CAMPAIGN_ENDED,)


def stored_events(events: Sequence[str] | None) -> str | None:
    """The ``campaigns.webhook_events`` column of a choice (None: the default), in :data:`WEBHOOK_EVENTS` order."""
    if events is None or tuple(events) == DEFAULT_WEBHOOK_EVENTS:
        return None
    return ",".join(e for e in WEBHOOK_EVENTS if e in events)


def events_of(stored: str | None) -> list[str]:
    """The events of a ``campaigns.webhook_events`` column."""
    return list(DEFAULT_WEBHOOK_EVENTS) if stored is None else stored.split(",")
