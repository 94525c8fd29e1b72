"""The Python client (service/client.py), which the command line uses: a notebook-style session
against a real server (``llmduel serve --workers 2``, SQLite and PostgreSQL), its errors, and the
Idempotency-Key every POST carries."""

from __future__ import annotations

import json

import httpx
import pytest
from conftest import ADMIN_KEY
from service_helpers import campaign_body, simulated_judge

from service.client import APIError, Client


def test_a_session_from_create_to_export_and_delete(live_server):
    with Client(live_server.url, ADMIN_KEY, timeout=60) as llm:
        body = campaign_body("client session", costs=(1.0, 1.0, 1.0), judge=simulated_judge(), delta=0.1)
        c = llm.create_campaign(body)
        assert c["status"] == "running" and c["name"] == "client session"
        assert llm.start_run(c["id"], concurrency=2)["run"]["active"] in (True, False)
        done = llm.wait(c["id"], interval=0.2, timeout=120)
        assert done["status"] == "certified" and done["winner"] == "m0", done["status"]
        files = llm.export(c["id"])
        assert json.loads(files["certificate.json"])["winner"] == "m0"
        assert llm.judge_bias(c["id"])["verdicts"] == done["duels"]
        assert llm.replay(c["id"])["ok"] is True
        assert c["id"] in {x["id"] for x in llm.list_campaigns(limit=500)["items"]}
        assert llm.archive(c["id"])["archived"] is True
        assert c["id"] in {x["id"] for x in llm.list_campaigns(limit=500, archived=True)["items"]}
        assert llm.delete_campaign(c["id"])["deleted"] is True
        with pytest.raises(APIError) as err:
            llm.campaign(c["id"])
        assert err.value.status_code == 404 and "not found" in err.value.message
        with pytest.raises(APIError) as err:
            llm.create_campaign({**body, "delat": 0.1})
        assert err.value.status_code == 422 and "did you mean 'delta'" in err.value.message
    with Client(live_server.url, "wrong-key-0123456789") as nobody, pytest.raises(APIError) as err:
        nobody.list_campaigns()
    assert err.value.status_code == 401 and "wrong-key" not in err.value.message


def test_every_post_carries_an_idempotency_key_and_errors_are_one_line():
    seen: list[tuple[str, str | None]] = []

    def handler(request: httpx.Request) -> httpx.Response:
        seen.append((request.method, request.headers.get("idempotency-key")))
        if request.url.path.endswith("/stop"):
            return httpx.Response(409, json={"detail": "campaign 3 has already ended\n(status certified)"})
        return httpx.Response(200, json={"id": 3, "status": "running"})

    with Client("http://llmduel.test", "k", transport=httpx.MockTransport(handler)) as llm:
        llm.campaign(3)
        llm.create_campaign({"name": "x"})
        llm.create_campaign({"name": "x"}, idempotency_key="retry-me")
        with pytest.raises(APIError) as err:
            llm.stop(3)
    assert err.value.status_code == 409 and err.value.message == (
        "POST /v1/campaigns/3/stop: HTTP 409: campaign 3 has already ended (status certified)"
    )
    assert seen[0] == ("GET", None)
    keys = [k for method, k in seen[1:]]
    assert all(keys) and len(set(keys)) == 3 and keys[1] == "retry-me"  # a fresh key per call unless given
    with pytest.raises(ValueError, match="http:// or https://"):
        Client("ftp://x")
    with Client("http://127.0.0.1:9", "k", timeout=2) as down, pytest.raises(APIError) as err:
        down.campaign(1)
    assert err.value.status_code is None and "cannot reach" in err.value.message


class _LostAnswer(httpx.BaseTransport):
    """Real HTTP, except that the first POST's answer is lost on the way back (the server did the work)."""

    def __init__(self) -> None:
        self.inner = httpx.HTTPTransport()
        self.posts: list[str | None] = []

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        response = self.inner.handle_request(request)
        if request.method == "POST":
            self.posts.append(request.headers.get("idempotency-key"))
            if len(self.posts) == 1:
                response.read()
                response.close()
                raise httpx.ReadError("connection reset by peer", request=request)
        return response

    def close(self) -> None:
        self.inner.close()


def test_a_post_whose_answer_is_lost_is_sent_again_and_done_once(live_server):
    """The client sends a POST again, with the same Idempotency-Key, after a network error; the
    server answers the repeat from the first request: one campaign, not two."""
    name = f"lost answer {id(live_server)}-{__import__('uuid').uuid4().hex[:8]}"
    transport = _LostAnswer()
    with Client(live_server.url, ADMIN_KEY, timeout=60, transport=transport) as llm:
        created = llm.create_campaign(campaign_body(name))
    assert len(transport.posts) == 2 and transport.posts[0] == transport.posts[1]
    with Client(live_server.url, ADMIN_KEY, timeout=60) as llm:
        page = llm.get("/v1/campaigns", params={"limit": 200})
    items = page["items"] if isinstance(page, dict) else page
    assert [c["id"] for c in items if c["name"] == name] == [created["id"]]
