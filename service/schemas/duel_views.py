"""Response bodies that show a duel: its answers, verdict and charges."""

from __future__ import annotations

import datetime as dt
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from algorithms.vocabulary import CampaignStatus, Choice, DuelStatus


class ChargeOut(BaseModel):
    id: int | None = None
    kind: str
    model_index: int | None
    amount: float
    reuses_charge_id: int | None = Field(
        None, description="A zero-cost reuse of a stored answer or verdict: the charge that paid for it."
    )
    reused: bool = Field(False, description="A zero-cost row: the answer or verdict came from the store.")
    provider_fault: str | None = Field(
        None, description="The call reported usage above its bound: charged at the bound (docs/reliability.md, Ledger)."
    )
    reported_cost: float | None = Field(None, description="With a provider fault: what the reported usage would cost.")
    created_at: dt.datetime


class ProviderFaultOut(BaseModel):
    side: str = Field(description="Whose call: a, b (the answers) or judge.")
    fault: str = Field(description="The model and the figure it reported.")
    reported_cost: float | None = Field(None, description="USD the reported usage would cost.")
    bound: float | None = Field(None, description="USD the call was charged: its bound.")
    output_tokens: int | None = None


class DuelOut(BaseModel):
    id: int
    campaign_id: int
    number: int
    status: DuelStatus
    prompt: str
    answer_a: str | None
    answer_b: str | None
    model_a: int | None = Field(None, description="Index of the model behind answer a (hidden from annotators).")
    model_b: int | None = None
    model_a_name: str | None = None
    model_b_name: str | None = None
    choice: Choice | None
    counted: bool
    score: float | None = Field(
        None,
        description="Score of the pair's first model (lower index) as recorded, in [0, 1]: 1 won, 0 lost, "
        "1/2 a tie under tie_policy=half; an LLM judge with graded verdicts gives values in between (e.g. 0.75).",
    )
    position: int | None = Field(
        None,
        description="Prompts sampled without replacement: the duel's position in its pair's sequence (the "
        "pair's q-th prompt of the campaign's secret permutation); None with replacement.",
    )
    record_seq: int | None = Field(
        None,
        description="When the policy counted the outcome (its event number; replay follows it). Without "
        "replacement a judged duel waits (None) until its pair's earlier positions are counted.",
    )
    judged_by: str | None = None
    judge: dict[str, Any] | None = None
    question_id: str | None = Field(None, description="The prompt's id (its position p1, p2, ... when it has none).")
    category: str | None = Field(None, description="The prompt's category, if it has one.")
    comment: str | None = Field(None, description="The note the annotator left with the vote, if any.")
    error: str | None
    cost: float
    charges: list[ChargeOut] | None = None
    provider_faults: list[ProviderFaultOut] = Field(
        default_factory=list,
        description="Calls of this duel whose provider reported usage above the call's bound (a provider fault).",
    )
    created_at: dt.datetime
    answered_at: dt.datetime | None
    judged_at: dt.datetime | None
    expires_at: dt.datetime
    campaign_status: CampaignStatus | None = None


class AnnotatorDuelOut(BaseModel):
    """A duel as the annotator who asked for it sees it: the prompt and two answers, nothing
    that tells which model gave which (docs/reliability.md, Blinding)."""

    model_config = ConfigDict(extra="forbid")

    id: int
    campaign_id: int
    status: DuelStatus
    prompt: str
    answer_a: str | None
    answer_b: str | None
    choice: Choice | None = Field(description="This annotator's vote, once cast.")
    error: str | None = Field(description="Why the duel cannot be voted on (one sentence per status).")
    created_at: dt.datetime
    expires_at: dt.datetime
    campaign_status: CampaignStatus | None
    comment: str | None = Field(None, description="This annotator's note with its vote, if any.")


# Admin view or annotator view; each matches only its own shape (extra="forbid").
AnyDuelOut = DuelOut | AnnotatorDuelOut


class DuelPage(BaseModel):
    items: list[DuelOut]
    total: int
    limit: int
    offset: int
    next_offset: int | None
