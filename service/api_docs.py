"""Offline API docs: Swagger UI at ``/docs`` served from the static assets shipped in the
``fastapi-offline`` package (Swagger UI 5, which reads OpenAPI 3.1) instead of a CDN, so the
docs work on a machine with no network.
"""

from __future__ import annotations

import os

from fastapi import FastAPI
from fastapi.openapi.docs import get_swagger_ui_html
from fastapi.responses import HTMLResponse
from fastapi.staticfiles import StaticFiles

STATIC_PREFIX = "/docs-static"


def register(app: FastAPI) -> None:
    """Serve ``/docs`` with local assets (FastAPI's default page loads them from a CDN)."""
    try:
        import fastapi_offline
    except ImportError:  # pragma: no cover - the package is a declared dependency
        return
    static = os.path.join(os.path.dirname(fastapi_offline.__file__), "static")
    app.mount(STATIC_PREFIX, StaticFiles(directory=static), name="docs-static")

    async def swagger_ui() -> HTMLResponse:
        return get_swagger_ui_html(
            openapi_url=app.openapi_url or "/openapi.json",
            title=f"{app.title} API",
            swagger_js_url=f"{STATIC_PREFIX}/swagger-ui-bundle.js",
            swagger_css_url=f"{STATIC_PREFIX}/swagger-ui.css",
            swagger_favicon_url=f"{STATIC_PREFIX}/favicon.png",
        )

    app.add_api_route("/docs", swagger_ui, methods=["GET"], include_in_schema=False)
