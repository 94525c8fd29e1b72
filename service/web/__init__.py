"""The web pages: campaign list, dashboard and the annotator's voting form.

``register(app)`` is called by :func:`service.app.create_app`: it adds the
page routes and mounts ``/static``. See
docs/web.md.
"""

from __future__ import annotations


def register(app) -> None:
    # imported when the app is built, so importing a submodule (e.g. service.web.plots) stays light
    from fastapi.staticfiles import StaticFiles

    from .image_routes import router as image_router
    from .routes import STATIC_DIR, router

    for page_router in (router, image_router):
        app.router.routes.extend(page_router.routes)  # as service.app.add_routes: built once per process
    app.mount("/static", StaticFiles(directory=STATIC_DIR), name="static")


def warm() -> None:
    """Compile the page templates before the first request (:func:`.routes.warm_templates`)."""
    from .routes import warm_templates

    warm_templates()
