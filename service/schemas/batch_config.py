"""A batch campaign's ``batch`` setting (:class:`BatchConfig`) and its round sizes (:func:`round_size`).

``batch: true`` takes every default; an object sets them. Round ``k`` (1, 2, ...) plans at most
``min(max_round_size, ceil(round_size * growth ** (k - 1)))`` duels (:func:`round_size`: with the
defaults 8, 16, 32, ... up to 1,024, so a campaign of ``D`` duels needs at most about
``log2(D / 8) + 1`` rounds), and from the second round on no more than the stopping rule's own
forecast of the duels it still needs (:func:`remaining_duels`), with a margin of
:data:`algorithms.rounds.FORECAST_MARGIN`. The forecast only sizes the round: which duels are planned, and when the
campaign stops, are the policy's and the stopping rule's as for a campaign called one call at a time.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from algorithms.rounds import next_round_size, remaining_duels, round_size

__all__ = ["BatchConfig", "parse_batch", "round_size", "next_round_size", "remaining_duels"]

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
