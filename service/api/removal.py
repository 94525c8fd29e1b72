"""``POST /v1/campaigns/{id}/archive``, ``POST /v1/campaigns/{id}/unarchive`` and
``DELETE /v1/campaigns/{id}`` (service/campaigns/removal.py says what each keeps)."""

from __future__ import annotations

import datetime as dt
from typing import Annotated, Literal

from fastapi import APIRouter, Query
from pydantic import BaseModel, Field

from ..campaigns.removal import delete_campaign, set_archived
from .deps import Admin, CampaignsDep
from .routes import ERRORS, Id, _t

router = APIRouter()


class ArchivedOut(BaseModel):
    id: int
    archived: bool
    archived_at: dt.datetime | None


class DeletedOut(BaseModel):
    id: int
    deleted: bool
    stored: str = Field(description="keep or remove: what became of the store rows the campaign paid for.")
    stored_removed: dict[str, int] = Field(description="Answer and verdict store rows removed (0 with keep).")


@router.post(
    "/v1/campaigns/{campaign_id}/archive",
    response_model=ArchivedOut,
    responses=ERRORS,
    tags=["campaigns"],
    summary="Archive a campaign: hidden from the lists, every row kept (idempotent)",
)
async def archive_campaign(campaign_id: Id, campaigns: CampaignsDep, _: Admin):
    return await _t(set_archived, campaigns.db, campaign_id, True)


@router.post(
    "/v1/campaigns/{campaign_id}/unarchive",
    response_model=ArchivedOut,
    responses=ERRORS,
    tags=["campaigns"],
    summary="Bring an archived campaign back to the lists (idempotent)",
)
async def unarchive_campaign(campaign_id: Id, campaigns: CampaignsDep, _: Admin):
    return await _t(set_archived, campaigns.db, campaign_id, False)


@router.delete(
    "/v1/campaigns/{campaign_id}",
    response_model=DeletedOut,
    responses=ERRORS,
    tags=["campaigns"],
    summary="Delete an ended campaign and its rows (its ledger included); 409 while it runs",
    description="stored=keep (default) leaves the answers and verdicts it paid for in the shared stores, for other "
    "campaigns to reuse; stored=remove deletes them too.",
)
async def delete(
    campaign_id: Id,
    campaigns: CampaignsDep,
    _: Admin,
    stored: Annotated[
        Literal["keep", "remove"], Query(description="The store rows it paid for: keep or remove.")
    ] = "keep",
):
    return await _t(delete_campaign, campaigns.db, campaign_id, stored)
