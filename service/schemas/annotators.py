"""Response bodies that show an annotator: its one-time link and its record."""

from __future__ import annotations

import datetime as dt

from pydantic import BaseModel, Field


class AnnotatorOut(BaseModel):
    id: int
    campaign_id: int
    label: str | None
    token: str = Field(description="Shown once; only its hash is stored.")
    url: str = Field(description="The absolute voting link, /annotate/{token} (holds the token: send it privately).")


class AnnotatorRecord(BaseModel):
    id: int
    label: str | None
    votes: int = Field(description="Votes this annotator cast.")
    skips: int = Field(0, description="Duels this annotator skipped (handed back to the pool, not counted).")
    agreement: float | None = Field(
        description="Mean agreement of its votes on items others also voted on with the majority of their votes "
        "(docs/service.md, Annotators); null without shared items."
    )
    shared_items: int = Field(description="Distinct (prompt, model pair) items it shares with other annotators.")
    created_at: dt.datetime
    revoked_at: dt.datetime | None
