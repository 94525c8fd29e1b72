"""Request-body edges (deeply nested, invalid UTF-8: 422 like any invalid body), a 500 that
leaves the keep-alive connection usable (raw httpx against a real uvicorn server), and the
security headers of /docs and the other pages."""

from __future__ import annotations

import threading
import time

import httpx
import pytest
from conftest import ADMIN_KEY, free_port, make_settings
from service_helpers import campaign_body

DEEP = b"[" * 100_000 + b"]" * 100_000
DEEP_OBJ = b'{"a":' * 50_000 + b"1" + b"}" * 50_000


async def test_unreadable_bodies_are_422_with_a_message(api):
    cid = (await api.post("/v1/campaigns", json=campaign_body("edges"))).json()["id"]
    duel = (await api.post(f"/v1/campaigns/{cid}/duels")).json()["id"]
    cases = [
        (DEEP, "nested too deeply"),
        (DEEP_OBJ, "nested too deeply"),
        (b'{"name": "caf\xe9"}', "not valid UTF-8"),
        (b'{"choice": "\xff\xfe"}', "not valid UTF-8"),
    ]
    for path in ("/v1/campaigns", f"/v1/duels/{duel}/vote", f"/v1/campaigns/{cid}/annotators"):
        for body, message in cases:
            r = await api.post(path, content=body, headers={"Content-Type": "application/json"})
            assert r.status_code == 422, (path, message, r.status_code, r.text[:200])
            detail = r.json()["detail"]
            assert detail[0]["loc"] == ["body"] and message in detail[0]["msg"], detail
    # still a plain syntax error and a good body afterwards
    r = await api.post("/v1/campaigns", content=b"{", headers={"Content-Type": "application/json"})
    assert r.status_code == 422
    assert (await api.post(f"/v1/duels/{duel}/vote", json={"choice": "a"})).status_code == 200


@pytest.fixture
def server_with_a_bug(sqlite_url):
    """The real app plus one route that fails unexpectedly, served by uvicorn on a free port."""
    import uvicorn

    from service.app import create_app
    from service.db import upgrade_database

    upgrade_database(sqlite_url)
    app = create_app(make_settings(sqlite_url))

    async def boom():
        raise RuntimeError("a bug")

    app.add_api_route("/boom", boom, methods=["GET"])
    port = free_port()
    server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=port, log_level="critical"))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + 30
    while not server.started:
        assert time.monotonic() < deadline and thread.is_alive(), "uvicorn did not start"
        time.sleep(0.05)
    yield f"http://127.0.0.1:{port}"
    server.should_exit = True
    thread.join(timeout=15)


def test_a_500_keeps_the_keep_alive_connection(server_with_a_bug):
    peers = []

    def remember_peer(response):
        stream = response.extensions.get("network_stream")
        peers.append(stream.get_extra_info("client_addr") if stream is not None else None)

    with httpx.Client(
        base_url=server_with_a_bug,
        headers={"Authorization": f"Bearer {ADMIN_KEY}"},
        event_hooks={"response": [remember_peer]},
        limits=httpx.Limits(max_connections=1, max_keepalive_connections=1),
    ) as c:
        assert c.get("/healthz").status_code == 200
        r = c.get("/boom")
        assert r.status_code == 500 and r.json() == {"detail": "internal server error"}
        assert r.headers.get("connection", "").lower() != "close"
        for _ in range(3):
            assert c.get("/v1/campaigns").status_code == 200
        r = c.post("/v1/campaigns", content=DEEP, headers={"Content-Type": "application/json"})
        assert r.status_code == 422
        assert c.get("/boom").status_code == 500
        assert c.get("/healthz").status_code == 200
    assert None not in peers and len(set(peers)) == 1, peers  # one TCP connection throughout


async def test_docs_and_pages_send_security_headers(api):
    import re

    r = await api.get("/docs")
    assert r.status_code == 200
    csp = r.headers["content-security-policy"]
    assert "frame-ancestors 'none'" in csp and "object-src 'none'" in csp
    assert re.search(r"script-src 'self' 'sha256-[A-Za-z0-9+/=]+'", csp), csp
    assert "'unsafe-inline'" not in csp.split("script-src", 1)[1].split(";")[0]
    assert r.headers["x-frame-options"] == "DENY" and r.headers["x-content-type-options"] == "nosniff"
    assert r.headers["referrer-policy"] == "no-referrer"
    cid = (await api.post("/v1/campaigns", json=campaign_body("headers"))).json()["id"]
    token = (await api.post(f"/v1/campaigns/{cid}/annotators", json={})).json()["token"]
    for path in ("/", f"/campaigns/{cid}", "/login", f"/annotate/{token}", "/annotate/ann_unknown", "/campaigns/0"):
        r = await api.get(path)
        assert r.status_code in (200, 403, 404), (path, r.status_code)
        assert "frame-ancestors 'none'" in r.headers["content-security-policy"], path
        assert r.headers["x-frame-options"] == "DENY" and r.headers["x-content-type-options"] == "nosniff", path
