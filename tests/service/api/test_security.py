"""Hostile input, on SQLite and PostgreSQL: authorization on every route (the
routes are enumerated from the app, so a new one cannot be forgotten), annotator
tokens confined to their campaign, provider secrets never shown or logged, and
model output carrying HTML, script or megabytes of text stored and shown safely.

The hostile provider below speaks the OpenAI, Anthropic and Gemini wire formats
on a loopback port and echoes the credentials it receives back into answers,
error messages and malformed bodies.
"""

from __future__ import annotations

import json
import logging
import re
import time
import uuid

import pytest
from conftest import ADMIN_KEY, ThreadedServer, app_client
from service_helpers import campaign_body

ADMIN = {"Authorization": f"Bearer {ADMIN_KEY}"}
MUTATING = {"POST", "PUT", "PATCH", "DELETE"}


# ---------------------------------------------------------------- route enumeration
def all_routes(app) -> list[tuple[str, str]]:
    """(method, path) of every HTTP route the app serves, included routers flattened."""
    out: list[tuple[str, str]] = []

    def walk(routes, prefix: str = "") -> None:
        for r in routes:
            if hasattr(r, "original_router"):  # FastAPI's included-router wrapper
                walk(r.original_router.routes, prefix + (r.include_context.prefix or ""))
            elif hasattr(r, "routes") and getattr(r, "path", None) is not None and r.routes:
                walk(r.routes, prefix + r.path)  # a Mount with sub-routes
            elif getattr(r, "methods", None):
                out.extend((m, prefix + r.path) for m in sorted(r.methods) if m != "HEAD")
            elif getattr(r, "path", None) is not None:
                out.append(("MOUNT", prefix + r.path))  # static files

    walk(app.routes)
    return out


# How each route authenticates. Anything not listed fails the test below, so a new
# route must be classified (and thereby checked) here.
PUBLIC = {  # no credentials by design
    ("GET", "/healthz"): "liveness probe",
    ("GET", "/openapi.json"): "the API schema",
    ("GET", "/docs"): "Swagger UI",
    ("MOUNT", "/docs-static"): "Swagger UI assets",
    ("MOUNT", "/static"): "CSS and JS of the pages",
    ("GET", "/login"): "the sign-in form",
    ("POST", "/logout"): "only revokes the caller's own login",
}
DASHBOARD = "admin key (header or login cookie, never ?key=); 401 page without it"
ANNOTATOR_LINK = "the annotator token in the path; 403 page for an unknown or revoked token"
LOGIN = "checks the admin key in the form; 401 without a cookie when wrong"


def classify(method: str, path: str) -> str:
    if (method, path) in PUBLIC:
        return "public"
    if path.startswith("/v1/"):
        return "bearer"
    if path.startswith("/annotate/{token}"):
        return "annotator-link"
    if (method, path) == ("POST", "/login"):
        return "login"
    if (method, path) == ("POST", "/logout/all"):
        return "dashboard"  # needs a signed-in admin (header or live login cookie)
    if method == "GET" and (path == "/" or path.startswith(("/campaigns/", "/live/"))):
        return "dashboard"
    return "unclassified"


def parse_tags(html: str) -> list[tuple[str, dict]]:
    """Every start tag of an HTML document with its attributes, as a browser would read them."""
    from html.parser import HTMLParser

    tags: list[tuple[str, dict]] = []

    class Collect(HTMLParser):
        def handle_starttag(self, tag, attrs):
            tags.append((tag, dict(attrs)))

        handle_startendtag = handle_starttag

    Collect(convert_charrefs=True).feed(html)
    return tags


def fill(path: str, ids: dict) -> str:
    return re.sub(r"\{(\w+)(?::\w+)?\}", lambda m: str(ids[m.group(1)]), path)


