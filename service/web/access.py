"""Who may read the dashboards (``/`` and ``/campaigns/{id}``).

``LLMDUEL_WEB_AUTH`` chooses the rule (see docs/web.md):

* ``key`` (default): the admin key is always needed.
* ``local`` (default of ``llmduel serve --demo``): no key needed for a browser
  on the same machine -- the client and the address the connection arrived on
  are both loopback and the request carries no proxy headers (``Forwarded``,
  ``X-Forwarded-For``, ``X-Real-IP``, ``X-Forwarded-Host``); everyone else needs
  the admin key. Not for a service behind a reverse proxy on the same host that
  sets none of those headers: the proxy's requests would look local.
* ``open``: anyone who can reach the service may read the dashboards (a public
  demo). The annotator pages and the REST API are not affected.

The admin key is accepted as ``Authorization: Bearer <key>``, once as
``?key=<key>`` (answered with a redirect that drops it from the address and
sets a cookie), or through the ``/login`` form. The cookie holds an HMAC of a
fixed label under the admin key, not the key itself: it grants read access to
the dashboards only, is ``HttpOnly`` and ``SameSite=Strict``, and changes when
the admin key changes.
"""

from __future__ import annotations

import hashlib
import hmac
import ipaddress

from fastapi import Request

COOKIE = "llmduel_dashboard"
MODES = ("local", "key", "open")
PROXY_HEADERS = ("forwarded", "x-forwarded-for", "x-real-ip", "x-forwarded-host")
COOKIE_MAX_AGE = 7 * 24 * 3600


def mode(request: Request) -> str:
    """The rule in force: ``Settings.web_auth`` (validated at start), else ``local`` for the demo, else ``key``."""
    settings = request.app.state.settings
    if settings.web_auth:
        return settings.web_auth
    return "local" if settings.demo else "key"


def _admin_key(request: Request) -> str | None:
    return request.app.state.service.settings.api_key


def cookie_value(admin_key: str) -> str:
    return hmac.new(admin_key.encode("utf-8"), b"llmduel dashboard read access v1", hashlib.sha256).hexdigest()


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


def can_read_dashboards(request: Request) -> bool:
    m = mode(request)
    if m == "open":
        return True
    key = _admin_key(request)
    header = request.headers.get("authorization") or ""
    scheme, _, value = header.partition(" ")
    if scheme.lower() == "bearer" and key_matches(request, value.strip()):
        return True
    cookie = request.cookies.get(COOKIE)
    if (
        key
        and cookie
        and hmac.compare_digest(cookie.encode("utf-8", "surrogatepass"), cookie_value(key).encode("ascii"))
    ):
        return True
    return m == "local" and is_local(request)


def set_cookie(response, request: Request) -> None:
    response.set_cookie(
        COOKIE,
        cookie_value(_admin_key(request)),
        max_age=COOKIE_MAX_AGE,
        httponly=True,
        samesite="strict",
        secure=request.url.scheme == "https",
        path="/",
    )
