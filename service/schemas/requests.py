"""The smaller request bodies: campaign limits (PATCH), votes, runs, resumes, annotators, pilot forecasts,
imported answers."""

from __future__ import annotations

from typing import Annotated

from pydantic import AfterValidator, Field, model_validator

from algorithms.vocabulary import Choice
from service.schemas.campaign_create import ModelSpec
from service.schemas.common import MAX_PROMPTS, USD, Name, StrictModel, check_text

#: The longest imported answer (as long as a stored answer may be: service/stored_text.py MAX_ANSWER_CHARS).
MAX_ANSWER_CHARS = 1_000_000


class CampaignLimits(StrictModel):
    budget: USD | None = Field(None, description="New spend limit in USD (not below what is already spent).")
    max_duels: int | None = Field(
        None, ge=1, le=10**9, description="New cap on judged duels (not below the duels already judged)."
    )

    @model_validator(mode="after")
    def _some(self) -> "CampaignLimits":
        if self.budget is None and self.max_duels is None:
            raise ValueError("give budget and/or max_duels")
        return self


class VoteIn(StrictModel):
    choice: Choice = Field(description="The answers as shown: a, b, tie or both_bad.")
    comment: str | None = Field(
        None,
        max_length=2000,
        description="An optional note stored with the vote and exported (at most 2000 characters).",
    )


class RunIn(StrictModel):
    max_duels: int | None = Field(
        None, ge=1, le=10**9, description="Stop the run after this many duels (the campaign stays running)."
    )
    concurrency: int = Field(1, ge=1, le=32, description="Duels in flight at once.")


class ResumeIn(StrictModel):
    concurrency: int | None = Field(
        None, ge=1, le=32, description="Duels in flight at once (default: the run's own concurrency)."
    )


class PilotForecastIn(StrictModel):
    """The pilot forecast's options in a JSON body (the same as its query parameters)."""

    trials: int | None = Field(
        None, ge=10, le=1000, description="Simulated campaigns (absent: the query's, else the default)."
    )
    spread: float | None = Field(
        None,
        ge=0.01,
        le=5,
        description="Standard deviation of the prior's strengths (absent: the query's, else learned from "
        "the campaign's counts and the campaigns stored on the server).",
    )


class ImportedAnswer(StrictModel):
    question_id: Annotated[str, Field(min_length=1, max_length=200), AfterValidator(check_text)] = Field(
        description="The prompt's question id (its own, else its position p1, p2, ...)."
    )
    text: Annotated[str, Field(max_length=MAX_ANSWER_CHARS), AfterValidator(check_text)] = Field(
        description="The model's answer."
    )


class AnswersImportIn(StrictModel):
    """Answers a team already has (arena-hard's model_answer files), for the answer store."""

    model: Name = Field(description="The campaign's model these answers are from.")
    answers: list[ImportedAnswer] = Field(max_length=MAX_PROMPTS, description="The answers, one per question id.")


class AnnotatorIn(StrictModel):
    label: Name | None = None


class ModelDisableIn(StrictModel):
    """``POST /v1/campaigns/{id}/models/{name}/disable``."""

    reason: str | None = Field(None, max_length=500, description="Why (stored with the change and shown).")
    resume: bool = Field(
        True,
        description="Restart the background run if it had stalled (paused on its failure cap, or the campaign "
        "paused on a provider fault). false: change the model only.",
    )


class ModelReplaceIn(ModelDisableIn):
    """``POST /v1/campaigns/{id}/models/{name}/replace``: the new model, as in a campaign's ``models``."""

    model: ModelSpec = Field(description="The new model (name, client, cost as in POST /v1/campaigns).")