async def snapshot(api, cid: int, duel_id: int) -> tuple:
    c = (await api.get(f"/v1/campaigns/{cid}")).json()
    d = (await api.get(f"/v1/duels/{duel_id}")).json()
    total = (await api.get("/v1/campaigns", params={"limit": 1})).json()["total"]
    c.pop("lower_bound", None)
    return total, json.dumps(c, sort_keys=True), json.dumps(d, sort_keys=True)


async def setup_two_campaigns(api) -> dict:
    a = (await api.post("/v1/campaigns", json=campaign_body(name="campaign A"))).json()["id"]
    b = (await api.post("/v1/campaigns", json=campaign_body(name="campaign B"))).json()["id"]
    tok_a = (await api.post(f"/v1/campaigns/{a}/annotators", json={})).json()["token"]
    tok_b = (await api.post(f"/v1/campaigns/{b}/annotators", json={})).json()["token"]
    duel_b = (await api.post(f"/v1/campaigns/{b}/duels")).json()["id"]
    return {"a": a, "b": b, "tok_a": tok_a, "tok_b": tok_b, "duel_b": duel_b}


async def test_every_route_is_classified_and_refuses_missing_or_wrong_credentials(api, db_url):
    routes = all_routes(api.app)
    assert ("POST", "/v1/duels/{duel_id}/vote") in routes and ("POST", "/annotate/{token}/vote") in routes
    unclassified = [r for r in routes if classify(*r) == "unclassified"]
    assert not unclassified, f"new routes: say how they authenticate in test_security.py: {unclassified}"

    s = await setup_two_campaigns(api)
    ids = {
        "campaign_id": s["b"],
        "cid": s["b"],
        "duel_id": s["duel_b"],
        "annotator_id": 1,
        "token": "ann_" + "x" * 43,
        "name": "m0",
        "slot": "a",
    }
    before = await snapshot(api, s["b"], s["duel_b"])
    bodies = {
        "/v1/campaigns": campaign_body(name="should not exist"),
        "/v1/duels/{duel_id}/vote": {"choice": "a"},
        "/v1/campaigns/{campaign_id}/run": {"max_duels": 5},
    }
    wrong = [
        {},
        {"Authorization": "Bearer wrong-key"},
        {"Authorization": f"Basic {ADMIN_KEY}"},
        {"Authorization": "Bearer " + ADMIN_KEY[:-1]},
        {"Authorization": f"Bearer {ADMIN_KEY} "[:-1] + "x"},
        {"Authorization": "Bearer ann_" + "y" * 43},
    ]
    checked = 0
    async with app_client(db_url, headers=None) as anon:
        for method, path in routes:
            kind = classify(method, path)
            if kind == "public" or method == "MOUNT":
                continue
            url = fill(path, ids)
            for headers in wrong:
                if kind == "bearer":
                    r = await anon.request(method, url, json=bodies.get(path), headers=headers)
                    assert r.status_code == 401, (method, path, headers, r.status_code, r.text)
                    assert r.headers["www-authenticate"] == "Bearer" and r.json()["detail"]
                elif kind == "dashboard":
                    r = await anon.request(method, url, headers=headers)
                    assert r.status_code == 401, (method, path, headers, r.status_code)
                    assert "campaign B" not in r.text
                elif kind == "annotator-link":
                    r = await anon.request(
                        method, url, data={"duel_id": str(s["duel_b"]), "choice": "a"}, headers=headers
                    )
                    assert r.status_code == 403, (method, path, r.status_code)
                elif kind == "login":
                    r = await anon.post(url, data={"key": headers.get("Authorization", "nothing"), "next": "/"})
                    assert r.status_code == 401 and "set-cookie" not in r.headers
                checked += 1
    assert checked >= 6 * 14
    assert await snapshot(api, s["b"], s["duel_b"]) == before  # nothing was created, changed or voted


