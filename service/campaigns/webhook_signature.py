"""Webhook request signatures: HMAC-SHA256 over ``"{timestamp}.{body}"``.

Header ``X-Llmduel-Signature: t=<unix seconds>,v1=<hex digest>`` (the scheme of
Stripe's and similar webhooks). The receiver recomputes the digest with the
campaign's secret over the raw body it received, compares in constant time, and
refuses timestamps older than its tolerance (replays). Receiver code:
docs/reliability.md, *Webhook delivery*.
"""

from __future__ import annotations

import hashlib
import hmac

SIGNATURE_HEADER = "X-Llmduel-Signature"
EVENT_ID_HEADER = "X-Llmduel-Event-Id"
EVENT_TYPE_HEADER = "X-Llmduel-Event"
ATTEMPT_HEADER = "X-Llmduel-Delivery-Attempt"


def signature_header(secret: str, timestamp: int, body: bytes) -> str:
    """The ``X-Llmduel-Signature`` value of a request with this body sent at ``timestamp``."""
    digest = hmac.new(secret.encode("utf-8"), f"{timestamp}.".encode("ascii") + body, hashlib.sha256).hexdigest()
    return f"t={timestamp},v1={digest}"
