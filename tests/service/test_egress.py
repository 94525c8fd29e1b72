"""Addresses the server will call: ``LLMDUEL_ALLOWED_HOSTS`` for model clients and webhooks,
checked when a campaign is created (422 naming the host) and again on every connection
(a name is resolved again: DNS may have changed), and error bodies of model servers shown
only as their status and a short masked excerpt.

The model server and the webhook receiver are real HTTP servers on 127.0.0.1; a name's
DNS answer is changed between creation and call by replacing the resolver
(``service.egress._getaddrinfo``), as a DNS server under someone else's control would.
"""

from __future__ import annotations

import asyncio
import json
import re
import time

import pytest
from conftest import ThreadedServer, app_client
from service_helpers import campaign_body
from sqlalchemy import text

SECRET_TOKEN = "tok_9f8e7d6c5b4a39281706f5e4d3c2b1a0"


class InternalServer:
    """An "internal" service on 127.0.0.1: an OpenAI-compatible model (``/v1``), an admin
    page that answers 500 with a long body full of secrets, and a webhook receiver."""

    def __init__(self):
        from starlette.applications import Starlette
        from starlette.responses import JSONResponse, Response
        from starlette.routing import Route

        self.hits: list[str] = []

        async def model(request):
            self.hits.append(request.url.path)
            text = "an answer from " + (await request.json())["model"]
            body = {"choices": [{"message": {"content": text}}], "usage": {"prompt_tokens": 3, "completion_tokens": 4}}
            return JSONResponse(body)

        async def admin(request):
            self.hits.append(request.url.path)
            secret = f"db password=hunter2hunter2 session {SECRET_TOKEN} internal users: " + "alice, bob, " * 30
            return Response(secret, status_code=500, media_type="text/plain")

        async def hook(request):
            self.hits.append(request.url.path)
            return Response(status_code=204)

        app = Starlette(
            routes=[
                Route("/v1/chat/completions", model, methods=["POST"]),
                Route("/internal/admin{rest:path}", admin, methods=["POST"]),
                Route("/hook", hook, methods=["POST"]),
            ]
        )
        self.server = ThreadedServer(app)
        self.port = self.server.port

    def stop(self):
        self.server.stop()


@pytest.fixture(scope="module")
def internal():
    s = InternalServer()
    yield s
    s.stop()


@pytest.fixture
def dns(monkeypatch):
    """Names resolved by a table the test changes; other names as the system resolves them."""
    from service import egress

    table: dict[str, str] = {}
    system = egress._getaddrinfo

    def lookup(host: str, port: int) -> list[str]:
        return [table[host]] if host in table else system(host, port)

    monkeypatch.setattr(egress, "_getaddrinfo", lookup)
    return table


def openai_client(base_url: str) -> dict:
    return {"kind": "openai", "base_url": base_url, "model": "m", "max_attempts": 1, "timeout_s": 5}


def body_with(base_url: str, **extra) -> dict:
    return campaign_body(name="egress", clients=[openai_client(base_url)] * 3, **extra)


# ---------------------------------------------------------------- the setting
def test_the_setting_defaults_to_all_hosts_and_refuses_a_bad_entry(monkeypatch):
    from service.config import Settings, SettingsError

    monkeypatch.delenv("LLMDUEL_ALLOWED_HOSTS", raising=False)
    assert Settings.from_env().egress.allow_all
    monkeypatch.setenv("LLMDUEL_ALLOWED_HOSTS", "api.openai.com, 10.0.0.0/8,*.corp.example, fd00::/8")
    policy = Settings.from_env().egress
    assert not policy.allow_all and policy.name_allowed("API.openai.com.") and policy.name_allowed("x.corp.example")
    assert policy.address_allowed("10.2.3.4") and policy.address_allowed("::ffff:10.0.0.1")
    assert not policy.address_allowed("127.0.0.1") and not policy.name_allowed("corp.example")
    for bad in ("10.0.0.0/33", "http://x.org", "a b", ","):
        monkeypatch.setenv("LLMDUEL_ALLOWED_HOSTS", bad)
        with pytest.raises(SettingsError, match="LLMDUEL_ALLOWED_HOSTS"):
            Settings.from_env()


