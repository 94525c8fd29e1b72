"""The page routes: campaign list, dashboard, login, annotator form.

The annotator pages drive duels and votes through the same
objects of :class:`~service.campaigns.Campaigns` as the REST API
(``next_duel``, ``vote``, ``get_duel``, ``get_campaign``), with the
:class:`~service.auth.Principal` that :func:`service.auth.authenticate` gives
for the annotator token in the address. Their POST endpoints answer JSON for
the page's script (header ``X-Llmduel: 1``) and a 303 redirect for plain form
posts, so voting also works without JavaScript.
"""

from __future__ import annotations

import functools
import hashlib
import logging
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs

import anyio
import jinja2
from fastapi import APIRouter, HTTPException, Request
from fastapi.responses import HTMLResponse, JSONResponse, RedirectResponse, Response

from algorithms.vocabulary import CampaignStatus, Choice

from ..api.annotator_limits import retry_after
from ..auth import Principal, authenticate
from ..campaigns import Conflict, DomainError, Forbidden, NotFound, skips
from ..container import Campaigns
from . import access, data
from .image_text import image_count, is_image, without_images
from .markdown import render_markdown
from .series import SeriesCache

STATIC_DIR = Path(__file__).resolve().parent / "static"
TEMPLATES_DIR = Path(__file__).resolve().parent / "templates"

log = logging.getLogger("llmduel.web")

router = APIRouter(include_in_schema=False)

MAX_FORM_BYTES = 16 * 1024
MAX_ID = 2**62
PAGE_SIZE = 50
LIVE_INTERVAL_MS = 3000

CSP = (
    "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
    "object-src 'none'; base-uri 'none'; form-action 'self'; frame-ancestors 'none'; connect-src 'self'"
)

CHOICE_LABELS = {"a": "A is better", "b": "B is better", "tie": "a tie", "both_bad": "both bad"}


def _asset_version() -> str:
    h = hashlib.sha256()
    for p in sorted(STATIC_DIR.glob("*")):
        if p.is_file():
            h.update(p.name.encode())
            h.update(p.read_bytes())
    return h.hexdigest()[:10]


def _bytecode_cache() -> jinja2.BytecodeCache | None:
    """Compiled templates kept across processes: Jinja's per-user cache directory under the temp dir (made
    mode 0700 and refused when another user owns it), keyed by each template's source checksum, so a process
    that starts compiles none it finds there. None (compile in memory, as before) where it cannot be made."""
    try:
        return jinja2.FileSystemBytecodeCache()
    except (OSError, RuntimeError):
        return None


_env = jinja2.Environment(
    loader=jinja2.FileSystemLoader(str(TEMPLATES_DIR)),
    autoescape=True,
    trim_blocks=True,
    lstrip_blocks=True,
    undefined=jinja2.StrictUndefined,
    bytecode_cache=_bytecode_cache(),
)
_env.globals["asset_version"] = _asset_version()
_env.filters["md"] = render_markdown


def _money(v: Any) -> str:
    if v is None:
        return "\u2013"
    v = float(v)
    if v == 0:
        return "0"
    if abs(v) >= 100:
        return f"{v:,.2f}"
    return f"{v:.4g}"


def _when(v: Any) -> str:
    return v.strftime("%Y-%m-%d %H:%M:%S UTC") if v is not None else "\u2013"


def _num(v: Any, digits: int = 3) -> str:
    if v is None:
        return "\u2013"
    try:
        f = float(v)
    except (TypeError, ValueError):
        return str(v)
    return f"{f:.{digits}g}"


def _short(text: Any, n: int = 80) -> str:
    text = " ".join(str(text or "").split())
    return text if len(text) <= n else text[: n - 1] + "\u2026"


_env.filters.update(money=_money, when=_when, num=_num, short=_short)
_env.filters.update(without_images=without_images, image_count=image_count, is_image=is_image)


# ---------------------------------------------------------------- helpers
def _campaigns(request: Request) -> Campaigns:
    return request.app.state.campaigns


def _cache(request: Request) -> SeriesCache:
    cache = getattr(request.app.state, "web_series", None)
    if cache is None:
        cache = request.app.state.web_series = SeriesCache()
    return cache


