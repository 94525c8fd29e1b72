"""Every error is JSON ``{"detail": ...}``: no HTML, no stack traces, no 500 on bad input."""

from __future__ import annotations

import logging
import typing
from typing import Any

import asyncpg
from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from pydantic import BaseModel
from sqlalchemy.exc import DBAPIError, InterfaceError, OperationalError, SQLAlchemyError
from sqlalchemy.exc import TimeoutError as PoolTimeout
from starlette.exceptions import HTTPException as StarletteHTTPException

from ..campaigns import CampaignEnded, Conflict, DomainError, Forbidden, NotFound, Unprocessable
from ..db import HotPathUnavailable, is_connection_error
from ..log_redaction import redact
from ..schemas.suggest import did_you_mean

log = logging.getLogger("llmduel.api")

DB_UNAVAILABLE = "the database is unavailable; retry later"

# The HTTP status of each domain error class (the most specific class listed wins).
DOMAIN_STATUS: tuple[tuple[type[DomainError], int], ...] = (
    (CampaignEnded, 409),
    (NotFound, 404),
    (Conflict, 409),
    (Forbidden, 403),
    (Unprocessable, 422),
    (DomainError, 400),
)


def domain_status(exc: DomainError) -> int:
    """The HTTP status for a domain error."""
    return next(code for cls, code in DOMAIN_STATUS if isinstance(exc, cls))


def _body_model(request: Request) -> type[BaseModel] | None:
    """The pydantic model of the route's JSON body, if it has one."""
    field = getattr(request.scope.get("route"), "body_field", None)
    annotation = getattr(getattr(field, "field_info", None), "annotation", None)
    for tp in (annotation, *typing.get_args(annotation)):
        if isinstance(tp, type) and issubclass(tp, BaseModel):
            return tp
    return None


def _clean_errors(errors: list[dict[str, Any]], body: type[BaseModel] | None = None) -> list[dict[str, Any]]:
    """Pydantic errors without their echoed input or exception objects; an unknown key of the
    body gets the closest known key (``did you mean 'delta'?``)."""
    out = []
    for e in errors:
        loc = [x if isinstance(x, (str, int)) else str(x) for x in e.get("loc", ())]
        msg = str(e.get("msg", "invalid value"))
        if e.get("type") == "extra_forbidden" and body is not None and loc[:1] == ["body"]:
            hint = did_you_mean(body, loc[1:])
            msg += f"; did you mean {hint!r}?" if hint else ""
        out.append({"loc": loc, "msg": msg[:1000], "type": str(e.get("type", "value_error"))})
    return out


def is_db_unavailable(exc: BaseException) -> bool:
    """Did ``exc`` come from a database that cannot be reached (SQLAlchemy, or the hot path's asyncpg)?"""
    if isinstance(exc, (OperationalError, InterfaceError, PoolTimeout)) or is_connection_error(exc):
        return True
    return isinstance(exc, DBAPIError) and bool(exc.connection_invalidated)


def unreadable_body(exc: StarletteHTTPException) -> dict[str, Any] | None:
    """The 422 error for a JSON body FastAPI could not parse (it answers 400 "There was an
    error parsing the body" for what is not a plain JSON syntax error: invalid UTF-8, nesting
    deeper than the parser's recursion limit); None for any other HTTP error."""
    cause = exc.__cause__
    if exc.status_code != 400 or cause is None or isinstance(cause, StarletteHTTPException):
        return None
    if isinstance(cause, RecursionError):
        msg = "the request body is nested too deeply"
    elif isinstance(cause, UnicodeError):
        msg = "the request body is not valid UTF-8"
    elif isinstance(cause, ValueError):
        msg = "the request body is not valid JSON"
    else:
        return None
    return {"loc": ["body"], "msg": msg, "type": "json_invalid"}


