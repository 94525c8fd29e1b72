"""Provider rate limits shared across workers and campaigns (issue 25, item 7).

The rule (service/ratelimits.py): at most ``rpm`` requests and ``tpm`` tokens on one
credential in any 60-second window, counted in the database, and nobody sends before
the provider's last ``Retry-After``. Checked on the pure rule, on two limiter objects
sharing one SQLite or PostgreSQL database, and end to end: two server processes on one
database, two campaigns on one credential, against a provider that answers 429 past
its quota.
"""

from __future__ import annotations

import functools
import time

import httpx
import pytest
from conftest import ADMIN_KEY, start_fake_provider, start_live_server, start_together, stop_live_server, stop_process

from service.clients.ratelimit import Quota, credential_key, estimated_tokens, quota_of
from service.ratelimits import DatabaseRateLimiter, wait_needed

Q = Quota("k" * 40, rpm=3, tpm=None)


# ---------------------------------------------------------------- the rule
def test_wait_needed_counts_a_sliding_window():
    assert wait_needed(100.0, 0.0, [], Q, tokens=1) == 0
    assert wait_needed(100.0, 0.0, [(50.0, 1), (60.0, 1)], Q, tokens=1) == 0
    # three in the window: the oldest must leave (at 50 + 60 = 110)
    assert wait_needed(100.0, 0.0, [(50.0, 1), (60.0, 1), (99.0, 1)], Q, tokens=1) == pytest.approx(10.0)
    # a Retry-After still running wins
    assert wait_needed(100.0, 130.0, [], Q, tokens=1) == pytest.approx(30.0)
    tq = Quota("t", rpm=None, tpm=1000)
    assert wait_needed(100.0, 0.0, [(70.0, 400), (80.0, 400)], tq, tokens=200) == 0
    # 800 used + 300 > 1000: the request at 70 must leave (130)
    assert wait_needed(100.0, 0.0, [(70.0, 400), (80.0, 400)], tq, tokens=300) == pytest.approx(30.0)
    # larger than tpm alone: counted as tpm, waits for an empty window
    assert wait_needed(100.0, 0.0, [(70.0, 400), (80.0, 400)], tq, tokens=5000) == pytest.approx(40.0)


def test_credential_key_hashes_the_key_and_quota_needs_a_limit():
    a = credential_key("openai", "http://x/v1", "sk-secret-1")
    assert len(a) == 40 and "secret" not in a
    assert a == credential_key("openai", "http://x/v1", "sk-secret-1")
    assert a != credential_key("openai", "http://x/v1", "sk-secret-2")

    class Cfg:
        kind, base_url, rpm, tpm = "openai", "http://x/v1", None, None

    assert quota_of(Cfg(), "k") is None
    Cfg.rpm = 10
    assert quota_of(Cfg(), "k") == Quota(credential_key("openai", "http://x/v1", "k"), 10, None)
    assert estimated_tokens("abcdefgh", None, 100) == 102
    assert estimated_tokens("x", ["abcd", "efgh"], None) == 2


def _png(size: tuple[int, int]) -> bytes:
    import io

    from PIL import Image

    out = io.BytesIO()
    Image.new("RGB", size, (9, 9, 9)).save(out, format="PNG")
    return out.getvalue()


def test_tpm_estimate_counts_prompt_images_by_the_budgets_rule():
    """A vision request's images count in its tpm estimate, by the per-provider image-token rule the
    budget's bound uses (service/images/tokens.py), not as nothing."""
    from service.clients.content import ImagePart, UserTurn
    from service.images.tokens import image_input_tokens

    big, small = _png((1500, 900)), _png((300, 200))
    turns = [UserTurn("abcd", (ImagePart("image/png", big),)), UserTurn("efgh", (ImagePart("image/png", small),))]
    seen = set()
    for cfg in (
        {"kind": "openai", "model": "gpt-4o"},
        {"kind": "openai", "model": "some-open-vlm"},
        {"kind": "anthropic", "model": "claude-sonnet-4-5"},
        {"kind": "gemini", "model": "gemini-2.5-flash"},
    ):
        images = image_input_tokens(cfg, 1500, 900) + image_input_tokens(cfg, 300, 200)
        assert images > 0
        assert estimated_tokens("x", turns, 100, cfg) == 2 + images + 100
        seen.add(images)
    assert len(seen) == 4  # each provider's own rule
    assert estimated_tokens("x", ["abcd", "efgh"], None, {"kind": "anthropic"}) == 2  # no images, no image tokens


