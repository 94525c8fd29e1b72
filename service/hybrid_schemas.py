"""Response shapes of the hybrid judge (the ``hybrid`` object of a campaign view)."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, Field


class HybridAgreementOut(BaseModel):
    decisive_votes: int = Field(description="Human votes for a or b on duels the automatic judge also called a or b.")
    agreeing: int = Field(description="Of those, the votes where the judge chose the same answer.")
    rate: float | None = Field(description="agreeing / decisive_votes (null before any).")
    interval: list[float] | None = Field(description="Wilson score interval of the rate at `confidence`.")
    confidence: float


class HybridOut(BaseModel):
    human_rate: float | Literal["active"]
    fee_per_vote: float
    human_votes: int = Field(description="Human votes recorded (each charged fee_per_vote).")
    human_votes_waiting: int = Field(description="Selected duels still waiting for a human vote (fee reserved).")
    human_votes_alone_estimate: int | None = Field(
        description="Estimated human votes a humans-only dctas-pc campaign would have needed for the same evidence "
        "(per pair: duels x Var(human score) / Var(hybrid estimate)); docs/service.md, Hybrid judge."
    )
    agreement: HybridAgreementOut
    agreement_warning: str | None = Field(
        description="Set when, on at least 10 decisive votes, the agreement's whole interval lies below 1/2."
    )
