"""Consistency checks that must hold while a campaign is being written to."""

from __future__ import annotations

import asyncio
import time

from service_helpers import campaign_body, simulated_judge


async def test_replay_of_a_live_campaign_reads_one_consistent_snapshot(api):
    """``GET /replay`` (and ``llmduel replay``) while a run writes duels: the
    campaign row, the log and the ledger must be read at one instant, otherwise a
    duel recorded between two of the reads is reported as a difference."""
    body = campaign_body(
        name="replay while running",
        judge=simulated_judge(),
        delta=1e-9,
        clients=[{"kind": "simulated", "latency_s": 0.002}] * 3,
    )
    cid = (await api.post("/v1/campaigns", json=body)).json()["id"]
    assert (await api.post(f"/v1/campaigns/{cid}/run", json={"concurrency": 4})).status_code == 202
    results = []
    # Replay at least 40 times and until the run has written 20 duels (a loaded machine writes
    # slowly: the bound is on progress, not on wall time).
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        results.append((await api.get(f"/v1/campaigns/{cid}/replay")).json())
        if len(results) >= 40 and results[-1]["events"] > 60:
            break
        await asyncio.sleep(0.01)
    await api.post(f"/v1/campaigns/{cid}/stop")
    view = (await api.get(f"/v1/campaigns/{cid}")).json()
    assert view["duels"] > 20  # the run was really writing meanwhile
    bad = [r["diff"] for r in results if not r["ok"]]
    assert not bad, bad[:3]
    assert len({r["events"] for r in results}) > 3  # the replays saw different moments of the run
