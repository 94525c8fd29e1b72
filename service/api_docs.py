"""Offline API docs: Swagger UI at ``/docs`` served from the static assets shipped in the
``fastapi-offline`` package (Swagger UI 5, which reads OpenAPI 3.1) instead of a CDN, so the
docs work on a machine with no network.

The page is sent with a Content-Security-Policy like the other pages': scripts only
from this origin plus the page's one inline start-up script, allowed by its SHA-256;
no framing (``frame-ancestors 'none'``, ``X-Frame-Options: DENY``); requests only to
this origin. **choice**: ``style-src`` also allows ``'unsafe-inline'`` here, because
Swagger UI writes inline styles; styles cannot run script.
"""

from __future__ import annotations

import base64
import hashlib
import os
import re

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
        page = get_swagger_ui_html(
            openapi_url=app.openapi_url or "/openapi.json",
            title=f"{app.title} API",
            swagger_js_url=f"{STATIC_PREFIX}/swagger-ui-bundle.js",
            swagger_css_url=f"{STATIC_PREFIX}/swagger-ui.css",
            swagger_favicon_url=f"{STATIC_PREFIX}/favicon.png",
        )
        html = bytes(page.body).decode("utf-8")
        return HTMLResponse(html, headers=security_headers(html))

    app.add_api_route("/docs", swagger_ui, methods=["GET"], include_in_schema=False)


def _inline_script_hashes(html: str) -> list[str]:
    """CSP sources (``'sha256-...'``) for each inline ``<script>`` of ``html``."""
    out = []
    for body in re.findall(r"<script>(.*?)</script>", html, flags=re.S):
        digest = base64.b64encode(hashlib.sha256(body.encode("utf-8")).digest()).decode("ascii")
        out.append(f"'sha256-{digest}'")
    return out


def security_headers(html: str) -> dict[str, str]:
    """The headers of the docs page (CSP with the hashes of its inline scripts)."""
    scripts = " ".join(["'self'", *_inline_script_hashes(html)])
    csp = (
        f"default-src 'self'; script-src {scripts}; style-src 'self' 'unsafe-inline'; img-src 'self' data:; "
        "connect-src 'self'; object-src 'none'; base-uri 'none'; form-action 'self'; frame-ancestors 'none'"
    )
    return {
        "Content-Security-Policy": csp,
        "X-Frame-Options": "DENY",
        "X-Content-Type-Options": "nosniff",
        "Referrer-Policy": "no-referrer",
        "Cache-Control": "no-store",
    }
