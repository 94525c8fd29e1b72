"""Retry policy of the HTTP clients: which failures are retried and how long to wait."""

from __future__ import annotations

import email.utils
import math
import random
import time
from dataclasses import dataclass
from datetime import timezone
from typing import Mapping

RETRYABLE_STATUS = frozenset({408, 409, 429})


def is_retryable_status(status: int) -> bool:
    """408, 409, 429 and every 5xx are retried; other statuses are final."""
    return status in RETRYABLE_STATUS or 500 <= status <= 599


def parse_retry_after(headers: Mapping[str, str], now: float | None = None) -> float | None:
    """Seconds to wait as asked by the server, or ``None``.

    Reads ``retry-after-ms`` (OpenAI) first, then ``Retry-After`` as delta-seconds
    or as an HTTP-date (RFC 9110). Negative or past values give 0.
    """
    ms = headers.get("retry-after-ms")
    if ms is not None:
        try:
            v = float(ms)
            if math.isfinite(v):
                return max(0.0, v / 1000.0)
        except ValueError:
            pass
    value = headers.get("retry-after")
    if value is None:
        return None
    value = value.strip()
    try:
        v = float(value)
        return max(0.0, v) if math.isfinite(v) else None
    except ValueError:
        pass
    try:
        dt = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError, IndexError):
        return None
    if dt is None:
        return None
    if dt.tzinfo is None:
        dt = dt.replace(tzinfo=timezone.utc)
    now = time.time() if now is None else now
    return max(0.0, dt.timestamp() - now)


@dataclass(frozen=True)
class RetryPolicy:
    """Exponential backoff with jitter.

    After failed attempt ``k`` (1-based) the wait is
    ``d * (0.5 + 0.5 * u)`` with ``d = min(max_delay, base_delay * 2**(k-1))`` and
    ``u`` uniform in [0, 1) ("equal jitter": between half and all of ``d``), unless
    the server sent ``Retry-After``: then exactly that (if it is at most
    ``max_retry_after``; a longer demand ends the retries at once).
    """

    max_attempts: int = 4
    base_delay: float = 0.5
    max_delay: float = 20.0
    max_retry_after: float = 60.0

    def backoff(self, attempt: int, rng: random.Random) -> float:
        d = min(self.max_delay, self.base_delay * (2 ** (attempt - 1)))
        return d * (0.5 + 0.5 * rng.random())
