"""``GET /v1/campaigns/{id}/export``: a campaign's results as files (service/campaigns/results.py)."""

from __future__ import annotations

from fastapi import APIRouter
from pydantic import BaseModel, Field

from .routes import ERRORS, Admin, Id, Svc, _t

router = APIRouter()


class ExportOut(BaseModel):
    campaign_id: int
    files: dict[str, str] = Field(
        description="File name -> text: certificate.json, battles.jsonl (FastChat battle log), matrix.csv, "
        "ranking.csv, ranking.json, ranking_by_category.csv."
    )


@router.get(
    "/v1/campaigns/{campaign_id}/export",
    response_model=ExportOut,
    responses=ERRORS,
    tags=["campaigns"],
    summary="The campaign's results as files: certificate, battle log, preference matrix, ranking",
)
async def export_campaign(campaign_id: Id, svc: Svc, _: Admin):
    return await _t(svc.export, campaign_id)
