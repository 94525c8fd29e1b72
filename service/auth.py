"""Authentication: the admin key and per-campaign annotator tokens.

Both are sent as ``Authorization: Bearer <secret>``. The admin key
(``LLMDUEL_API_KEY``) works everywhere. An annotator token (created by
``POST /v1/campaigns/{id}/annotators``) works only for its campaign; only its
SHA-256 is stored.
"""

from __future__ import annotations

import hashlib
import hmac
import math
import secrets
import time
from dataclasses import dataclass
from typing import Any

from fastapi import HTTPException, Request
from sqlalchemy import bindparam, select

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


# An annotator token found valid is cached in-process: its entry lives
# TOKEN_CACHE_SECONDS, but it is trusted only while this process's revocation watch
# (watch_revocations) is fresh: a successful poll started less than
# REVOCATION_SECONDS ago. Each poll confirms every cached token against the database
# and drops the ones no longer valid. So a revoked token is refused by the worker that
# revoked it at once, and by every other worker within REVOCATION_SECONDS, while
# valid tokens cost no database lookup per request (docs/service.md, "Annotators").
# A process without a running watch (or whose polls fail) trusts no cached entry and
# looks each token up.
TOKEN_CACHE_SECONDS = 30.0
TOKEN_CACHE_SIZE = 10_000
REVOCATION_SECONDS = 2.0  # the bound: a revoked token is refused everywhere within this
REVOCATION_POLL_SECONDS = 0.75  # how often the watch polls (well inside the bound)


def _token_digest(token: str) -> str | None:
    """The SHA-256 under which an annotator token is stored; None for what cannot be one."""
    if not token.startswith(TOKEN_PREFIX) or len(token) > 200:
        return None
    return hash_token(token)


class TokenCache:
    """This process's cache of valid annotator tokens and the freshness of its revocation watch.

    Built once per app (:class:`service.campaigns.Campaigns`); the request path reads it, the
    watch (:func:`watch_revocations`) refreshes it, a revocation here drops its entry."""

    def __init__(self, db: Any):
        self.db = db
        self.entries: dict[str, tuple[int, int, float]] = {}  # digest -> (annotator id, campaign id, expiry)
        self.polled_at = -math.inf  # monotonic start of the last successful revocation poll

    def drop(self, digest: str) -> None:
        self.entries.pop(digest, None)

    def cached(self, digest: str) -> tuple[int, int] | None:
        """(annotator id, campaign id) from the cache, without I/O (None: not cached or not trusted)."""
        hit = self.entries.get(digest)
        if hit is None:
            return None
        now = time.monotonic()
        if hit[2] > now and now - self.polled_at < REVOCATION_SECONDS:
            return hit[0], hit[1]
        return None

    def lookup(self, digest: str) -> tuple[int, int] | None:
        """(annotator id, campaign id) for a valid token's digest (blocking); cached."""
        hit = self.cached(digest)
        if hit is not None:
            return hit
        cache = self.entries
        now = time.monotonic()
        with self.db.read() as s:
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

    def poll(self) -> None:
        """One poll of the revocation watch (blocking): confirm every cached token against the
        database, drop those no longer valid (revoked, or gone), and mark the cache trusted as
        of this poll's start.

        No clock is compared: the poll asks the database which of the cached digests are still
        valid now, so a revocation stamped by a worker whose clock is off, or committed long
        after its stamp, is seen by the first poll that starts after its commit. The cost is
        one indexed query per REVALIDATE_CHUNK cached tokens (``annotators.token_hash`` is unique).
        """
        started = time.monotonic()
        digests = list(self.entries)
        valid: set[str] = set()
        if digests:
            with self.db.engine.connect() as conn:  # Core, no ORM session: this runs every poll
                for k in range(0, len(digests), REVALIDATE_CHUNK):
                    chunk = digests[k : k + REVALIDATE_CHUNK]
                    valid.update(conn.execute(_STILL_VALID, {"digests": chunk}).scalars())
        for digest in digests:
            if digest not in valid:
                self.entries.pop(digest, None)
        self.polled_at = started  # what this poll confirmed is as of its start


REVALIDATE_CHUNK = 500  # digests per query (well under SQLite's bound-parameter limit)


_STILL_VALID = select(Annotator.token_hash).where(
    Annotator.token_hash.in_(bindparam("digests", expanding=True)), Annotator.revoked_at.is_(None)
)
_WATCH_THREAD = None  # the watch's own thread slot, so a busy thread pool cannot delay it


async def watch_revocations(tokens: TokenCache) -> None:
    """The revocation watch of a process (a task for the app's lifetime): poll every
    REVOCATION_POLL_SECONDS; a failed poll is retried at the next one (meanwhile the
    cached tokens stop being trusted, see :meth:`TokenCache.cached`)."""
    import asyncio
    import logging

    import anyio

    global _WATCH_THREAD
    if _WATCH_THREAD is None:
        _WATCH_THREAD = anyio.CapacityLimiter(1)
    failures = 0
    while True:
        try:
            await anyio.to_thread.run_sync(tokens.poll, limiter=_WATCH_THREAD)
            failures = 0
        except Exception as exc:  # the database is away: look tokens up meanwhile
            failures += 1
            if failures == 1:
                logging.getLogger("llmduel.auth").warning("revocation watch: %s", type(exc).__name__)
        await asyncio.sleep(REVOCATION_POLL_SECONDS)


def _admin_or_token(request: Request) -> tuple[Principal | None, str]:
    token = bearer_token(request)
    if token is None:
        raise _unauthorized("missing credentials: send 'Authorization: Bearer <key or annotator token>'")
    admin_key = request.app.state.campaigns.settings.api_key
    if admin_key and hmac.compare_digest(token.encode("utf-8", "surrogatepass"), admin_key.encode("utf-8")):
        return Principal(admin=True), token
    return None, token


def _annotator(found: tuple[int, int] | None) -> Principal:
    if found is None:
        raise _unauthorized("invalid credentials")
    return Principal(admin=False, campaign_id=found[1], annotator_id=found[0])


def authenticate(request: Request) -> Principal:
    """Resolve the caller (blocking: an uncached token is looked up in the database)."""
    principal, token = _admin_or_token(request)
    if principal is not None:
        return principal
    digest = _token_digest(token)
    return _annotator(None if digest is None else request.app.state.campaigns.tokens.lookup(digest))


async def authenticate_async(request: Request) -> Principal:
    """:func:`authenticate` on the event loop: only an uncached token goes to a worker thread."""
    import anyio

    principal, token = _admin_or_token(request)
    if principal is not None:
        return principal
    digest = _token_digest(token)
    if digest is None:
        return _annotator(None)
    tokens: TokenCache = request.app.state.campaigns.tokens
    found = tokens.cached(digest)
    if found is None:
        found = await anyio.to_thread.run_sync(tokens.lookup, digest)
    return _annotator(found)


def require_admin(principal: Principal) -> Principal:
    if not principal.admin:
        raise HTTPException(status_code=403, detail="this action needs the admin API key")
    return principal


def require_campaign(principal: Principal, campaign_id: int) -> Principal:
    if not principal.can_access(campaign_id):
        raise HTTPException(status_code=403, detail="this token does not give access to this campaign")
    return principal
