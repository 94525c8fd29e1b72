"""FastAPI application factory: ``create_app(settings=None)``.

``uvicorn --factory service.app:create_app`` or ``llmduel serve``.
"""

from __future__ import annotations

import gc
import inspect
import logging
from contextlib import asynccontextmanager

import anyio
from fastapi import APIRouter, FastAPI

from . import api_docs, log_redaction, pricing, web
from .api import install_error_handlers, router
from .api.annotator_limits import AnnotatorRequestLimiter
from .api.errors import BodySizeLimit, ContainErrors
from .api.exports import router as exports_router
from .api.idempotency import Idempotency
from .api.removal import router as removal_router
from .auth import watch_revocations
from .campaigns import warm_policies
from .config import Settings, announce_generated_key
from .container import build_campaigns
from .db import Database, head_revision
from .demo import start_demo
from .health import DatabaseHealth

log = logging.getLogger("llmduel.app")

MAX_BODY_BYTES = 32 * 1024 * 1024


def prepare_database(settings: Settings, db: Database) -> None:
    """Bring the schema to head at start when configured (always for SQLite by default)."""
    if settings.auto_migrate == "never":
        return
    if settings.auto_migrate == "sqlite" and not db.is_sqlite:
        try:
            current = db.current_revision()
        except Exception as exc:  # database down at start: requests will get 503 until it returns
            log.warning("cannot check the schema revision (%s)", type(exc).__name__)
            return
        if current != head_revision():
            log.warning("database schema is at %s, not %s: run `llmduel db upgrade`", current, head_revision())
        return
    if db.current_revision() != head_revision():
        db.upgrade()


def _telemetry_option(settings: Settings) -> dict:
    """FastAPI's built-in OpenTelemetry hooks (recent FastAPI) look up the global
    providers on every request, a few % of a vote's CPU: on only when asked for
    (LLMDUEL_TELEMETRY=1)."""
    if settings.telemetry or "telemetry" not in inspect.signature(FastAPI.__init__).parameters:
        return {}
    return {"telemetry": {"tracing": False, "metrics": False, "logs": False}}


def add_routes(app: FastAPI, router: APIRouter) -> None:
    """The router's routes, added to ``app`` as the objects its decorators built once per process.

    ``app.include_router`` wraps the router, and FastAPI then builds each of its routes again for
    that app (the request and response models of every route) on the app's first request: ~0.1 s
    of CPU per app, paid by every test that makes one. Nothing the service sets on an app changes
    a route (no prefix, dependencies or overrides at the app level).
    """
    app.router.routes.extend(router.routes)


def create_app(settings: Settings | None = None) -> FastAPI:
    settings = settings or Settings.from_env()
    if not settings.api_key:
        settings = settings.ensure_api_key()
        announce_generated_key(settings)
    db = Database(
        url=settings.database_url,
        pg_synchronous_commit=settings.pg_synchronous_commit,
        hot_pool_size=settings.hot_pool_size,
        pool_size=settings.pool_size,
        max_overflow=settings.pool_overflow,
        idle_transaction_seconds=settings.idle_transaction_seconds,
    )
    prepare_database(settings, db)
    campaigns = build_campaigns(settings, db)

    log_redaction.install()

    @asynccontextmanager
    async def lifespan(app: FastAPI):
        log_redaction.install()  # again: the server may have configured logging after create_app
        await anyio.to_thread.run_sync(warm_policies)  # before the first request, not during it
        await anyio.to_thread.run_sync(web.warm)  # the page templates compiled, likewise
        # Everything loaded so far (FastAPI, SQLAlchemy, numpy, numba: ~200k objects)
        # lives as long as the process. Scanning it made each full garbage collection
        # a ~100 ms stall of the event loop; frozen, it is left out of collections.
        gc.collect()
        gc.freeze()
        if settings.resume_runs:
            try:
                await campaigns.runs.resume_runs()
            except Exception as exc:
                log.warning("could not resume background runs (%s)", type(exc).__name__)
        campaigns.keeper.ensure()  # leases, run take-over, the webhook outbox
        campaigns.background.spawn(
            watch_revocations(campaigns.tokens)
        )  # cached annotator tokens stay trusted while it polls
        if settings.demo:
            await start_demo(campaigns, settings.public_base_url)
        try:
            yield
        finally:
            await campaigns.aclose()
            db.dispose()

    app = FastAPI(
        title="llmduel",
        version="1",
        summary="Find the best LLM among candidates at the least cost, by pairwise duels (DCTAS).",
        description="Authenticate with `Authorization: Bearer <key>`: the admin key "
        "(LLMDUEL_API_KEY) or a per-campaign annotator token. See docs/service.md.",
        lifespan=lifespan,
        docs_url=None,  # served offline by service.api_docs
        redoc_url=None,
        **_telemetry_option(settings),
    )
    app.state.settings = settings
    pricing.set_price_map_file(settings.price_map)  # the user's price map file, for every campaign body
    app.state.db = db
    app.state.annotator_limiter = AnnotatorRequestLimiter(db, settings.annotator_requests_per_minute)
    app.state.campaigns = campaigns  # every campaign object, built once (service/api/deps.py hands them out)
    app.state.health = DatabaseHealth(db)  # /healthz: reads and a tiny write, cached
    install_error_handlers(app)
    for api_router in (router, exports_router, removal_router):
        add_routes(app, api_router)
    app.add_middleware(Idempotency)  # inside the body limit: the body it hashes is bounded
    app.add_middleware(BodySizeLimit, max_bytes=MAX_BODY_BYTES)
    app.add_middleware(ContainErrors)  # outermost of ours: a 500 does not reset keep-alive connections
    web.register(app)  # the web pages and /static
    api_docs.register(app)  # the offline API docs
    return app