async def test_a_vision_calls_tpm_slot_holds_its_image_tokens():
    """The HTTP client asks the limiter for the request's text, image and output tokens."""
    import respx

    from service.clients import build_client
    from service.clients.config import parse_client_config
    from service.clients.content import ImagePart, UserTurn
    from service.images.tokens import image_input_tokens

    asked: list[int] = []

    class Recorder:
        async def acquire(self, quota, tokens):
            asked.append(tokens)
            return 1

        async def settle(self, slot, tokens):
            pass

        async def block(self, quota, seconds):
            pass

    json_cfg = {"kind": "anthropic", "base_url": "http://claude.test", "model": "claude-x", "tpm": 100000}
    raw = dict(json_cfg, api_key_env=None, params={"max_tokens": 50})
    client = build_client(parse_client_config(raw), model_name="m", fixed_cost=0.0, limiter=Recorder())
    reply = {"content": [{"type": "text", "text": "red"}], "usage": {"input_tokens": 5, "output_tokens": 1}}
    with respx.mock() as mock:
        mock.post("http://claude.test/v1/messages").mock(return_value=httpx.Response(200, json=reply))
        turn = UserTurn("What colour?", (ImagePart("image/png", _png((1200, 1000))),))
        res = await client.complete("What colour?", turns=[turn])
    await client.aclose()
    assert res.text == "red"
    assert asked == [(len("What colour?") + 3) // 4 + image_input_tokens(raw, 1200, 1000) + 50]
    assert image_input_tokens(raw, 1200, 1000) == 1600


# ---------------------------------------------------------------- shared through the database
class Clock:
    def __init__(self, t: float = 1_000_000.0):
        self.t = t

    def __call__(self) -> float:
        return self.t


def _limiters(db_url: str, clock: Clock):
    from service.db import Database

    db = Database(db_url)
    return db, DatabaseRateLimiter(db, clock=clock), DatabaseRateLimiter(Database(db_url), clock=clock)


def test_two_limiters_on_one_database_share_requests_per_minute(db_url):
    clock = Clock()
    _, a, b = _limiters(db_url, clock)
    q = Quota(credential_key("openai", f"http://rpm/{clock.t}", db_url), rpm=3, tpm=None)
    assert a.try_acquire(q, 1)[0] is not None
    clock.t += 1
    assert a.try_acquire(q, 1)[0] is not None
    clock.t += 1
    assert b.try_acquire(q, 1)[0] is not None
    clock.t += 1
    slot, wait = b.try_acquire(q, 1)  # the fourth in the minute: from either worker it waits
    assert slot is None and wait == pytest.approx(57.0)
    assert a.try_acquire(q, 1)[0] is None
    clock.t += 57.0  # the first request left the window
    assert b.try_acquire(q, 1)[0] is not None
    assert a.window(q.key) == (3, 3)


def test_tokens_per_minute_and_settled_usage(db_url):
    clock = Clock(2_000_000.0)
    _, a, b = _limiters(db_url, clock)
    q = Quota(credential_key("openai", f"http://tpm/{clock.t}", db_url), rpm=None, tpm=1000)
    s1, _ = a.try_acquire(q, 400)
    assert s1 is not None and b.try_acquire(q, 400)[0] is not None
    assert a.try_acquire(q, 400)[0] is None  # 1200 > 1000
    a._settle(s1, 100)  # the provider reported 100 tokens: 500 in the window
    assert b.try_acquire(q, 400)[0] is not None


def test_a_429_seen_by_one_worker_makes_every_worker_wait(db_url):
    import asyncio

    clock = Clock(3_000_000.0)
    _, a, b = _limiters(db_url, clock)
    q = Quota(credential_key("openai", f"http://429/{clock.t}", db_url), rpm=100, tpm=None)
    asyncio.run(a.block(q, 5.0))
    slot, wait = b.try_acquire(q, 1)
    assert slot is None and wait == pytest.approx(5.0)
    clock.t += 5.0
    assert b.try_acquire(q, 1)[0] is not None


# ---------------------------------------------------------------- end to end
QUOTA = 10


def _campaign(base_url: str, name: str, rpm: int | None) -> dict:
    client = {"kind": "openai", "base_url": f"{base_url}/v1", "params": {"max_tokens": 64}}
    if rpm is not None:
        client["rpm"] = rpm
    models = [{"name": f"{name}-m{n}", "cost": 0.001, "client": dict(client, model=f"fake-q{n + 1}")} for n in range(3)]
    return {
        "name": name,
        "models": models,
        "prompts": [f"Question {n}?" for n in range(40)],
        "judge": {"kind": "simulated", "preference": [[0.5, 0.3, 0.2], [0.7, 0.5, 0.4], [0.8, 0.6, 0.5]]},
        "delta": 1e-9,
        "seed": 3,
    }


def _stats(provider: str) -> dict:
    return httpx.get(f"{provider}/v1/requests", timeout=10).json()["stats"]


async def test_fake_provider_quota_answers_429_with_retry_after():
    """The provider the end-to-end test runs against: QUOTA requests a minute, then 429."""
    from service.fake_provider import create_fake_provider_app

    app = create_fake_provider_app(rpm_quota=2)
    body = {"model": "fake-q1", "messages": [{"role": "user", "content": "hi"}]}
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://fake") as c:
        assert [(await c.post("/v1/chat/completions", json=body)).status_code for _ in range(2)] == [200, 200]
        r = await c.post("/v1/chat/completions", json=body)
        assert r.status_code == 429 and 1 <= int(r.headers["retry-after"]) <= 60
        assert (await c.get("/v1/requests")).json()["stats"]["rate_limited"] == 1


def test_two_servers_two_campaigns_respect_a_shared_quota(db_url, tmp_path):
    """Two server processes on one database run one campaign each on the same credential
    (``rpm: QUOTA``), against a provider that accepts QUOTA requests a minute and answers
    429 past it: together they use the whole quota and the provider never refuses one.
    (Without the shared count each process would send QUOTA requests: twice the quota.)"""
    (provider, pproc), *servers = start_together(  # at once: the test waits for one process start, not three
        functools.partial(start_fake_provider, tmp_path / "provider.log", "--rpm-quota", str(QUOTA)),
        *(functools.partial(start_live_server, db_url, tmp_path / f"server{n}.log") for n in range(2)),
    )
    try:
        headers = {"Authorization": f"Bearer {ADMIN_KEY}"}
        for n, server in enumerate(servers):
            with httpx.Client(base_url=server.url, headers=headers, timeout=30) as api:
                r = api.post("/v1/campaigns", json=_campaign(provider, f"quota-{n}-{time.time_ns()}", QUOTA))
                assert r.status_code == 201, r.text
                r = api.post(f"/v1/campaigns/{r.json()['id']}/run", json={"concurrency": 4})
                assert r.status_code == 202, r.text
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            stats = _stats(provider)
            if stats["requests"] - stats["rate_limited"] >= QUOTA:
                break
            time.sleep(0.2)
        time.sleep(4.0)  # both runs keep asking for more for a few seconds
        stats = _stats(provider)
        assert stats["requests"] - stats["rate_limited"] == QUOTA, stats  # the quota was used up
        assert stats["rate_limited"] == 0, stats
    finally:
        for server in servers:
            stop_live_server(server)
        stop_process(pproc)
