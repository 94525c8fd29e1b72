"""Webhooks through a durable outbox: at-least-once, signed, retried, picked up after restarts.

* An event is a row of ``webhook_events`` (:mod:`service.webhook_events`). ``campaign.ended`` is
  inserted by the transaction that ends the campaign (:data:`service.campaigns.endings.ENDED_EVENT`):
  it exists if and only if the end was committed. ``campaign.settled``, for a campaign that asked
  for it, by the keeper's pass once the ending's spend is final (:meth:`Webhooks.settled_events_tx`).
* A process *claims* a due event (``state = 'pending'``, ``next_attempt_at`` past,
  no valid claim) under the event's row lock, setting ``claimed_by`` and
  ``claimed_until`` (twice the request's timeout plus 1 s) and counting the attempt.
  The payload is frozen at the first claim (the campaign's view then).
* The request is signed (:mod:`.webhook_signature`), carries the event id, follows
  no redirect, and only a 2xx answer marks the event ``delivered``. Anything else
  schedules the next attempt after ``LLMDUEL_WEBHOOK_RETRY_SECONDS * 2**(n-1)``
  (at most an hour), until ``LLMDUEL_WEBHOOK_MAX_ATTEMPTS`` (then ``failed``).
* A process that dies mid-send leaves its claim; once ``claimed_until`` passes,
  any process's keeper (every ``LLMDUEL_RUN_HEARTBEAT_SECONDS``) claims the event
  again and sends it with the same event id. Receivers dedupe by that id.

The campaign's ``webhook_state`` mirrors its latest event: ``pending``, ``sent``
or ``failed`` (``webhook_error``: the last error).
"""

from __future__ import annotations

import asyncio
import datetime as dt
import json
import logging
import secrets
import time

import httpx
from sqlalchemy import or_, select

from .. import egress
from ..config import Settings
from ..db import Database
from ..egress import EgressDenied
from ..models import Campaign, WebhookEvent, utcnow
from ..stored_text import MAX_ERROR_CHARS, clean_text
from ..webhook_events import CAMPAIGN_SETTLED
from . import settlement
from .tasks import Background, in_thread
from .views import Views, jsonable_report
from .webhook_signature import ATTEMPT_HEADER, EVENT_ID_HEADER, EVENT_TYPE_HEADER, SIGNATURE_HEADER, signature_header

log = logging.getLogger("llmduel.campaigns")

MAX_RETRY_DELAY_SECONDS = 3600.0


def claim_seconds(timeout: float) -> float:
    """How long a claim holds: twice the request's timeout (a timeout bounds each phase, not the whole), plus 1 s."""
    return 2.0 * timeout + 1.0


def new_webhook_secret() -> str:
    return "whsec_" + secrets.token_urlsafe(32)


def new_event_id() -> str:
    return "evt_" + secrets.token_hex(12)


def retry_delay_seconds(base: float, attempts: int) -> float:
    """The wait after the ``attempts``-th failed attempt: base, 2 base, 4 base, ... at most an hour."""
    return min(MAX_RETRY_DELAY_SECONDS, base * 2 ** max(0, attempts - 1))