# ---------------------------------------------------------------- at create
async def test_create_refuses_hosts_outside_the_allow_list_naming_them(db_url, dns):
    dns["loopback.test"] = "127.0.0.1"
    dns["inside.test"] = "10.1.2.3"
    async with app_client(db_url, allowed_hosts="api.example.com,10.0.0.0/8") as api:
        cases = {
            "models[0].client.base_url: host 127.0.0.1 is not allowed": body_with("http://127.0.0.1:9/internal/admin"),
            "models[0].client.base_url: host loopback.test resolves to 127.0.0.1": body_with("http://loopback.test/v1"),
            "models[0].client.base_url: host 2130706433 resolves to 127.0.0.1": body_with("http://2130706433/v1"),
            "webhook_url: host localhost": body_with("https://api.example.com/v1", webhook_url="http://localhost/h"),
            "judge.client.base_url: host 169.254.169.254 is not allowed": campaign_body(
                judge={"kind": "llm", "client": openai_client("http://169.254.169.254/latest")}
            ),
        }
        before = (await api.get("/v1/campaigns", params={"limit": 1})).json()["total"]
        for message, body in cases.items():
            r = await api.post("/v1/campaigns", json=body)
            assert r.status_code == 422 and message in r.json()["detail"], (message, r.text)
            assert "LLMDUEL_ALLOWED_HOSTS" in r.json()["detail"]
        assert (await api.get("/v1/campaigns", params={"limit": 1})).json()["total"] == before
        # Listed by name, in a listed network (literal or resolved): created.
        for url in ("https://api.example.com/v1", "http://10.9.8.7:8000/v1", "http://inside.test/v1"):
            r = await api.post("/v1/campaigns", json=body_with(url, webhook_url="http://inside.test/hook"))
            assert r.status_code == 201, (url, r.text)
    async with app_client(db_url) as api:  # the default: every host, as before the setting existed
        r = await api.post("/v1/campaigns", json=body_with("http://127.0.0.1:9/v1", webhook_url="http://localhost/"))
        assert r.status_code == 201, r.text


# ---------------------------------------------------------------- at call time
async def test_each_connection_checks_the_address_a_name_resolves_to_now(db_url, dns, internal):
    base = f"http://model.test:{internal.port}/v1"
    dns["model.test"] = "10.0.0.5"  # at creation: inside the allowed network
    async with app_client(db_url, allowed_hosts="10.0.0.0/8") as api:
        cid = (await api.post("/v1/campaigns", json=body_with(base))).json()["id"]
        dns["model.test"] = "127.0.0.1"  # then the name points at an internal service
        internal.hits.clear()
        duel = (await api.post(f"/v1/campaigns/{cid}/duels")).json()
        assert duel["status"] == "failed", duel
        assert "model.test resolves to 127.0.0.1, which LLMDUEL_ALLOWED_HOSTS does not allow" in duel["error"]
        assert internal.hits == []  # nothing reached it
    # The same campaign where the policy allows that address: the connection is made (to the
    # address checked) and the duel gets its answers.
    async with app_client(db_url, allowed_hosts="10.0.0.0/8,127.0.0.1") as api:
        duel = (await api.post(f"/v1/campaigns/{cid}/duels")).json()
        assert duel["status"] == "pending", duel
        assert duel["answer_a"].startswith("an answer from m") and len(internal.hits) == 2


async def test_a_webhook_to_an_address_no_longer_allowed_is_not_sent(db_url, dns, internal):
    dns["hooks.test"] = "10.0.0.6"
    async with app_client(db_url, allowed_hosts="10.0.0.0/8", webhook_retry_seconds=0.1, webhook_max_attempts=2) as api:
        body = campaign_body(name="egress hook", webhook_url=f"http://hooks.test:{internal.port}/hook")
        cid = (await api.post("/v1/campaigns", json=body)).json()["id"]
        dns["hooks.test"] = "127.0.0.1"
        internal.hits.clear()
        assert (await api.post(f"/v1/campaigns/{cid}/stop")).status_code == 200
        deadline = time.monotonic() + 20
        while (view := (await api.get(f"/v1/campaigns/{cid}")).json())["webhook_state"] != "failed":
            assert time.monotonic() < deadline, view["webhook_state"]
            await asyncio.sleep(0.05)
        assert "not sent: host hooks.test resolves to 127.0.0.1" in view["webhook_error"], view
        with api.app.state.db.read() as s:
            err = s.execute(
                text("SELECT last_error FROM webhook_events WHERE campaign_id = :c"), {"c": cid}
            ).scalar_one()
    assert internal.hits == []
    assert "hooks.test resolves to 127.0.0.1" in err, err