async def test_annotator_tokens_cannot_reach_another_campaign_on_any_route(api):
    s = await setup_two_campaigns(api)
    tok_a = {"Authorization": f"Bearer {s['tok_a']}"}
    ids = {"campaign_id": s["b"], "duel_id": s["duel_b"], "annotator_id": 1, "name": "m0", "slot": "a"}
    before = await snapshot(api, s["b"], s["duel_b"])
    refused = 0
    for method, path in all_routes(api.app):
        if classify(method, path) != "bearer":
            continue
        body = {"choice": "a"} if path.endswith("/vote") else None
        r = await api.request(method, fill(path, ids), json=body, headers=tok_a)
        if path.startswith("/v1/duels/"):
            # A duel of campaign B is answered exactly like a duel id that does not exist:
            # probing ids tells the annotator nothing.
            missing = await api.request(method, fill(path, dict(ids, duel_id=2**62)), json=body, headers=tok_a)
            assert (r.status_code, missing.status_code) == (404, 404), (method, path, r.text, missing.text)
            assert r.json()["detail"].replace(str(s["duel_b"]), "N") == missing.json()["detail"].replace(
                str(2**62), "N"
            )
        else:
            # Reads and writes of campaign B, and every admin-only route: 403, never a 2xx.
            assert r.status_code == 403, (method, path, r.status_code, r.text)
        assert "campaign B" not in r.text and "answer" not in r.text
        refused += 1
    assert refused == sum(1 for m, p in all_routes(api.app) if classify(m, p) == "bearer")
    # The annotator page of campaign A cannot vote on campaign B's duel either; it says so
    # as it does for a duel id that does not exist.
    pages = []
    for duel_id in (s["duel_b"], 2**62):
        r = await api.post(
            f"/annotate/{s['tok_a']}/vote",
            data={"duel_id": str(duel_id), "choice": "a"},
            headers={"Authorization": "", "X-Llmduel": "1"},  # the page's JSON answer (its notice)
        )
        notice = re.search(r'id="notice">(.*?)</p>', r.json()["html"])
        pages.append((r.status_code, notice.group(1).replace(str(duel_id), "N") if notice else None))
    assert pages[0] == pages[1] == (200, "That vote was not counted: duel N not found."), pages
    assert await snapshot(api, s["b"], s["duel_b"]) == before
    # Its own campaign works with the same token (the refusals above were not a broken token).
    assert (await api.get(f"/v1/campaigns/{s['a']}", headers=tok_a)).status_code == 200


