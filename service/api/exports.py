"""The audit trail: ``GET /v1/campaigns/{id}/export`` (a campaign's results as files,
service/campaigns/results.py), ``GET /v1/campaigns/{id}/judge-bias``, and
``POST /v1/campaigns/{id}/answers`` (answers a team already has, into the answer store:
service/campaigns/answer_import.py)."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Query
from fastapi.responses import StreamingResponse
from pydantic import BaseModel, Field

from .. import schemas
from ..campaigns.answer_import import import_answers
from ..campaigns.export_stream import buffered
from .deps import Admin, CampaignsDep, ResultsDep
from .routes import ERRORS, Id, _t

router = APIRouter()


class ExportOut(BaseModel):
    campaign_id: int
    files: dict[str, str] = Field(
        description="File name -> text: certificate.json, battles.jsonl (FastChat battle log), matrix.csv, "
        "ranking.csv, ranking.json, ranking_by_category.csv, judge_bias.json, judgments.jsonl (every judge "
        "call), model_answer/<model>.jsonl (every answer, arena-hard-auto's layout)."
    )
    images: dict[str, str] = Field(
        default_factory=dict,
        description="File name -> base64 bytes of every image the prompts and answers name, as stored: "
        "images/<sha256>.<png|jpg|webp|gif> (the battle log names an image [image sha256:<hex>]).",
    )


@router.get(
    "/v1/campaigns/{campaign_id}/export",
    response_model=ExportOut,
    responses=ERRORS,
    tags=["campaigns"],
    summary="The campaign's results as files: certificate, battle log, preference matrix, ranking",
)
async def export_campaign(campaign_id: Id, results: ResultsDep, _: Admin):
    # written as the log is read, a page of duels at a time (service/campaigns/export_stream.py)
    pieces = await _t(results.export_stream, campaign_id)
    return StreamingResponse(buffered(pieces), media_type="application/json")


class RankingPageOut(BaseModel):
    campaign_id: int
    category: str | None = Field(description="The category of these rows; None: the whole campaign's ranking.")
    categories: list[dict[str, Any]] = Field(
        description="Every prompt category with counted duels: {category, duels} ((none): prompts without one)."
    )
    total: int = Field(description="Rows of the ranking (its models).")
    offset: int
    limit: int
    rows: list[dict[str, Any]] = Field(
        description="The rows of ranking.json (rank, model, win_rate, ci_low, ci_high (anytime-valid, every model "
        "at once), bootstrap_low, bootstrap_high (None unless bootstrap=true), duels, costs, spend), or with "
        "category those of ranking_by_category.csv."
    )


@router.get(
    "/v1/campaigns/{campaign_id}/ranking",
    response_model=RankingPageOut,
    responses=ERRORS,
    tags=["campaigns"],
    summary="The ranking (win rate against the field, anytime-valid intervals), a page at a time, or one category's",
)
async def ranking_page(
    campaign_id: Id,
    results: ResultsDep,
    _: Admin,
    category: Annotated[str | None, Query(max_length=200)] = None,
    offset: Annotated[int, Query(ge=0, le=2**31)] = 0,
    limit: Annotated[int, Query(ge=1, le=1000)] = 100,
    bootstrap: bool = False,
):
    return await _t(results.ranking_page, campaign_id, category, offset=offset, limit=limit, bootstrap=bootstrap)


class RateOut(BaseModel):
    count: int = Field(description="Verdicts with the property.")
    of: int = Field(description="Verdicts counted.")
    rate: float | None = Field(description="count / of (None when of = 0).")
    low: float | None = Field(description="Lower end of the 95% Wilson score interval.")
    high: float | None = Field(description="Upper end of the 95% Wilson score interval.")


class SelfJudgingOut(BaseModel):
    model: str = Field(description="The contestant that the judge also is.")
    wins: RateOut = Field(description="Its decisive duels won, as judged by itself.")


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
    larger_image_wins: RateOut | None = Field(
        None,
        description="Image answers: share of decisive duels (images of different sizes, width x height) won by "
        "the larger image; None when the campaign has no image answers.",
    )
    limits: dict[str, float] = Field(description="The warning thresholds of the three rates.")
    warnings: list[str] = Field(
        description="A sentence per rate past its limit in either direction (from at least 10 verdicts), and one per "
        "contestant the judge itself is."
    )
    self_judging: list[SelfJudgingOut] = Field(
        default_factory=list,
        description="Contestants that one of the judge's own clients calls (same kind, model and base URL): the "
        "decisive duels each won as that judge saw them.",
    )
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


class AnswersImportOut(BaseModel):
    model: str
    imported: int = Field(description="Answers stored now (nothing charged).")
    already_stored: int = Field(description="Answers the store had (or a call was producing): left as they were.")
    duplicates: int = Field(description="Repeated question ids of the body (the first one counts).")
    unknown: int = Field(description="Answers whose question id the campaign does not have.")
    unknown_question_ids: list[str] = Field(description="The first 20 of those ids.")


@router.post(
    "/v1/campaigns/{campaign_id}/answers",
    response_model=AnswersImportOut,
    responses=ERRORS,
    tags=["campaigns"],
    summary="Import a model's answers (arena-hard model_answer files) into the answer store",
    description="Each answer becomes a stored answer of the model for the campaign's prompt with that question id, "
    "so duels take it at zero cost (docs/reuse.md). Nothing is charged; a stored answer is never replaced; the "
    "model must use the answer store (answers: reuse, a provider client).",
)
async def import_model_answers(campaign_id: Id, body: schemas.AnswersImportIn, campaigns: CampaignsDep, _: Admin):
    pairs = [(a.question_id, a.text) for a in body.answers]
    return await _t(import_answers, campaigns.db, campaign_id, body.model, pairs)


class StyleRowOut(BaseModel):
    rank: int
    model: str
    rating: float = Field(description="Elo-scale rating, 1000 + (400 / ln 10) theta.")
    lower: float = Field(description="95% Wald lower bound (descriptive).")
    upper: float = Field(description="95% Wald upper bound (descriptive).")


class StyleOut(BaseModel):
    campaign_id: int
    duels: int = Field(description="Counted duels with both answers stored as text.")
    raw: list[StyleRowOut] = Field(description="The Bradley-Terry ranking of the counted duels.")
    controlled: list[StyleRowOut] = Field(
        description="The same with the answers' style (words, headers, lists, bold) held fixed."
    )
    coefficients: dict[str, dict[str, float]] = Field(
        description="Per style feature: gamma (log-odds per standard deviation of the feature's normalised difference) and its se."
    )
    leader_raw: str | None
    leader_controlled: str | None
    note: str


@router.get(
    "/v1/campaigns/{campaign_id}/style",
    response_model=StyleOut,
    responses=ERRORS,
    tags=["campaigns"],
    summary="The ranking with the answers' style held fixed (style control), beside the raw Bradley-Terry ranking",
    description="After LMArena's style control and AlpacaEval's length-controlled win rate; descriptive, not part "
    "of the certificate (docs/service.md, Style control).",
)
async def style_controlled_ranking(campaign_id: Id, results: ResultsDep, _: Admin):
    return await _t(results.style, campaign_id)
