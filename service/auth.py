"""Authentication: the admin key and per-campaign annotator tokens.

Both are sent as ``Authorization: Bearer <secret>``. The admin key
(``LLMDUEL_API_KEY``) works everywhere. An annotator token (created by
``POST /v1/campaigns/{id}/annotators``) works only for its campaign; only its
SHA-256 is stored.
"""

from __future__ import annotations

import hashlib
import hmac
import secrets
import time
from dataclasses import dataclass

from fastapi import HTTPException, Request
from sqlalchemy import select

from .models import Annotator

TOKEN_PREFIX = "ann_"


@dataclass(frozen=True)
class Principal:
    admin: bool
    campaign_id: int | None = None  # the annotator's campaign
    annotator_id: int | None = None

    @property
    def label(self) -> str:
        return "admin" if self.admin else f"annotator:{self.annotator_id}"

    def can_access(self, campaign_id: int) -> bool:
        return self.admin or self.campaign_id == campaign_id


def new_token() -> str:
    return TOKEN_PREFIX + secrets.token_urlsafe(32)


def hash_token(token: str) -> str:
    return hashlib.sha256(token.encode("utf-8", "surrogatepass")).hexdigest()


def _unauthorized(message: str) -> HTTPException:
    return HTTPException(status_code=401, detail=message, headers={"WWW-Authenticate": "Bearer"})


def bearer_token(request: Request) -> str | None:
    header = request.headers.get("authorization")
    if not header:
        return None
    scheme, _, value = header.partition(" ")
    if scheme.lower() != "bearer" or not value.strip():
        return None
    return value.strip()


TOKEN_CACHE_SECONDS = 30.0
TOKEN_CACHE_SIZE = 10_000


def _lookup_annotator(service, token: str) -> tuple[int, int] | None:
    """(annotator id, campaign id) for a valid token; cached briefly in-process."""
    if not token.startswith(TOKEN_PREFIX) or len(token) > 200:
        return None
    digest = hash_token(token)
    cache: dict = service.token_cache
    now = time.monotonic()
    hit = cache.get(digest)
    if hit is not None and hit[2] > now:
        return hit[0], hit[1]
    with service.db.read() as s:
        row = s.execute(
            select(Annotator.id, Annotator.campaign_id).where(
                Annotator.token_hash == digest, Annotator.revoked_at.is_(None)
            )
        ).first()
    if row is None:
        cache.pop(digest, None)
        return None
    if len(cache) >= TOKEN_CACHE_SIZE:
        cache.clear()
    cache[digest] = (int(row.id), int(row.campaign_id), now + TOKEN_CACHE_SECONDS)
    return int(row.id), int(row.campaign_id)


def authenticate(request: Request) -> Principal:
    """Resolve the caller (runs in a worker thread: it may query the database)."""
    token = bearer_token(request)
    if token is None:
        raise _unauthorized("missing credentials: send 'Authorization: Bearer <key or annotator token>'")
    service = request.app.state.service
    admin_key = service.settings.api_key
    if admin_key and hmac.compare_digest(token.encode("utf-8", "surrogatepass"), admin_key.encode("utf-8")):
        return Principal(admin=True)
    found = _lookup_annotator(service, token)
    if found is None:
        raise _unauthorized("invalid credentials")
    return Principal(admin=False, campaign_id=found[1], annotator_id=found[0])


def require_admin(principal: Principal) -> Principal:
    if not principal.admin:
        raise HTTPException(status_code=403, detail="this action needs the admin API key")
    return principal


def require_campaign(principal: Principal, campaign_id: int) -> Principal:
    if not principal.can_access(campaign_id):
        raise HTTPException(status_code=403, detail="this token does not give access to this campaign")
    return principal
