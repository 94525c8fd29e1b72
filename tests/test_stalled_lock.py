"""A process stalled inside a transaction that holds a campaign's row lock blocks no other process's
start or heartbeat (docs/reliability.md, Run ownership), on PostgreSQL.

The test's own connection stands for the stalled process: idle in a transaction holding
``SELECT ... FOR UPDATE`` on a campaign whose run is active with a free lease. A server started
with ``LLMDUEL_RESUME_RUNS=1`` comes up and serves while the lock is held (before, its start
waited on the lock for ever: tests/test_stalled_owner.py's second server "did not come up"),
leaves the locked run alone, and takes it over once the lock is released.
"""

from __future__ import annotations

import asyncio
import time

import httpx
import psycopg
import pytest
from conftest import ADMIN_KEY, app_client, start_live_server, stop_live_server
from service_helpers import campaign_body, simulated_judge

LEASE = 2.0
ENV = {"LLMDUEL_RUN_LEASE_SECONDS": str(LEASE), "LLMDUEL_RUN_HEARTBEAT_SECONDS": "0.4", "LLMDUEL_RESUME_RUNS": "1"}

pytestmark = pytest.mark.postgres


def _wait(cond, timeout: float, what: str):
    deadline = time.monotonic() + timeout
    while True:
        got = cond()
        if got:
            return got
        assert time.monotonic() < deadline, what
        time.sleep(0.05)


async def _released_runs(url: str, n: int) -> list[int]:
    """``n`` campaigns whose run is active with a free lease (their owner stopped gracefully)."""
    ids = []
    async with app_client(url, run_lease_seconds=LEASE, run_heartbeat_seconds=0.4) as c:
        for i in range(n):
            clients = [{"kind": "simulated", "latency_s": 0.5}] * 3
            body = campaign_body(name=f"stalled lock {i}", judge=simulated_judge(), clients=clients, max_duels=50)
            cid = (await c.post("/v1/campaigns", json=body)).json()["id"]
            r = await c.post(f"/v1/campaigns/{cid}/run", json={"concurrency": 1})
            assert r.status_code == 202, r.text
            ids.append(cid)
        await asyncio.sleep(0.1)
    # the app's close gave the leases up: each run is active, without an owner
    return ids


def _owner_pid(db, cid: int) -> int | None:
    from service.models import Campaign

    with db.read() as s:
        c = s.get(Campaign, cid)
        assert c.run_active
        owner = c.run_owner
    return int(owner.split(":")[1]) if owner else None


@pytest.mark.slow
async def test_a_server_starts_and_takes_runs_over_while_another_process_holds_their_row_locks(pg_url, tmp_path):
    from service.db import Database, upgrade_database

    upgrade_database(pg_url)
    (held,) = await _released_runs(pg_url, 1)
    db = Database(pg_url)
    # the test's own connection: holds the first campaign's row lock until it is rolled back
    conninfo = db.engine.url.set(drivername="postgresql").render_as_string(hide_password=False)
    holder = psycopg.connect(conninfo)
    holder.execute("SELECT id FROM campaigns WHERE id = %s FOR UPDATE", (held,))
    server = None
    try:
        server = start_live_server(pg_url, tmp_path / "server.log", extra_env=ENV, timeout=60)
        r = httpx.get(f"{server.url}/v1/campaigns/{held}", headers={"Authorization": f"Bearer {ADMIN_KEY}"})
        assert r.status_code == 200 and r.json()["run"]["active"], r.text
        time.sleep(3 * LEASE)  # several heartbeats: none takes the locked run, none waits on it
        assert _owner_pid(db, held) is None
        holder.rollback()
        _wait(lambda: _owner_pid(db, held) == server.process.pid, 10, "the run is taken over once the lock is free")
        assert "Traceback" not in server.log()
    finally:
        holder.close()
        if server is not None:
            stop_live_server(server)
        db.dispose()
