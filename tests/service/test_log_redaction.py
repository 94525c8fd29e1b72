"""No credential in the logs: a real uvicorn process with access logging on; an admin signs
in through the form and reads the dashboards, an annotator votes through its link,
clients put keys in addresses; neither the admin key, a login cookie nor an annotator
token appears in the captured log, while the requests themselves do."""

from __future__ import annotations

import re

import httpx
import pytest
from conftest import ADMIN_KEY, start_live_server, stop_live_server
from service_helpers import campaign_body

from service.log_redaction import redact


def test_redact_masks_credential_like_query_values_and_annotator_tokens():
    line = '127.0.0.1:5 - "GET /x?key=abc&offset=3&api_key=s3&access_token=t&X-Amz-Signature=q HTTP/1.1" 200'
    out = redact(line)
    assert "abc" not in out and "s3" not in out and "=t&" not in out and "=q " not in out
    assert "offset=3" in out and "key=***" in out
    assert redact("POST /annotate/ann_secret123/vote HTTP/1.1") == "POST /annotate/***/vote HTTP/1.1"
    assert redact("GET /campaigns/7 HTTP/1.1") == "GET /campaigns/7 HTTP/1.1"


@pytest.fixture(scope="module")
def info_server(sqlite_url, tmp_path_factory):
    from service.db import upgrade_database

    upgrade_database(sqlite_url)
    server = start_live_server(sqlite_url, tmp_path_factory.mktemp("logs") / "server.log", log_level="info")
    yield server
    stop_live_server(server)


def test_no_credential_reaches_the_access_log(info_server):
    url = info_server.url
    admin = httpx.Client(base_url=url, headers={"Authorization": f"Bearer {ADMIN_KEY}"}, timeout=30)
    cid = admin.post("/v1/campaigns", json=campaign_body("log redaction")).json()["id"]
    ann = admin.post(f"/v1/campaigns/{cid}/annotators", json={"label": "logged"}).json()
    token = ann["token"]
    admin.close()

    with httpx.Client(base_url=url, timeout=30) as browser:
        r = browser.post("/login", data={"key": ADMIN_KEY, "next": f"/campaigns/{cid}"})
        assert r.status_code == 303
        cookie = browser.cookies["llmduel_dashboard"]
        assert browser.get("/").status_code == 200
        assert browser.get(f"/campaigns/{cid}").status_code == 200
        browser.get(f"/?key={ADMIN_KEY}&offset=0")  # a key pasted into an address
        browser.get(f"/v1/campaigns?api_key={ADMIN_KEY}&token={token}")
    with httpx.Client(base_url=url, timeout=30) as annotator:
        assert annotator.get(f"/annotate/{token}").status_code == 200
        r = annotator.post(f"/annotate/{token}/next", headers={"X-Llmduel": "1"})
        assert r.status_code == 200 and r.json()["state"] == "duel", r.text
        duel_id = r.json()["duel_id"]
        r = annotator.post(
            f"/annotate/{token}/vote", data={"duel_id": str(duel_id), "choice": "a"}, headers={"X-Llmduel": "1"}
        )
        assert r.status_code == 200, r.text

    stop_live_server(info_server)  # flush everything
    log = info_server.log()
    # the requests are logged ...
    assert re.search(r'"POST /login HTTP/1\.1" 303', log), log[-2000:]
    assert f'"GET /campaigns/{cid} HTTP/1.1" 200' in log
    assert '"POST /annotate/***/vote HTTP/1.1" 200' in log
    assert "key=***" in log
    # ... and no credential with them
    for secret in (ADMIN_KEY, token, token[4:], cookie):
        assert secret not in log, secret


async def test_httpx_request_lines_mask_a_key_in_the_address(caplog):
    """A ``base_url`` or ``webhook_url`` with ``?key=`` (Gemini's style): httpx's INFO line of the
    request never holds the key in full."""
    import logging

    import httpx
    import respx

    from service import log_redaction

    log_redaction.install()
    secret = "AIzaSecretValue123456"
    with caplog.at_level(logging.INFO, logger="httpx"), respx.mock() as mock:
        mock.post("http://provider.test/v1/models/m:generateContent").mock(return_value=httpx.Response(200))
        async with httpx.AsyncClient() as client:
            await client.post(f"http://provider.test/v1/models/m:generateContent?key={secret}", json={})
    lines = [r.getMessage() for r in caplog.records if r.name == "httpx"]
    assert lines and "generateContent?key=***" in lines[0], lines
    assert secret not in caplog.text
