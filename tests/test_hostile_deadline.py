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