class Webhooks:
    """The webhook outbox: claim, send, record (:mod:`.endings` enqueues in the ending transaction).

    Owns its HTTP client (egress-checked like the model clients); claims events as ``owner_id``
    (this process's identity, shared with the run leases); sends in tasks of ``background``."""

    def __init__(self, settings: Settings, db: Database, views: Views, background: Background, owner_id: str):
        self.settings = settings
        self.db = db
        self.views = views
        self.background = background
        self.owner_id = owner_id
        self._http: httpx.AsyncClient | None = None
        self._sending: asyncio.Task | None = None  # the keeper's delivery pass

    def http_client(self) -> httpx.AsyncClient:
        if self._http is None:  # under LLMDUEL_ALLOWED_HOSTS every new connection is checked (service.egress)
            self._http = egress.http_client(self.settings.egress, httpx.Timeout(120.0, connect=10.0))
        return self._http

    async def aclose(self) -> None:
        if self._http is not None:
            await self._http.aclose()
            self._http = None

    # ------------------------------------------------------------ enqueue (inside a transaction)
    def webhook_secret_of(self, campaign_id: int) -> str | None:
        with self.db.read() as s:
            return s.execute(select(Campaign.webhook_secret).where(Campaign.id == campaign_id)).scalar_one_or_none()

    def settled_events_tx(self, limit: int = 100) -> int:
        """Write the ``campaign.settled`` event of every ended campaign waiting for it whose spend is now final
        (:mod:`.settlement`), one locked transaction each, the check made again under the lock (a late charge
        commits under the same lock); returns how many were written."""
        with self.db.read() as s:
            due = list(
                s.execute(
                    select(Campaign).where(Campaign.webhook_settle_due.is_(True)).order_by(Campaign.id).limit(limit)
                )
                .scalars()
                .all()
            )
            final = settlement.spend_final_of(s, due, self.db.clock(s)) if due else {}
        written = 0
        for cid in (cid for cid, ok in final.items() if ok):
            with self.db.write() as s:
                c = self.db.lock_campaign(s, cid)
                if c is None or not c.webhook_settle_due or not settlement.spend_final(s, c, self.db.clock(s)):
                    continue
                now = utcnow()
                s.add(
                    WebhookEvent(
                        id=new_event_id(),
                        campaign_id=cid,
                        event_type=CAMPAIGN_SETTLED,
                        url=c.webhook_url,
                        state="pending",
                        attempts=0,
                        next_attempt_at=now,
                        created_at=now,
                    )
                )
                c.webhook_settle_due = False
                c.webhook_state, c.webhook_error = "pending", None  # the campaign mirrors its latest event
                written += 1
        return written

    # ------------------------------------------------------------ claim, send, record
    def claim_webhooks_tx(self, limit: int = 20) -> list[dict]:
        """Claim up to ``limit`` due events for this process; returns what sending each needs."""
        now = utcnow()
        due = (
            WebhookEvent.state == "pending",
            WebhookEvent.next_attempt_at <= now,
            or_(WebhookEvent.claimed_until.is_(None), WebhookEvent.claimed_until <= now),
        )
        with self.db.read() as s:
            ids = list(
                s.execute(select(WebhookEvent.id).where(*due).order_by(WebhookEvent.next_attempt_at).limit(limit))
                .scalars()
                .all()
            )
        claims = []
        for event_id in ids:
            with self.db.write() as s:
                ev = s.execute(
                    select(WebhookEvent).where(WebhookEvent.id == event_id, *due).with_for_update(skip_locked=True)
                ).scalar_one_or_none()
                if ev is None:  # claimed or settled by another process meanwhile
                    continue
                c = s.get(Campaign, ev.campaign_id)
                if c is None:  # never: an event is deleted with its campaign (ON DELETE CASCADE)
                    continue
                if ev.payload is None:  # frozen at the first attempt: every retry sends the same body
                    ev.payload = {
                        "id": ev.id,
                        "event": ev.event_type,
                        "created_at": ev.created_at.isoformat(),
                        "campaign_id": ev.campaign_id,
                        "status": c.status,
                        "campaign": jsonable_report(self.views.report_view(s, c, now)),
                    }
                ev.attempts += 1
                ev.claimed_by = self.owner_id
                ev.claimed_until = now + dt.timedelta(seconds=claim_seconds(self.settings.webhook_timeout_seconds))
                claims.append(
                    {
                        "id": ev.id,
                        "type": ev.event_type,
                        "url": ev.url,
                        "body": json.dumps(ev.payload, separators=(",", ":")).encode("utf-8"),
                        "secret": c.webhook_secret or "",
                        "attempt": ev.attempts,
                    }
                )
        return claims

    def record_webhook_tx(self, event_id: str, ok: bool, error: str | None) -> float | None:
        """Store an attempt's outcome; returns the delay before the next attempt, or None (settled)."""
        with self.db.write() as s:
            ev = s.execute(
                select(WebhookEvent).where(WebhookEvent.id == event_id).with_for_update()
            ).scalar_one_or_none()
            if ev is None or ev.state != "pending":
                return None
            if not ok and ev.claimed_by != self.owner_id:
                return None  # our claim ran out and another process is sending: its outcome counts
            now = utcnow()
            c = self.db.lock_campaign(s, ev.campaign_id)
            ev.claimed_by = None
            ev.claimed_until = None
            delay = None
            if ok:
                ev.state, ev.delivered_at, ev.last_error, ev.next_attempt_at = "delivered", now, None, None
            else:
                ev.last_error = clean_text(error or "", MAX_ERROR_CHARS)
                if ev.attempts >= self.settings.webhook_max_attempts:
                    ev.state, ev.next_attempt_at = "failed", None
                else:
                    delay = retry_delay_seconds(self.settings.webhook_retry_seconds, ev.attempts)
                    ev.next_attempt_at = now + dt.timedelta(seconds=delay)
            if c is not None:  # the campaign mirrors its latest event
                latest = s.execute(
                    select(WebhookEvent.id)
                    .where(WebhookEvent.campaign_id == c.id)
                    .order_by(WebhookEvent.created_at.desc(), WebhookEvent.id.desc())
                    .limit(1)
                ).scalar_one()
                if latest == ev.id:
                    c.webhook_state = {"delivered": "sent", "failed": "failed"}.get(ev.state, "pending")
                    c.webhook_error = ev.last_error
            return delay

    async def _send(self, claim: dict) -> tuple[bool, str | None]:
        body = claim["body"]
        headers = {
            "Content-Type": "application/json",
            "User-Agent": "llmduel-webhook/1",
            EVENT_TYPE_HEADER: claim["type"],
            EVENT_ID_HEADER: claim["id"],
            ATTEMPT_HEADER: str(claim["attempt"]),
            SIGNATURE_HEADER: signature_header(claim["secret"], int(time.time()), body),
        }
        try:
            resp = await self.http_client().post(
                claim["url"],
                content=body,
                headers=headers,
                timeout=self.settings.webhook_timeout_seconds,
                follow_redirects=False,  # a redirect is not a delivery (and could point anywhere)
            )
        except asyncio.CancelledError:
            raise
        except EgressDenied as exc:  # LLMDUEL_ALLOWED_HOSTS, checked again at the connection
            return False, f"not sent: {exc.message}"
        except Exception as exc:
            return False, f"{type(exc).__name__} (no answer)"
        if 200 <= resp.status_code < 300:
            return True, None
        return False, f"HTTP {resp.status_code}"

    async def deliver_webhooks(self) -> int:
        """Write the ``campaign.settled`` events now due, then claim and send every due event once; schedules the
        retries of those that failed."""
        await in_thread(self.settled_events_tx)
        sent = 0
        while True:
            claims = await in_thread(self.claim_webhooks_tx)
            if not claims:
                return sent
            # At once: each claim must be sent within its own lease, whatever the other receivers do.
            results = await asyncio.gather(*(self._attempt(claim) for claim in claims))
            sent += sum(results)

    async def _attempt(self, claim: dict) -> bool:
        ok, error = await self._send(claim)
        delay = await in_thread(self.record_webhook_tx, claim["id"], ok, error)
        if not ok:
            log.warning("webhook %s (attempt %d): %s", claim["id"], claim["attempt"], error)
        if delay is not None:
            self.background.spawn(self._deliver_later(delay))
        return ok

    async def _deliver_later(self, delay: float) -> None:
        await asyncio.sleep(delay)
        await self.deliver_quietly()

    async def deliver_quietly(self) -> None:
        try:
            await self.deliver_webhooks()
        except asyncio.CancelledError:
            raise
        except Exception as exc:  # database away: the keeper tries again
            log.warning("webhook delivery: %s", type(exc).__name__, exc_info=True)

    def send_due(self) -> None:
        """Start a delivery pass of the due events in the background, unless one is under way."""
        if self._sending is None or self._sending.done():
            self._sending = self.background.spawn(self.deliver_quietly())

    def schedule_webhook(self, campaign_id: int) -> None:
        """A campaign ended: send its event now (the outbox row is already committed)."""
        try:
            self.background.spawn(self.deliver_quietly())
        except RuntimeError:  # no running loop (sync caller): the keeper sends it
            pass
