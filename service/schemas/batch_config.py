"""A batch campaign's ``batch`` setting (:class:`BatchConfig`) and its round sizes (:func:`round_size`).

``batch: true`` takes every default; an object sets them. Round ``k`` (1, 2, ...) plans at most
``min(max_round_size, ceil(round_size * growth ** (k - 1)))`` duels (:func:`round_size`: with the
defaults 8, 16, 32, ... up to 1,024, so a campaign of ``D`` duels needs at most about
``log2(D / 8) + 1`` rounds), and from the second round on no more than the stopping rule's own
forecast of the duels it still needs (:func:`remaining_duels`), with a margin of
:data:`FORECAST_MARGIN`. The forecast only sizes the round: which duels are planned, and when the
campaign stops, are the policy's and the stopping rule's as for a campaign called one call at a time.
"""

from __future__ import annotations

import math
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

#: The longest a batch may take before its round fails (OpenAI's ``completion_window`` is 24 h).
MAX_WINDOW_SECONDS = 24 * 3600.0


class BatchConfig(BaseModel):
    """The rounds of a batch campaign: answers as one batch per model, then verdicts as one batch per judge."""

    model_config = ConfigDict(extra="forbid")

    round_size: int = Field(8, ge=1, le=10_000, description="Duels planned in the first round.")
    growth: float = Field(2.0, ge=1.0, le=16.0, description="Each round plans this many times the previous one.")
    max_round_size: int = Field(1024, ge=1, le=50_000, description="The most duels one round plans.")
    poll_seconds: float = Field(30.0, gt=0, le=3600, description="Seconds between two polls of an open batch.")
    window_seconds: float = Field(
        MAX_WINDOW_SECONDS,
        gt=0,
        le=MAX_WINDOW_SECONDS,
        description="A batch that returns nothing within this many seconds fails its round (the run ends with "
        "the reason); its duels keep their reservations until then.",
    )


def parse_batch(value: Any) -> dict[str, Any] | None:
    """The stored form of a ``batch`` field: ``None`` (call by call) or the config with every default."""
    if value is None or value is False:
        return None
    if value is True:
        return BatchConfig().model_dump()
    if isinstance(value, BatchConfig):
        return value.model_dump()
    return BatchConfig.model_validate(value).model_dump()


def round_size(cfg: dict[str, Any], k: int) -> int:
    """The number of duels round ``k`` (1-based) plans."""
    size = math.ceil(float(cfg["round_size"]) * float(cfg["growth"]) ** max(0, k - 1))
    return int(min(int(cfg["max_round_size"]), size))


#: How much more than the forecast of the duels still needed a round plans.
FORECAST_MARGIN = 1.1


def remaining_duels(policy: Any) -> float | None:
    """The stopping rule's own forecast of the duels it still needs, or None when it has no basis yet.

    A certificate's log-statistic grows about linearly in its pair's duels, so a test at ``stat``
    after ``n`` duels, with threshold ``thr``, needs about ``n * (thr - stat) / stat`` more. For
    dctas-pc: the sum over the current leader's certificates still missing (``pair_evidence``); for
    the other policies: the GLR statistic ``Z`` against ``beta`` after ``t`` duels.
    """
    if hasattr(policy, "pair_evidence"):
        leader = policy.recommendation()
        total = 0.0
        for e in policy.pair_evidence():
            if e["winner"] != leader or e["certified"]:
                continue
            n, stat, thr = float(e["n"]), float(e["log_stat"]), float(e["log_threshold"])
            if n <= 0 or not stat > 0 or not math.isfinite(stat):
                return None
            total += n * max(0.0, thr - stat) / stat
        return total
    summary = policy.summary()
    t, z, beta = float(summary.get("t") or 0), float(summary.get("Z") or 0), float(summary.get("beta") or 0)
    if t <= 0 or not z > 0 or not math.isfinite(z) or not math.isfinite(beta):
        return None
    return t * max(0.0, beta - z) / z


def next_round_size(cfg: dict[str, Any], k: int, remaining: float | None) -> int:
    """Round ``k``'s size: :func:`round_size`, cut to the forecast of the duels still needed (``remaining``,
    :func:`remaining_duels`) times :data:`FORECAST_MARGIN`, never below the first round's size."""
    cap = round_size(cfg, k)
    if k <= 1 or remaining is None or not math.isfinite(remaining):
        return cap
    want = math.ceil(FORECAST_MARGIN * remaining)
    return int(max(1, min(cap, max(int(cfg["round_size"]), want))))
