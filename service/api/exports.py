"""``GET /v1/campaigns/{id}/export`` (a campaign's results as files, service/campaigns/results.py) and ``GET /v1/campaigns/{id}/judge-bias``."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter
from pydantic import BaseModel, Field

from .deps import Admin, ResultsDep
from .routes import ERRORS, Id, _t

router = APIRouter()


class ExportOut(BaseModel):
    campaign_id: int
    files: dict[str, str] = Field(
        description="File name -> text: certificate.json, battles.jsonl (FastChat battle log), matrix.csv, "
        "ranking.csv, ranking.json, ranking_by_category.csv, judge_bias.json."
    )


@router.get(
    "/v1/campaigns/{campaign_id}/export",
    response_model=ExportOut,
    responses=ERRORS,
    tags=["campaigns"],
    summary="The campaign's results as files: certificate, battle log, preference matrix, ranking",
)
async def export_campaign(campaign_id: Id, results: ResultsDep, _: Admin):
    return await _t(results.export, campaign_id)


class RateOut(BaseModel):
    count: int = Field(description="Verdicts with the property.")
    of: int = Field(description="Verdicts counted.")
    rate: float | None = Field(description="count / of (None when of = 0).")
    low: float | None = Field(description="Lower end of the 95% Wilson score interval.")
    high: float | None = Field(description="Upper end of the 95% Wilson score interval.")


class JudgeBiasOut(BaseModel):
    campaign_id: int
    judge: str | None = Field(description="The judge kind.")
    orders: str | None = Field(description="An LLM judge's orders (both, one or auto); None for other judges.")
    verdicts: int = Field(description="Judgements counted (a reused stored verdict is not counted again).")
    first_position: RateOut = Field(description="Share of decisive verdicts that picked the answer shown first.")
    order_disagreement: RateOut | None = Field(
        description="Share of duels read in both orders whose two orders disagree (the flip rate); None when "
        "no duel was read in both orders and orders is not both."
    )
    order_ties: RateOut | None = Field(
        None, description="Share of duels read in both orders where both orders said tie; None like order_disagreement."
    )
    modes: dict[str, int] | None = Field(
        None,
        description="An LLM judge (kind llm): its verdicts read in both orders ('both') and in one ('one'); "
        "with orders auto the mode of each duel is chosen from the earlier verdicts.",
    )
    one_order_cheaper: bool | None = Field(
        None,
        description="An LLM judge: whether the measured tie and flip rates say one order per duel costs less per "
        "certificate than both (flip rate below (1 - tie rate) / 2); None before 8 duels read in both orders.",
    )
    longer_wins: RateOut = Field(
        description="Share of decisive duels (answers of different lengths) won by the longer."
    )
    limits: dict[str, float] = Field(description="The warning thresholds of the three rates.")
    warnings: list[str] = Field(description="A sentence per rate past its limit (from at least 10 verdicts).")
    jury: dict[str, Any] | None = Field(
        None,
        description="A jury: its combine rule and, per juror, its agreement with the jury's verdicts and its own "
        "first_position rate.",
    )


@router.get(
    "/v1/campaigns/{campaign_id}/judge-bias",
    response_model=JudgeBiasOut,
    responses=ERRORS,
    tags=["campaigns"],
    summary="How the judge leans: first position, order disagreement, longer answer, with Wilson intervals",
)
async def judge_bias(campaign_id: Id, results: ResultsDep, _: Admin):
    return await _t(results.judge_bias, campaign_id)
