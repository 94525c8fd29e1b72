"""The web pages: campaign list, dashboard and the annotator's voting form.

``register(app)`` is called by :func:`service.app.create_app` (its
``EXTENSIONS`` hook): it adds the page routes and mounts ``/static``. See
docs/web.md.
"""

from __future__ import annotations

from pathlib import Path

STATIC_DIR = Path(__file__).resolve().parent / "static"
TEMPLATES_DIR = Path(__file__).resolve().parent / "templates"


def register(app) -> None:
    from fastapi.staticfiles import StaticFiles

    from .routes import router

    app.include_router(router)
    app.mount("/static", StaticFiles(directory=STATIC_DIR), name="static")
