"""The ``campaign.ended`` webhook: claimed once, delivered with retries, its outcome stored."""

from __future__ import annotations

import asyncio
import logging

from .rules import MAX_ERROR_CHARS, clean_text
from .views import jsonable_report

log = logging.getLogger("llmduel.campaigns")


class Webhooks:
    """The end-of-campaign webhook."""

    # ------------------------------------------------------------ webhook
    def schedule_webhook(self, campaign_id: int) -> None:
        try:
            self.spawn(self._deliver_webhook(campaign_id))
        except RuntimeError:  # no running loop (sync caller)
            pass

    def _claim_webhook_tx(self, campaign_id: int) -> tuple[str, dict] | None:
        with self.db.write() as s:
            c = self.db.lock_campaign(s, campaign_id)
            if c is None or not c.webhook_url or c.webhook_state != "pending":
                return None
            c.webhook_state = "sending"
            report = self.campaign_view(c, 0)
            return c.webhook_url, jsonable_report(report)

    def _webhook_done_tx(self, campaign_id: int, ok: bool, error: str | None) -> None:
        with self.db.write() as s:
            c = self.db.lock_campaign(s, campaign_id)
            if c is not None:
                c.webhook_state = "sent" if ok else "failed"
                c.webhook_error = None if ok else clean_text(error or "", MAX_ERROR_CHARS)

    async def _deliver_webhook(self, campaign_id: int) -> None:
        claim = await self.in_thread(self._claim_webhook_tx, campaign_id)
        if claim is None:
            return
        url, report = claim
        error = None
        for attempt in range(3):
            try:
                resp = await self.http_client().post(
                    url,
                    json={"event": "campaign.ended", "campaign": report},
                    timeout=self.settings.webhook_timeout_seconds,
                    headers={"User-Agent": "llmduel-webhook/1"},
                )
                if resp.status_code < 400:
                    await self.in_thread(self._webhook_done_tx, campaign_id, True, None)
                    return
                error = f"HTTP {resp.status_code}"
            except Exception as exc:
                error = type(exc).__name__
            await asyncio.sleep(0.5 * 2**attempt)
        log.warning("campaign %s: webhook delivery failed (%s)", campaign_id, error)
        await self.in_thread(self._webhook_done_tx, campaign_id, False, error)