# ---------------------------------------------------------------- a hostile provider
class HostileProvider:
    """OpenAI / Anthropic / Gemini endpoints whose behaviour depends on the model name:

    ``echo-ok``: answers with every credential it received; ``echo-401``, ``echo-500``
    (retried), ``echo-429`` (retried): errors whose message carries the credentials;
    ``echo-badjson``: a 200 whose broken body carries them; ``judge-echo``: a judge
    verdict after the credentials; ``html``, ``huge``, ``binary``: hostile output.
    """

    HTML = (
        '<script>window.__pwned=1</script><img src=x onerror="window.__pwned=2">'
        '<a href="javascript:alert(3)">click</a> <iframe src="https://example.com"></iframe>'
        "\n\n**bold** [ok](https://example.com) <style>body{display:none}</style>"
    )
    HUGE_CHARS = 3_000_000

    def __init__(self):
        from starlette.applications import Starlette
        from starlette.responses import JSONResponse, Response
        from starlette.routing import Route

        async def handle(request):
            body = await request.json()
            model = body.get("model") or request.path_params.get("model", "").split(":")[0]
            creds = " ".join(request.headers.get(h, "") for h in ("authorization", "x-api-key", "x-goog-api-key"))
            creds += " " + str(request.url.query)
            if model.startswith("echo-4") or model == "echo-500":
                status = int(model.split("-")[1])
                headers = {"retry-after": "0"} if status == 429 else {}
                return JSONResponse(
                    {"error": {"message": f"bad key {creds} headers={dict(request.headers)}"}},
                    status_code=status,
                    headers=headers,
                )
            if model == "echo-badjson":
                return Response(f"<html>oops {creds}", media_type="application/json")
            if model == "echo-ok":
                text = f"I received these credentials: {creds} and headers {dict(request.headers)}"
            elif model == "judge-echo":
                text = f"Credentials: {creds}. Verdict: [[A]]"
            elif model == "html":
                text = self.HTML
            elif model == "huge":
                text = ("<b>x</b>" * (self.HUGE_CHARS // 8 + 1))[: self.HUGE_CHARS]
            elif model == "binary":
                text = "before\x00after \ud800 lone surrogate \u202e right-to-left"
            else:
                text = f"plain answer of {model}"
            kind = request.url.path
            if kind.endswith("/chat/completions"):
                data = {
                    "choices": [{"message": {"role": "assistant", "content": text}, "finish_reason": "stop"}],
                    "usage": {"prompt_tokens": 5, "completion_tokens": 7},
                }
            elif kind.endswith("/messages"):
                data = {"content": [{"type": "text", "text": text}], "usage": {"input_tokens": 5, "output_tokens": 7}}
            else:
                data = {
                    "candidates": [{"content": {"parts": [{"text": text}]}}],
                    "usageMetadata": {"promptTokenCount": 5, "candidatesTokenCount": 7},
                }
            return Response(json.dumps(data), media_type="application/json")  # ensure_ascii: lone surrogates pass

        app = Starlette(
            routes=[
                Route("/v1/chat/completions", handle, methods=["POST"]),
                Route("/v1/messages", handle, methods=["POST"]),
                Route("/models/{model:path}", handle, methods=["POST"]),
            ]
        )
        self.server = ThreadedServer(app)
        self.url = self.server.url

    def client(self, kind: str, model: str, key_env: str | None = None) -> dict:
        base = {"openai": self.url + "/v1", "anthropic": self.url, "gemini": self.url}[kind]
        cfg = {
            "kind": kind,
            "base_url": base,
            "model": model,
            "max_attempts": 2,
            "backoff_base_s": 0.01,
            "backoff_max_s": 0.02,
            "timeout_s": 10,
            "api_key_env": key_env,
        }
        return cfg

    def stop(self):
        self.server.stop()


@pytest.fixture(scope="module")
def hostile():
    p = HostileProvider()
    yield p
    p.stop()


async def every_response(api, cids: list[int], tokens: list[str]) -> list[str]:
    """The text (body and headers) of every read the API and the pages offer on these campaigns."""
    out = []

    async def grab(url, **kw):
        r = await api.get(url, **kw)
        out.append(f"{r.status_code} {dict(r.headers)} {r.text}")
        return r

    await grab("/v1/campaigns", params={"limit": 500})
    await grab("/", headers=ADMIN)
    for cid in cids:
        await grab(f"/v1/campaigns/{cid}")
        await grab(f"/v1/campaigns/{cid}/replay")
        await grab(f"/campaigns/{cid}", headers=ADMIN)
        await grab(f"/campaigns/{cid}/live", headers=ADMIN)
        page = (await grab(f"/v1/campaigns/{cid}/duels", params={"limit": 1000})).json()
        for d in page["items"]:
            await grab(f"/v1/duels/{d['id']}")
    for token in tokens:
        await grab(f"/annotate/{token}", headers={"Authorization": ""})
        await grab(f"/v1/campaigns/{cids[0]}", headers={"Authorization": f"Bearer {token}"})
    return out


def database_text(db_url: str, cids: list[int]) -> str:
    from sqlalchemy import create_engine, text

    from service.config import normalise_database_url

    engine = create_engine(normalise_database_url(db_url))
    try:
        with engine.connect() as conn:
            rows = []
            for table in ("campaigns", "duels", "charges", "annotators", "prompts"):
                col = "id" if table == "campaigns" else "campaign_id"
                for cid in cids:
                    rows += [
                        str(tuple(r)) for r in conn.execute(text(f"SELECT * FROM {table} WHERE {col} = :c"), {"c": cid})
                    ]
            return "\n".join(rows)
    finally:
        engine.dispose()


async def test_provider_secrets_never_appear_in_responses_pages_logs_or_the_database(
    api, hostile, db_url, monkeypatch, caplog
):
    secrets = {kind: f"sk-{kind}-SECRET-{uuid.uuid4().hex}" for kind in ("openai", "anthropic", "gemini")}
    for kind, value in secrets.items():
        monkeypatch.setenv(f"LLMDUEL_TEST_{kind.upper()}_KEY", value)
    caplog.set_level(logging.DEBUG)  # every logger, every level
    cids, tokens = [], []
    for kind in ("openai", "anthropic", "gemini"):
        env = f"LLMDUEL_TEST_{kind.upper()}_KEY"
        for other in ("plain", "echo-500", "echo-429", "echo-badjson", "echo-401"):
            # Two models: every duel calls both, so each failure mode is exercised.
            body = campaign_body(
                name=f"secrets {kind} {other}",
                costs=(1, 1),
                clients=[hostile.client(kind, "echo-ok", env), hostile.client(kind, other, env)],
            )
            r = await api.post("/v1/campaigns", json=body)
            assert r.status_code == 201, r.text
            cid = r.json()["id"]
            cids.append(cid)
            token = (await api.post(f"/v1/campaigns/{cid}/annotators", json={})).json()["token"]
            tokens.append(token)
            d = (await api.post(f"/v1/campaigns/{cid}/duels", headers={"Authorization": f"Bearer {token}"})).json()
            assert d["status"] == ("pending" if other == "plain" else "failed"), d
            if other == "plain":
                await api.post(f"/v1/duels/{d['id']}/vote", json={"choice": "a"})
                d = (await api.post(f"/v1/campaigns/{cid}/duels")).json()  # left pending for the annotator page
        # An automatic LLM judge whose output echoes the key, driven by a background run.
        judged = campaign_body(
            name=f"judge secrets {kind}",
            costs=(1, 1),
            clients=[hostile.client(kind, "echo-ok", env)] * 2,
            judge={"kind": "llm", "client": hostile.client(kind, "judge-echo", env)},
        )
        jid = (await api.post("/v1/campaigns", json=judged)).json()["id"]
        cids.append(jid)
        assert (await api.post(f"/v1/campaigns/{jid}/run", json={"max_duels": 3})).status_code == 202
        deadline = time.monotonic() + 30
        while (await api.get(f"/v1/campaigns/{jid}")).json()["run"]["active"]:
            assert time.monotonic() < deadline
            await asyncio_sleep(0.05)
        view = (await api.get(f"/v1/campaigns/{jid}")).json()
        assert view["duels"] == 3, view
    duels = []
    for cid in cids:
        duels += (await api.get(f"/v1/campaigns/{cid}/duels", params={"limit": 1000})).json()["items"]
    errors = " ".join(d["error"] or "" for d in duels)
    for status in ("HTTP 500", "HTTP 429", "malformed JSON", "HTTP 401"):
        assert status in errors  # the failures were exercised ...
    answers = " ".join((d["answer_a"] or "") + (d["answer_b"] or "") for d in duels)
    assert "I received these credentials" in answers  # ... and so was the echoing answer

    texts = await every_response(api, cids, tokens)
    logs = caplog.text + "\n".join(f"{r.getMessage()} {r.args!r} {r.exc_text or ''}" for r in caplog.records)
    stored = database_text(db_url, cids)
    assert "retrying" in logs  # the retries were logged
    for kind, value in secrets.items():
        for where, text in (("a response", "\n".join(texts)), ("a log line", logs), ("the database", stored)):
            assert value not in text, f"the {kind} key appears in {where}"
            assert value[10:] not in text, f"part of the {kind} key appears in {where}"


async def asyncio_sleep(s: float) -> None:
    import asyncio

    await asyncio.sleep(s)


async def test_hostile_model_output_is_stored_and_shown_safely(api, hostile):
    evil = '<script>window.__pwned=3</script>"><img src=x onerror=alert(4)>'
    models = [
        {"name": f"html{evil}", "cost": 1, "client": hostile.client("openai", "html")},
        {"name": "huge", "cost": 1, "client": hostile.client("anthropic", "huge")},
        {"name": "binary", "cost": 1, "client": hostile.client("gemini", "binary")},
    ]
    body = {
        "name": f"hostile {evil}",
        "models": models,
        "prompts": [f"prompt {evil}"],
        "judge": {"kind": "human"},
        "seed": 3,
    }
    r = await api.post("/v1/campaigns", json=body)
    assert r.status_code == 201, r.text
    cid = r.json()["id"]
    token = (await api.post(f"/v1/campaigns/{cid}/annotators", json={})).json()["token"]
    ann = {"Authorization": f"Bearer {token}"}
    answers: set[str] = set()
    pages: list[str] = []
    for _ in range(6):  # as the annotator, until every model has answered; the page shows each duel
        d = (await api.post(f"/v1/campaigns/{cid}/duels", headers=ann)).json()
        assert d["status"] == "pending", d["error"]
        answers |= {d["answer_a"], d["answer_b"]}
        page = await api.get(f"/annotate/{token}", headers={"Authorization": ""})
        assert page.status_code == 200
        assert "script-src 'self'" in page.headers["content-security-policy"]
        assert page.headers["x-content-type-options"] == "nosniff"
        pages.append(page.text)
        if len(answers) == 3:
            break
        await api.post(f"/v1/duels/{d['id']}/vote", json={"choice": "a"}, headers=ann)
    assert len(answers) == 3
    html_answer = next(a for a in answers if "__pwned" in a)
    huge = next(a for a in answers if a.startswith("<b>x</b>"))
    binary = next(a for a in answers if a.startswith("before"))

    # Stored as text: the markup verbatim (JSON is not rendered), the huge answer capped,
    # NUL and lone surrogates replaced.
    assert html_answer == HostileProvider.HTML
    assert len(huge) <= 1_000_000 + 30 and huge.endswith("[truncated by llmduel]")
    assert "\x00" not in binary and "before\ufffdafter" in binary and "\ud800" not in binary
    assert "\u202e" in binary  # other characters are kept as they are
    r = await api.get(f"/v1/duels/{d['id']}")
    assert r.headers["content-type"] == "application/json"

    # Shown safely on the annotator pages and the dashboards.
    for url in ("/", f"/campaigns/{cid}"):
        r = await api.get(url, headers=ADMIN)
        assert r.status_code == 200
        pages.append(r.text)
    for html in pages:
        tags = parse_tags(html)
        assert not [t for t, _ in tags if t in ("img", "iframe", "style", "object", "embed", "b")], tags
        for tag, attrs in tags:
            assert not [a for a in attrs if a.startswith("on")], (tag, attrs)  # no event handlers at all
            assert not str(attrs.get("href", "")).lower().startswith("javascript:"), (tag, attrs)
            if tag == "script":  # only the pages' own scripts, from /static
                assert str(attrs.get("src", "")).startswith("/static/"), attrs
    annotator_pages = "\n".join(pages[:-2])
    assert "&lt;script&gt;window.__pwned=1&lt;/script&gt;" in annotator_pages  # the answer, as text
    # the huge answer as text, its first part shown and the rest counted (service/web/markdown.py)
    assert "&lt;b&gt;x&lt;/b&gt;" in annotator_pages and "more characters not shown." in annotator_pages
    assert "&lt;script&gt;window.__pwned=3&lt;/script&gt;" in pages[-1]  # the names and prompt, as text
