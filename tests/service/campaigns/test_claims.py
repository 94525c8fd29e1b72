"""Store claims die with their owner (service/campaigns/stores.py, docs/reliability.md).

An answer claim (``generating``) belongs to a live process: its owner renews it every
heartbeat, so another process waiting for the same answer does not call the model
while the owner lives; once the owner is killed (SIGKILL during the model call), the
claim is taken over within the take-over bound (``LLMDUEL_RUN_LEASE_SECONDS``, small
here), not after the 600 s call timeout as on main.

The owner is a real service process calling a real fake provider that answers slowly;
the second process is in this test (its provider stood in by respx).
"""

from __future__ import annotations

import asyncio
import functools
import os
import signal
import time
import uuid

import httpx
import pytest
import respx
from conftest import (
    ADMIN_KEY,
    app_client,
    start_fake_provider,
    start_live_server,
    start_together,
    stop_live_server,
    stop_process,
)
from sqlalchemy import select

LEASE, BEAT = 2.0, 0.4
ENV = {"LLMDUEL_RUN_LEASE_SECONDS": str(LEASE), "LLMDUEL_RUN_HEARTBEAT_SECONDS": str(BEAT)}


def _body(base: str, tag: str) -> dict:
    models = [
        {
            "name": n,
            "cost": 0.001,
            "client": {"kind": "openai", "base_url": base + "/v1", "model": f"{tag}-{n}-q{q}"},
        }
        for n, q in (("small", 1), ("large", 3))
    ]
    return {
        "name": f"claims {tag}",
        "models": models,
        "prompts": [f"the one shared question {tag}"],
        "judge": {"kind": "human"},
        "answers": "reuse",
        "seed": 2,
    }


@pytest.mark.slow
async def test_a_killed_owners_claim_is_taken_over_within_the_bound(db_url, tmp_path):
    from service.campaigns import store_claims, store_keys
    from service.db import Database
    from service.models import StoredAnswer

    (base, provider), owner = start_together(  # at once: the test waits for one process start, not two
        functools.partial(start_fake_provider, tmp_path / "fake.log", "--latency", "120"),  # the owner's call hangs
        functools.partial(start_live_server, db_url, tmp_path / "owner.log", extra_env=ENV),
    )
    db = Database(db_url)
    tag = "c" + uuid.uuid4().hex[:8]
    body = _body(base, tag)
    phash = store_keys.prompt_hash(body["prompts"][0])
    killed = False
    try:
        h = {"Authorization": f"Bearer {ADMIN_KEY}"}
        async with httpx.AsyncClient(base_url=owner.url, headers=h, timeout=30) as remote:
            cid = (await remote.post("/v1/campaigns", json=body)).json()["id"]
            hanging = asyncio.create_task(remote.post(f"/v1/campaigns/{cid}/duels", timeout=300))

            def generating() -> int:
                with db.read() as s:
                    rows = s.execute(select(StoredAnswer.status).where(StoredAnswer.prompt_hash == phash)).all()
                return sum(1 for (st,) in rows if st == store_claims.GENERATING)

            deadline = time.monotonic() + 30
            while generating() < 2:  # the owner claimed both answers and calls the slow provider
                if hanging.done():
                    raise AssertionError(f"the duel request ended: {hanging.result().text}")
                assert time.monotonic() < deadline, f"no claims: {owner.log()[-3000:]}"
                await asyncio.sleep(0.05)

            async with app_client(db_url, run_lease_seconds=LEASE, run_heartbeat_seconds=BEAT) as local:
                with respx.mock(assert_all_called=False) as mock:
                    calls = mock.post(f"{base}/v1/chat/completions").mock(
                        return_value=httpx.Response(
                            200,
                            json={
                                "choices": [{"message": {"role": "assistant", "content": "taken over"}}],
                                "usage": {"prompt_tokens": 5, "completion_tokens": 2},
                            },
                        )
                    )
                    cid2 = (await local.post("/v1/campaigns", json=dict(body, name=f"second {tag}"))).json()["id"]
                    waiting = asyncio.create_task(local.post(f"/v1/campaigns/{cid2}/duels", timeout=900))
                    # The owner lives and renews its claims: for twice the bound nobody calls the model again.
                    await asyncio.sleep(2 * LEASE + 1)
                    assert calls.call_count == 0 and not waiting.done()
                    assert generating() == 2
                    os.kill(owner.process.pid, signal.SIGKILL)  # during the model call
                    killed = True
                    # Taken over within the bound (plus polling and the call), not after the 600 s timeout.
                    r = await asyncio.wait_for(waiting, timeout=LEASE + 20)
                    assert r.status_code == 201, r.text
                    duel = r.json()
                    assert duel["status"] == "pending" and {duel["answer_a"], duel["answer_b"]} == {"taken over"}
                    assert calls.call_count == 2
            assert generating() == 0
            hanging.cancel()
    finally:
        if not killed:
            stop_live_server(owner)
        else:
            owner.process.wait(timeout=10)
        stop_process(provider)
        db.dispose()
