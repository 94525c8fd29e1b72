"""Per-annotator request limits: each annotator token may make ``LLMDUEL_ANNOTATOR_REQUESTS_PER_MINUTE``
API requests a minute in each worker process (a token bucket of that size, refilled evenly);
beyond, 429 with ``Retry-After``. The admin key is not limited. The count lives in the process,
so ``llmduel serve --workers N`` allows up to N times the figure in all."""

from __future__ import annotations

import math
import time
from typing import Callable


class AnnotatorRequestLimiter:
    """One token bucket per annotator id: ``per_minute`` requests of burst, ``per_minute / 60`` a second."""

    def __init__(self, per_minute: int, clock: Callable[[], float] = time.monotonic) -> None:
        self.capacity = float(per_minute)
        self.rate = per_minute / 60.0
        self.clock = clock
        self._buckets: dict[int, tuple[float, float]] = {}  # annotator id -> (tokens, time)

    def take(self, annotator_id: int) -> float | None:
        """Count one request: None when allowed, else the seconds until the next one is."""
        now = self.clock()
        tokens, last = self._buckets.get(annotator_id, (self.capacity, now))
        tokens = min(self.capacity, tokens + (now - last) * self.rate)
        if tokens < 1.0:
            self._buckets[annotator_id] = (tokens, now)
            return (1.0 - tokens) / self.rate
        if len(self._buckets) > 100_000:  # bounded memory: full buckets carry no information
            self._buckets = {k: v for k, v in self._buckets.items() if v[0] < self.capacity}
        self._buckets[annotator_id] = (tokens - 1.0, now)
        return None


def retry_after(seconds: float) -> str:
    return str(max(1, math.ceil(seconds)))