def _root(request: Request) -> str:
    return request.scope.get("root_path", "").rstrip("/")


def _headers(extra: dict | None = None, private: bool = True) -> dict:
    h = {
        "Content-Security-Policy": CSP,
        "X-Content-Type-Options": "nosniff",
        "Referrer-Policy": "no-referrer",
        "X-Frame-Options": "DENY",
    }
    if private:
        h["Cache-Control"] = "no-store"
    if extra:
        h.update(extra)
    return h


def warm_templates() -> None:
    """Compile every page template now (the environment keeps them): the first page a process serves
    compiled the dashboard's templates (about 0.1 s of CPU) on top of its own work."""
    for name in _env.list_templates(extensions=["html"]):
        _env.get_template(name)


def render(
    request: Request, template: str, status_code: int = 200, headers: dict | None = None, **context: Any
) -> HTMLResponse:
    context.setdefault("root", _root(request))
    context.setdefault("page_class", "")
    html = _env.get_template(template).render(**context)
    return HTMLResponse(html, status_code=status_code, headers=_headers(headers))


def fragment(template: str, **context: Any) -> str:
    return _env.get_template(template).render(**context)


def error_page(request: Request, status_code: int, title: str, message: str) -> HTMLResponse:
    return render(request, "error.html", status_code=status_code, title=title, message=message, show_nav=False)


def not_found(request: Request, what: str = "page") -> HTMLResponse:
    return error_page(
        request,
        404,
        "Not found",
        f"There is no such {what} here. Check the link, or ask whoever sent it for a new one.",
    )


def _parse_id(raw: str) -> int | None:
    if not raw.isdigit() or len(raw) > 19:
        return None
    value = int(raw)
    return value if 1 <= value <= MAX_ID else None


async def _form(request: Request) -> dict[str, str] | None:
    body = b""
    async for chunk in request.stream():
        body += chunk
        if len(body) > MAX_FORM_BYTES:
            return None
    try:
        parsed = parse_qs(body.decode("utf-8"), keep_blank_values=True, max_num_fields=20)
    except (UnicodeDecodeError, ValueError):
        return None
    return {k: v[-1] for k, v in parsed.items()}


def _t(fn, *args):
    return anyio.to_thread.run_sync(fn, *args)


# ---------------------------------------------------------------- dashboard access
async def _guard(request: Request) -> Response | None:
    if await access.can_read_dashboards(request):
        return None
    return login_page(request, status_code=401)


def login_page(request: Request, message: str | None = None, status_code: int = 200) -> HTMLResponse:
    nxt = request.query_params.get("next") or (request.url.path if request.url.path != "/login" else "/")
    return render(
        request,
        "login.html",
        status_code=status_code,
        message=message,
        next=_safe_next(nxt),
        show_nav=False,
        title="Sign in",
        login_hours=_hours(request),
    )


def _hours(request: Request) -> str:
    return f"{request.app.state.settings.login_hours:g}"


def _safe_next(nxt: str | None) -> str:
    if not nxt or not nxt.startswith("/") or nxt.startswith("//") or "\\" in nxt:
        return "/"
    return nxt


@router.get("/login", response_class=HTMLResponse)
async def login_form(request: Request):
    return login_page(request)


@router.post("/login")
async def login_submit(request: Request):
    form = await _form(request)
    if form is None:
        return error_page(request, 400, "Bad request", "The form could not be read.")
    nxt = _safe_next(form.get("next"))
    if not access.key_matches(request, form.get("key")):
        return render(
            request,
            "login.html",
            status_code=401,
            message="That key is not the admin key.",
            next=nxt,
            show_nav=False,
            title="Sign in",
            login_hours=_hours(request),
        )
    resp = RedirectResponse(_root(request) + nxt, status_code=303, headers=_headers())
    await access.start_login(resp, request)
    return resp


@router.post("/logout")
async def logout(request: Request):
    """End this login (its cookie is refused from now on, on every worker)."""
    resp = RedirectResponse(_root(request) + "/login", status_code=303, headers=_headers())
    await access.end_login(resp, request)
    return resp