def install_error_handlers(app: FastAPI) -> None:
    @app.exception_handler(DomainError)
    async def _domain(request: Request, exc: DomainError) -> JSONResponse:
        return JSONResponse({"detail": exc.detail}, status_code=domain_status(exc))

    @app.exception_handler(RequestValidationError)
    async def _validation(request: Request, exc: RequestValidationError) -> JSONResponse:
        return JSONResponse({"detail": _clean_errors(list(exc.errors()), _body_model(request))}, status_code=422)

    @app.exception_handler(StarletteHTTPException)
    async def _http(request: Request, exc: StarletteHTTPException) -> JSONResponse:
        unreadable = unreadable_body(exc)
        if unreadable is not None:
            return JSONResponse({"detail": [unreadable]}, status_code=422)
        detail = exc.detail if exc.detail is not None else "error"
        return JSONResponse({"detail": detail}, status_code=exc.status_code, headers=getattr(exc, "headers", None))

    # Specific classes: handled by the ExceptionMiddleware (answered, not re-raised).
    # SQLAlchemy for everything; asyncpg for the hot path's own connections (service.db.HotPool).
    async def _database(request: Request, exc: Exception) -> JSONResponse:
        if is_db_unavailable(exc):
            log.warning("database unavailable: %s", type(exc).__name__)
            return JSONResponse({"detail": DB_UNAVAILABLE}, status_code=503, headers={"Retry-After": "1"})
        log.error("database error on %s %s: %s", request.method, redact(request.url.path), type(exc).__name__)
        return JSONResponse({"detail": "database error; retry later"}, status_code=503, headers={"Retry-After": "1"})

    for cls in (
        SQLAlchemyError,
        HotPathUnavailable,
        asyncpg.PostgresError,
        asyncpg.InterfaceError,
        asyncpg.exceptions.InternalClientError,
    ):
        app.add_exception_handler(cls, _database)

    @app.exception_handler(Exception)
    async def _unexpected(request: Request, exc: Exception) -> JSONResponse:
        log.exception("unexpected error on %s %s", request.method, redact(request.url.path))
        return JSONResponse({"detail": "internal server error"}, status_code=500)


class ContainErrors:
    """ASGI middleware: an unexpected exception becomes a JSON 500 and stops here.

    Starlette's outermost middleware answers 500 but then re-raises, and uvicorn
    closes a connection whose request raised: a client's keep-alive connection
    would be reset after every 500. Here the error is logged with its traceback,
    answered (when no response was started yet) and not re-raised, so the
    connection stays usable. A failure after the response started cannot be
    answered any more; it is logged and the connection is left to the server.
    """

    def __init__(self, app):
        self.app = app

    async def __call__(self, scope, receive, send):
        if scope["type"] != "http":
            return await self.app(scope, receive, send)
        started = False

        async def tracking_send(message):
            nonlocal started
            if message["type"] == "http.response.start":
                started = True
            await send(message)

        try:
            await self.app(scope, receive, tracking_send)
        except Exception:
            log.exception("unexpected error on %s %s", scope.get("method"), redact(str(scope.get("path"))))
            if started:
                raise
            body = b'{"detail":"internal server error"}'
            await send(
                {
                    "type": "http.response.start",
                    "status": 500,
                    "headers": [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())],
                }
            )
            await send({"type": "http.response.body", "body": body})


class BodySizeLimit:
    """ASGI middleware: refuse request bodies larger than ``max_bytes`` with 413."""

    def __init__(self, app, max_bytes: int):
        self.app = app
        self.max_bytes = max_bytes

    async def __call__(self, scope, receive, send):
        if scope["type"] != "http":
            return await self.app(scope, receive, send)
        for name, value in scope.get("headers", ()):
            if name == b"content-length":
                try:
                    too_big = int(value) > self.max_bytes
                except ValueError:
                    too_big = False
                if too_big:
                    return await self._reject(send)
        seen = 0

        async def limited_receive():
            nonlocal seen
            message = await receive()
            if message["type"] == "http.request":
                seen += len(message.get("body", b""))
                if seen > self.max_bytes:
                    raise _TooLarge()
            return message

        try:
            await self.app(scope, limited_receive, send)
        except _TooLarge:
            await self._reject(send)

    async def _reject(self, send):
        body = b'{"detail":"request body too large"}'
        await send(
            {
                "type": "http.response.start",
                "status": 413,
                "headers": [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())],
            }
        )
        await send({"type": "http.response.body", "body": body})


class _TooLarge(Exception):
    pass
