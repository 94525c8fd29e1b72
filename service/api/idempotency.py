"""``Idempotency-Key`` on the API's POST and PATCH routes, as Stripe's API honours it.

A request to ``/v1/...`` that creates or spends (create a campaign, a duel, a vote, a skip, a
run, a resume, an annotator, a continue by PATCH...) may carry an ``Idempotency-Key`` header
(1 to 255 printable ASCII characters). The first request with a key runs; its response (any
status below 500) is kept for :data:`TTL`. The same caller sending the same key again within
that time:

* with the same method, path, query and body: gets the first response back (its status and
  body, with ``Idempotent-Replayed: true``) and nothing is done again;
* with anything else: 422, naming the key;
* while the first request is still under way: 409 (retry later).

A response of 500 or more is not kept (the key is free again: a retry runs). The caller is a
hash of the request's ``Authorization`` header: two callers never share a key. Keys live in the
``idempotency_keys`` table, so every worker process of one database honours them; rows older
than :data:`TTL` are deleted as new keys arrive.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import json
from typing import Any

import anyio
from sqlalchemy import delete, select
from sqlalchemy.dialects.postgresql import insert as pg_insert
from sqlalchemy.dialects.sqlite import insert as sqlite_insert

from ..db import Database
from ..models import IdempotencyKey, utcnow

HEADER = b"idempotency-key"
#: How long a key's first response is given back.
TTL = dt.timedelta(hours=24)
#: The methods whose requests a key covers.
METHODS = frozenset({"POST", "PATCH"})
MAX_KEY_CHARS = 255
#: A response larger than this is not kept (the key is released; the API's answers are far smaller).
MAX_KEPT_BYTES = 4 * 1024 * 1024


def request_hash(method: str, path: str, query: bytes, body: bytes) -> str:
    h = hashlib.sha256()
    for part in (method.encode(), path.encode("utf-8", "surrogateescape"), query, body):
        h.update(len(part).to_bytes(8, "big"))
        h.update(part)
    return h.hexdigest()


def caller_of(headers: list[tuple[bytes, bytes]]) -> str:
    auth = next((v for k, v in headers if k == b"authorization"), b"")
    return hashlib.sha256(b"llmduel-idempotency\0" + auth).hexdigest()


def begin_tx(db: Database, caller: str, key: str, digest: str) -> tuple[str, Any]:
    """Claim ``key`` for this request: ``("new", None)``, ``("replay", row)``, ``("mismatch", None)``
    or ``("busy", None)`` (the first request with the key is still under way)."""
    now = utcnow()
    ins = pg_insert if db.engine.dialect.name == "postgresql" else sqlite_insert
    with db.write() as s:
        s.execute(delete(IdempotencyKey).where(IdempotencyKey.created_at < now - TTL))
        added = s.execute(
            ins(IdempotencyKey)
            .values(caller=caller, key=key, request_hash=digest, created_at=now)
            .on_conflict_do_nothing()
            .returning(IdempotencyKey.key)
        ).first()
        if added is not None:
            return "new", None
        row = s.execute(
            select(
                IdempotencyKey.request_hash,
                IdempotencyKey.status_code,
                IdempotencyKey.content_type,
                IdempotencyKey.response_body,
            ).where(IdempotencyKey.caller == caller, IdempotencyKey.key == key)
        ).one_or_none()
    if row is None:  # deleted meanwhile (a 5xx released it): run this one
        return begin_tx(db, caller, key, digest)
    if row.request_hash != digest:
        return "mismatch", None
    if row.status_code is None:
        return "busy", None
    return "replay", row


def finish_tx(db: Database, caller: str, key: str, *, status: int | None, content_type: str, body: str | None) -> None:
    """Keep the first response (``status`` None: release the key instead)."""
    with db.write() as s:
        where = (IdempotencyKey.caller == caller, IdempotencyKey.key == key)
        if status is None:
            s.execute(delete(IdempotencyKey).where(*where))
            return
        row = s.execute(select(IdempotencyKey).where(*where)).scalar_one_or_none()
        if row is not None:
            row.status_code, row.content_type, row.response_body = status, content_type[:200], body


def _valid_key(raw: bytes) -> str | None:
    try:
        key = raw.decode("ascii")
    except UnicodeDecodeError:
        return None
    if not 1 <= len(key) <= MAX_KEY_CHARS or not all(32 < ord(ch) < 127 for ch in key):
        return None
    return key


async def _send_json(send, status: int, detail: str, extra: tuple[tuple[bytes, bytes], ...] = ()) -> None:
    body = json.dumps({"detail": detail}).encode()
    headers = [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode()), *extra]
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": body})


class Idempotency:
    """ASGI middleware: the ``Idempotency-Key`` header on ``/v1/`` POST and PATCH requests."""

    def __init__(self, app: Any) -> None:
        self.app = app

    async def __call__(self, scope, receive, send) -> None:
        if scope["type"] != "http" or scope["method"] not in METHODS or not scope["path"].startswith("/v1/"):
            return await self.app(scope, receive, send)
        raw = next((v for k, v in scope.get("headers", ()) if k == HEADER), None)
        if raw is None:
            return await self.app(scope, receive, send)
        key = _valid_key(raw)
        if key is None:
            return await _send_json(
                send, 422, f"Idempotency-Key: 1 to {MAX_KEY_CHARS} printable ASCII characters without spaces"
            )
        chunks: list[bytes] = []
        while True:  # the whole body, to hash it (BodySizeLimit, outside, bounds it)
            message = await receive()
            if message["type"] != "http.request":
                return
            chunks.append(message.get("body", b""))
            if not message.get("more_body"):
                break
        body = b"".join(chunks)
        db: Database = scope["app"].state.db
        caller = caller_of(scope.get("headers", []))
        digest = request_hash(scope["method"], scope["path"], scope.get("query_string", b""), body)
        state, row = await anyio.to_thread.run_sync(begin_tx, db, caller, key, digest)
        if state == "mismatch":
            return await _send_json(
                send,
                422,
                f"Idempotency-Key {key!r} was already used with another request (method, path or body); "
                "use a new key for a new request",
            )
        if state == "busy":
            return await _send_json(
                send,
                409,
                f"a request with Idempotency-Key {key!r} is still under way; retry later",
                ((b"retry-after", b"1"),),
            )
        if state == "replay":
            data = (row.response_body or "").encode()
            headers = [
                (b"content-type", (row.content_type or "application/json").encode()),
                (b"content-length", str(len(data)).encode()),
                (b"idempotent-replayed", b"true"),
            ]
            await send({"type": "http.response.start", "status": int(row.status_code), "headers": headers})
            await send({"type": "http.response.body", "body": data})
            return
        await self._first(scope, body, send, db=db, caller=caller, key=key)

    async def _first(self, scope, body: bytes, send, *, db: Database, caller: str, key: str) -> None:
        """Run the first request with ``key`` and keep its response."""
        sent = False

        async def replay_receive():
            nonlocal sent
            if not sent:
                sent = True
                return {"type": "http.request", "body": body, "more_body": False}
            return {"type": "http.disconnect"}

        status: int | None = None
        content_type = "application/json"
        out: list[bytes] = []
        size = 0

        async def capture(message) -> None:
            nonlocal status, content_type, size
            if message["type"] == "http.response.start":
                status = int(message["status"])
                for k, v in message.get("headers", ()):
                    if k.lower() == b"content-type":
                        content_type = v.decode("latin-1")
            elif message["type"] == "http.response.body":
                chunk = message.get("body", b"")
                size += len(chunk)
                if size <= MAX_KEPT_BYTES:
                    out.append(chunk)
            await send(message)

        kept: int | None = None
        text: str | None = None
        try:
            await self.app(scope, replay_receive, capture)
            if status is not None and status < 500 and size <= MAX_KEPT_BYTES:
                try:
                    text = b"".join(out).decode("utf-8")
                except UnicodeDecodeError:
                    text = None
                if text is not None and "\x00" not in text:
                    kept = status
        finally:
            with anyio.CancelScope(shield=True):
                await anyio.to_thread.run_sync(
                    lambda: finish_tx(db, caller, key, status=kept, content_type=content_type, body=text)
                )