@router.post("/logout/all")
async def logout_everywhere(request: Request):
    """End every dashboard login (a lost laptop, a shared screen): needs a signed-in admin."""
    if not await access.is_signed_in(request):
        return login_page(request, status_code=401)
    resp = RedirectResponse(_root(request) + "/login", status_code=303, headers=_headers())
    await access.end_login(resp, request, everywhere=True)
    return resp


# ---------------------------------------------------------------- campaign list
def _offset(request: Request) -> int:
    raw = request.query_params.get("offset", "0")
    return min(int(raw), 2**31) if raw.isdigit() else 0


@router.get("/", response_class=HTMLResponse)
async def index(request: Request):
    denied = await _guard(request)
    if denied is not None:
        return denied
    offset = _offset(request)
    page = await _t(data.campaign_list, _campaigns(request), PAGE_SIZE, offset)
    return render(
        request,
        "index.html",
        page=page,
        offset=offset,
        page_size=PAGE_SIZE,
        show_nav=True,
        title="Campaigns",
        live_interval=LIVE_INTERVAL_MS * 2,
    )


@router.get("/live/campaigns")
async def index_live(request: Request):
    if not await access.can_read_dashboards(request):
        return Response(status_code=401, headers=_headers())
    offset = _offset(request)
    svc = _campaigns(request)
    sig = await _t(data.list_signature, svc)
    if request.query_params.get("v") == sig:
        return Response(status_code=204, headers=_headers({"X-Llmduel-Version": sig}))
    page = await _t(data.campaign_list, svc, PAGE_SIZE, offset)
    html = fragment("_campaigns.html", page=page, offset=offset, page_size=PAGE_SIZE, root=_root(request))
    return HTMLResponse(
        html,
        headers=_headers(
            {"X-Llmduel-Version": page["signature"], "X-Llmduel-Running": "1" if page["any_running"] else "0"}
        ),
    )


# ---------------------------------------------------------------- dashboard
@router.get("/campaigns/{cid}", response_class=HTMLResponse)
async def campaign_page(request: Request, cid: str):
    denied = await _guard(request)
    if denied is not None:
        return denied
    campaign_id = _parse_id(cid)
    if campaign_id is None:
        return not_found(request, "campaign")
    try:
        d = await _t(data.dashboard, _campaigns(request), _cache(request), campaign_id)
    except NotFound:
        return not_found(request, "campaign")
    return render(request, "campaign.html", d=d, show_nav=True, title=d["c"]["name"], live_interval=LIVE_INTERVAL_MS)


@router.get("/campaigns/{cid}/live")
async def campaign_live(request: Request, cid: str):
    if not await access.can_read_dashboards(request):
        return Response(status_code=401, headers=_headers())
    campaign_id = _parse_id(cid)
    if campaign_id is None:
        return Response(status_code=404, headers=_headers())
    svc = _campaigns(request)
    current = await _t(data.campaign_version, svc, campaign_id)
    if current is None:
        return Response(status_code=404, headers=_headers())
    if request.query_params.get("v") == str(current[0]):
        return Response(status_code=204, headers=_headers({"X-Llmduel-Version": str(current[0])}))
    try:
        d = await _t(data.dashboard, svc, _cache(request), campaign_id)
    except NotFound:
        return Response(status_code=404, headers=_headers())
    html = fragment("_dashboard.html", d=d, root=_root(request))
    return HTMLResponse(
        html,
        headers=_headers({"X-Llmduel-Version": str(d["version"]), "X-Llmduel-Running": "1" if d["running"] else "0"}),
    )


# ---------------------------------------------------------------- annotators
def _principal_for_token(request: Request, token: str) -> Principal | None:
    """The annotator behind ``token``, resolved by the API's own :func:`authenticate`."""
    if not token or len(token) > 200:
        return None
    scope = dict(request.scope)
    scope["headers"] = [(b"authorization", f"Bearer {token}".encode("utf-8", "surrogatepass"))]
    try:
        principal = authenticate(Request(scope))
    except HTTPException:  # 401: unknown or revoked token
        return None
    if principal.admin or principal.campaign_id is None:
        return None  # the admin key is not an annotator link
    return principal