# ---------------------------------------------------------------- what an error body shows
async def test_an_error_body_shows_its_status_and_a_short_masked_excerpt(db_url, internal):
    async with app_client(db_url) as api:  # allowed: the admin named this address
        body = body_with(f"http://127.0.0.1:{internal.port}/internal/admin?code=500&x=")
        cid = (await api.post("/v1/campaigns", json=body)).json()["id"]
        duel = (await api.post(f"/v1/campaigns/{cid}/duels")).json()
        listed = json.dumps((await api.get(f"/v1/campaigns/{cid}/duels")).json())
    assert duel["status"] == "failed"
    error = duel["error"]
    assert "HTTP 500" in error, error
    shown = re.findall(r"HTTP 500: (.*?)(?: \| |$)", error)
    assert shown and all(len(x) <= 80 for x in shown), error
    for secret in ("hunter2hunter2", SECRET_TOKEN, SECRET_TOKEN[:20]):
        assert secret not in error and secret not in listed, (secret, error)
    assert error.count("alice") < 10  # not the 30 of the internal page's body


def test_excerpt_masks_secrets_and_cuts():
    from service.redaction import excerpt

    text = (
        "Unauthorized: api_key=sk-live-abcdef0123456789 for https://admin:pw123@db.internal/x "
        'token: "Zm9vYmFyYmF6cXV4MTIzNDU2Nzg5" ' + "x" * 200
    )
    out = excerpt(text, ("mykey-0123456789",))
    assert len(out) <= 80 and out.endswith("…")
    assert "sk-live" not in out and "pw123" not in out and "Zm9vYmFy" not in out, out
    assert out.startswith("Unauthorized: api_key=***")
    assert excerpt("model not found") == "model not found"
    # What helps to fix a call survives: no secret in it.
    assert excerpt("max token limit exceeded: 4096 tokens") == "max token limit exceeded: 4096 tokens"
    assert excerpt("Authorization: Bearer abcdefgh1234 rejected") == "Authorization: *** *** rejected"
    assert excerpt("leaked mykey-0123456789 here", ("mykey-0123456789",)) == "leaked *** here"


# ---------------------------------------------------------------- URL rules
async def test_credentials_in_urls_and_malformed_webhook_urls_are_refused_at_create(api):
    before = (await api.get("/v1/campaigns", params={"limit": 1})).json()["total"]
    secret = "s3cr3t-Pa55word"
    refused = {
        "models[0].client.base_url: credentials in URLs are not accepted; use api_key_env": body_with(
            f"http://admin:{secret}@model.example/v1"
        ),
        "judge.client.base_url: credentials in URLs are not accepted; use api_key_env": campaign_body(
            judge={"kind": "llm", "client": openai_client(f"https://{secret}@judge.example/v1")}
        ),
        "webhook_url: credentials in URLs are not accepted": campaign_body(
            webhook_url=f"https://hook:{secret}@hooks.example/x"
        ),
        "webhook_url: must not contain spaces, line breaks or control characters": campaign_body(
            webhook_url="https://hooks.example/x\r\nX-Injected: 1"
        ),
        "webhook_url: must not contain spaces": campaign_body(webhook_url="https://hooks.example/a b"),
        "webhook_url: must be an http:// or https:// URL with a valid host and a port from 1 to 65535": (
            campaign_body(webhook_url="https://hooks.example:70000/x")
        ),
        "webhook_url: must be an absolute http(s) URL": campaign_body(webhook_url="gopher://hooks.example/x"),
        "models[0].client.base_url: must have a port from 1 to 65535": body_with("http://model.example:0/v1"),
    }
    for message, body in refused.items():
        r = await api.post("/v1/campaigns", json=body)
        assert r.status_code == 422, (message, r.status_code, r.text)
        field, msg = message.split(": ", 1)
        errors = r.json()["detail"]
        assert any(msg in e["msg"] and field.split(".")[-1] in e["loc"] for e in errors), (message, errors)
        assert secret not in r.text
    assert (await api.get("/v1/campaigns", params={"limit": 1})).json()["total"] == before
