"""Who may read the dashboards (``/`` and ``/campaigns/{id}``).

``LLMDUEL_WEB_AUTH`` (``Settings.web_auth``) chooses the rule (see docs/web.md):

* ``key`` (default): the admin key is always needed.
* ``local`` (default of ``llmduel serve --demo``): no key needed for a browser
  on the same machine -- the client and the address the connection arrived on
  are both loopback and the request carries no proxy headers (``Forwarded``,
  ``X-Forwarded-For``, ``X-Real-IP``, ``X-Forwarded-Host``); everyone else needs
  the admin key. Not for a service behind a reverse proxy on the same host that
  sets none of those headers: the proxy's requests would look local.
* ``open``: anyone who can reach the service may read the dashboards (a public
  demo). The annotator pages and the REST API are not affected.

The admin key is accepted as ``Authorization: Bearer <key>`` or through the
``/login`` form (POST), which starts a login (service/web/logins.py): a random
cookie value, ``HttpOnly``, ``SameSite=Strict``, that expires and can be revoked.
**choice**: the key is never accepted in an address (``?key=`` is ignored), so it
cannot reach access logs, browser history or ``Referer`` headers.
"""

from __future__ import annotations

import hmac
import ipaddress

import anyio
from fastapi import Request

from . import logins

COOKIE = "llmduel_dashboard"
MODES = ("local", "key", "open")
PROXY_HEADERS = ("forwarded", "x-forwarded-for", "x-real-ip", "x-forwarded-host")


def mode(request: Request) -> str:
    """The rule in force: ``Settings.web_auth`` (validated at start), else ``local`` for the demo, else ``key``."""
    settings = request.app.state.settings
    if settings.web_auth:
        return settings.web_auth
    return "local" if settings.demo else "key"


def _admin_key(request: Request) -> str | None:
    return request.app.state.campaigns.settings.api_key


def key_matches(request: Request, candidate: str | None) -> bool:
    key = _admin_key(request)
    if not key or not candidate:
        return False
    return hmac.compare_digest(candidate.encode("utf-8", "surrogatepass"), key.encode("utf-8"))


def _is_loopback(host: str | None) -> bool:
    if not host:
        return False
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def is_local(request: Request) -> bool:
    client = request.scope.get("client")
    server = request.scope.get("server")
    if not client or not server:
        return False
    if any(h in request.headers for h in PROXY_HEADERS):
        return False
    return _is_loopback(client[0]) and _is_loopback(server[0])


def _bearer_is_admin(request: Request) -> bool:
    header = request.headers.get("authorization") or ""
    scheme, _, value = header.partition(" ")
    return scheme.lower() == "bearer" and key_matches(request, value.strip())


async def can_read_dashboards(request: Request) -> bool:
    m = mode(request)
    if m == "open" or _bearer_is_admin(request):
        return True
    if m == "local" and is_local(request):
        return True
    cookie = request.cookies.get(COOKIE)
    if not cookie:
        return False
    return await anyio.to_thread.run_sync(logins.is_valid, request.app.state.campaigns.db, _admin_key(request), cookie)


async def is_signed_in(request: Request) -> bool:
    """The admin key in the header, or a live login cookie (not merely an open or local rule)."""
    if _bearer_is_admin(request):
        return True
    cookie = request.cookies.get(COOKIE)
    if not cookie:
        return False
    return await anyio.to_thread.run_sync(logins.is_valid, request.app.state.campaigns.db, _admin_key(request), cookie)


async def start_login(response, request: Request) -> None:
    """Make a new login and set its cookie on ``response`` (after the key was checked)."""
    settings = request.app.state.settings
    key = _admin_key(request)
    assert key is not None  # called once the key was checked: there is one
    value = await anyio.to_thread.run_sync(logins.create, request.app.state.campaigns.db, key, settings.login_seconds)
    response.set_cookie(
        COOKIE,
        value,
        max_age=settings.login_seconds,
        httponly=True,
        samesite="strict",
        secure=request.url.scheme == "https",
        path="/",
    )


async def end_login(response, request: Request, everywhere: bool = False) -> None:
    """Revoke this login (or every login) and clear the cookie."""
    db = request.app.state.campaigns.db
    if everywhere:
        await anyio.to_thread.run_sync(logins.revoke_all, db)
    else:
        await anyio.to_thread.run_sync(logins.revoke, db, request.cookies.get(COOKIE))
    response.delete_cookie(COOKIE, path="/")