async def _annotator(request: Request, token: str) -> Principal | Response | None:
    """The annotator behind ``token``, or the 429 when it is over its request limit (the API's
    limit and counter, service/api/annotator_limits.py), or None for a bad link."""
    principal = await _t(_principal_for_token, request, token)
    if principal is None or principal.annotator_id is None:
        return principal
    wait = await request.app.state.annotator_limiter.take_async(principal.annotator_id)
    if wait is None:
        return principal
    return _too_many(request, retry_after(wait))


def _too_many(request: Request, seconds: str) -> Response:
    """Over the annotator's request limit: 429 with ``Retry-After``, as JSON for the page's script."""
    message = f"Too many requests from this link; wait {seconds} s and try again."
    if _wants_json(request):
        body = {"state": "limited", "message": message, "retry_after": int(seconds)}
        return JSONResponse(body, status_code=429, headers=_headers({"Retry-After": seconds}))
    page = error_page(request, 429, "Too many requests", message)
    page.headers["Retry-After"] = seconds
    return page


async def _panel(
    request: Request, principal: Principal, *, create: bool, notice: str | None = None, notice_kind: str = "info"
) -> dict:
    """The state of the annotator's panel, asking the service for a new duel when ``create``."""
    svc = _campaigns(request)
    cid = principal.campaign_id
    assert cid is not None  # the panel is an annotator's: its principal names its campaign
    ctx: dict[str, Any] = {"notice": notice, "notice_kind": notice_kind}
    campaign = await _t(svc.views.get_campaign, cid, False)
    ctx["campaign"] = campaign
    ctx["votes"], ctx["skips"] = await _t(data.annotator_progress, svc, cid, principal.label)
    if campaign["status"] != CampaignStatus.RUNNING:
        ctx["state"] = "done"
        return ctx
    if campaign["judge_kind"] not in ("human", "hybrid"):  # hybrid hook: annotators vote on its selected duels
        ctx["state"] = "automatic"
        return ctx
    duel_id = await _t(data.open_duel_of, svc, cid, principal.label)
    view = None
    if duel_id is not None:
        try:
            view = await _t(svc.views.get_duel, duel_id, principal)
        except DomainError:
            view = None
    if view is None and not create:
        ctx["state"] = "loading"
        return ctx
    if view is None:
        try:
            view, _ = await svc.cycle.next_duel(cid, principal)
        except Forbidden:
            ctx["state"] = "automatic"
            return ctx
        except Conflict as exc:
            campaign = await _t(svc.views.get_campaign, cid, False)
            ctx["campaign"] = campaign
            if campaign["status"] != CampaignStatus.RUNNING:
                ctx["state"] = "done"
            else:
                ctx["state"] = "wait"
                ctx["wait_reason"] = exc.detail
            return ctx
    if view["status"] == "calling":  # its own duel handed back while the models still answer
        ctx["state"] = "wait"
        ctx["wait_reason"] = "The two models are still answering your current duel"
        return ctx
    if view["status"] != "pending":
        ctx["state"] = "failed"
        ctx["duel"] = view
        return ctx
    ctx["state"] = "duel"
    ctx["duel"] = view
    return ctx


def _panel_html(request: Request, token: str, ctx: dict) -> str:
    return fragment("_annotate_panel.html", base=f"{_root(request)}/annotate/{token}", choices=CHOICE_LABELS, **ctx)


def _wants_json(request: Request) -> bool:
    return request.headers.get("x-llmduel") == "1"


async def _panel_response(request: Request, token: str, ctx: dict) -> Response:
    if _wants_json(request):
        body = {
            "state": ctx["state"],
            "duel_id": ctx["duel"]["id"] if ctx.get("duel") else None,
            "campaign_status": ctx["campaign"]["status"] if ctx.get("campaign") else None,
            # rendered in a thread: the answers' Markdown is bounded, but never run on the event loop
            "html": await _t(_panel_html, request, token, ctx),
        }
        return JSONResponse(body, headers=_headers())
    return RedirectResponse(f"{_root(request)}/annotate/{token}", status_code=303, headers=_headers())


