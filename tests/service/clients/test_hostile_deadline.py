"""A per-read timeout is not a deadline: a provider that sends its headers and then one byte
at a time (the fake provider's ``fault-trickle`` model, over real HTTP) is cut at the
attempt's ``timeout_s``, and the call, retries included, ends within ``max_attempts x
timeout_s`` plus its backoff (on main it hung for as long as the provider kept trickling)."""

from __future__ import annotations

import time

import pytest
from conftest import start_fake_provider, stop_process

from service.clients import ClientError, build_client, parse_client_config


@pytest.fixture(scope="module")
def trickler(tmp_path_factory):
    url, proc = start_fake_provider(tmp_path_factory.mktemp("fake") / "fake.log", "--trickle-interval", "0.3")
    yield url
    stop_process(proc)


async def test_a_trickling_provider_is_cut_at_each_attempts_deadline(trickler):
    cfg = parse_client_config(
        {
            "kind": "openai",
            "base_url": trickler + "/v1",
            "model": "m-fault-trickle",
            "timeout_s": 1.0,
            "max_attempts": 2,
            "backoff_base_s": 0.1,
            "backoff_max_s": 0.1,
        }
    )
    client = build_client(cfg, model_name="m", fixed_cost=0.0)
    t0 = time.monotonic()
    with pytest.raises(ClientError, match="timed out after 1s") as info:
        await client.complete("hello")  # each byte arrives well within httpx's per-read timeout
    elapsed = time.monotonic() - t0
    await client.aclose()
    assert info.value.attempts == 2
    assert elapsed < 2 * 1.0 + 0.1 + 1.5, f"the call took {elapsed:.1f} s"


async def test_a_call_queued_for_a_rate_limit_slot_ends_by_its_hard_deadline(db_url):
    """The call as a whole has a hard deadline (max_attempts x timeout_s + (max_attempts - 1) x
    max(backoff_max_s, max_retry_after_s)): waiting for a rate-limit slot counts against it (on
    the code before, a call queued behind a full ``rpm`` window waited for the window, a minute
    here, however short its timeout_s)."""
    import asyncio
    import uuid

    from service.clients.ratelimit import quota_of
    from service.db import Database
    from service.ratelimits import DatabaseRateLimiter

    host = f"http://d{uuid.uuid4().hex[:10]}.test/v1"
    cfg = parse_client_config(
        {
            "kind": "openai",
            "base_url": host,
            "model": "m",
            "rpm": 1,
            "timeout_s": 0.5,
            "max_attempts": 2,
            "backoff_base_s": 0.1,
            "backoff_max_s": 0.1,
            "max_retry_after_s": 0.5,
        }
    )
    db = Database(db_url)
    limiter = DatabaseRateLimiter(db)
    slot, _ = limiter.try_acquire(quota_of(cfg, None), 1)  # another request took the minute's one slot
    assert slot is not None
    client = build_client(cfg, model_name="m", fixed_cost=0.0, limiter=limiter)
    t0 = time.monotonic()
    try:
        with pytest.raises(ClientError, match="hard deadline of 1.5s"):
            await asyncio.wait_for(client.complete("hello"), 10.0)
    finally:
        await client.aclose()
        db.dispose()
    elapsed = time.monotonic() - t0
    assert elapsed < 1.5 + 1.0, f"the call took {elapsed:.1f} s"