def _bad_token(request: Request) -> Response:
    """An unknown or revoked annotator link: 403 (the same answer for both)."""
    if _wants_json(request):
        return JSONResponse({"state": "invalid", "html": ""}, status_code=403, headers=_headers())
    return error_page(
        request,
        403,
        "This annotator link is not valid",
        "The link may be mistyped, or it was revoked. Ask the campaign's organiser for a new one.",
    )


@router.get("/annotate/{token}", response_class=HTMLResponse)
async def annotate_page(request: Request, token: str):
    principal = await _annotator(request, token)
    if not isinstance(principal, Principal):
        return principal or _bad_token(request)
    ctx = await _panel(request, principal, create=False)
    # rendered in a thread: the prompt's, the answers' and the guidelines' Markdown stay off the event loop
    return await _t(
        functools.partial(
            render,
            request,
            "annotate.html",
            base=f"{_root(request)}/annotate/{token}",
            choices=CHOICE_LABELS,
            show_nav=False,
            title=ctx["campaign"]["name"],
            page_class="annotate",
            **ctx,
        )
    )


@router.post("/annotate/{token}/next")
async def annotate_next(request: Request, token: str):
    principal = await _annotator(request, token)
    if not isinstance(principal, Principal):
        return principal or _bad_token(request)
    ctx = await _panel(request, principal, create=True)
    return await _panel_response(request, token, ctx)


@router.post("/annotate/{token}/vote")
async def annotate_vote(request: Request, token: str):
    principal = await _annotator(request, token)
    if not isinstance(principal, Principal):
        return principal or _bad_token(request)
    form = await _form(request)
    duel_id = _parse_id((form or {}).get("duel_id", ""))
    choice = (form or {}).get("choice")
    if duel_id is None or choice not in tuple(Choice):
        ctx = await _panel(
            request,
            principal,
            create=False,
            notice="That vote could not be read; please vote again.",
            notice_kind="error",
        )
        if _wants_json(request):
            return await _panel_response(request, token, ctx)
        return error_page(
            request, 422, "That vote could not be read", "Go back to the duel and press one of the four buttons."
        )
    notice, kind = None, "info"
    comment = (form or {}).get("comment") or None
    if comment is not None and len(comment) > skips.MAX_COMMENT_CHARS:
        ctx = await _panel(
            request,
            principal,
            create=False,
            notice=f"That comment is too long (at most {skips.MAX_COMMENT_CHARS} characters); nothing was saved.",
            notice_kind="error",
        )
        return await _panel_response(request, token, ctx)
    try:
        await _campaigns(request).cycle.vote(duel_id, choice, principal, comment=comment)
        notice = f"Vote saved: {CHOICE_LABELS[choice]}."
    except Forbidden:
        return _bad_token(request)
    except (Conflict, NotFound) as exc:
        notice, kind = f"That vote was not counted: {exc.detail}.", "warn"
    ctx = await _panel(request, principal, create=True, notice=notice, notice_kind=kind)
    return await _panel_response(request, token, ctx)


@router.post("/annotate/{token}/skip")
async def annotate_skip(request: Request, token: str):
    """Hand the shown duel back to the pool (another annotator gets it) and show the next one."""
    principal = await _annotator(request, token)
    if not isinstance(principal, Principal):
        return principal or _bad_token(request)
    form = await _form(request)
    duel_id = _parse_id((form or {}).get("duel_id", ""))
    notice, kind = "Skipped: this duel goes to another annotator.", "info"
    if duel_id is None:
        notice, kind = "That skip could not be read; nothing changed.", "error"
    else:
        try:
            await _campaigns(request).cycle.skip(duel_id, principal)
        except Forbidden:
            return _bad_token(request)
        except (Conflict, NotFound) as exc:
            notice, kind = f"That duel was not skipped: {exc.detail}.", "warn"
    ctx = await _panel(request, principal, create=True, notice=notice, notice_kind=kind)
    return await _panel_response(request, token, ctx)
