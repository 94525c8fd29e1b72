"""A process stalled inside a transaction that holds a campaign's row lock blocks no other process
(docs/reliability.md, Run ownership, *A process stalled inside a transaction*), on PostgreSQL.

* The service's sessions (psycopg and asyncpg) carry ``idle_in_transaction_session_timeout``:
  the run lease, at least 5 s, unless ``LLMDUEL_PG_IDLE_TRANSACTION_SECONDS`` says otherwise.
  A transaction left idle that long is ended by PostgreSQL: what it wrote is rolled back, its
  locks are free, and the process that wakes up meets a database error like any lost
  connection, after which its pools connect anew.
* The run take-over skips a campaign whose row lock another transaction holds. A server started
  with ``LLMDUEL_RESUME_RUNS=1`` while two campaigns' rows are locked comes up and serves (before,
  its start waited on the lock for ever: tests/e2e/test_stalled_owner.py's second server "did not
  come up"); it takes over the run whose holder, a service session, is ended by the timeout, and
  the other, held by a plain connection without the timeout, once that lock is released.
"""

from __future__ import annotations

import asyncio
import json
import time

import httpx
import psycopg
import pytest
from conftest import ADMIN_KEY, app_client, make_settings, start_live_server, stop_live_server, wait_until
from service_helpers import campaign_body, simulated_judge
from sqlalchemy import exc as sa_exc
from sqlalchemy import text

LEASE = 2.0
LIMIT = 5.0  # the idle-in-transaction limit a 2 s lease gives (at least 5 s)
ENV = {"LLMDUEL_RUN_LEASE_SECONDS": str(LEASE), "LLMDUEL_RUN_HEARTBEAT_SECONDS": "0.4", "LLMDUEL_RESUME_RUNS": "1"}
ENV_SETTINGS = {"run_lease_seconds": LEASE, "run_heartbeat_seconds": 0.4}  # ENV, as Settings fields
SHOW = "SHOW idle_in_transaction_session_timeout"

pytestmark = pytest.mark.postgres


def _conninfo(url: str) -> str:
    from sqlalchemy.engine import make_url

    return make_url(url).set(drivername="postgresql").render_as_string(hide_password=False)


def _backend_gone(url: str, pid: int) -> bool:
    with psycopg.connect(_conninfo(url), autocommit=True) as conn:
        return conn.execute("SELECT count(*) FROM pg_stat_activity WHERE pid = %s", (pid,)).fetchone()[0] == 0


def _campaign_row(url: str, cid: int) -> tuple:
    """The campaign's name and whether its row lock is free (taken and released at once)."""
    with psycopg.connect(_conninfo(url)) as conn:
        row = conn.execute("SELECT name FROM campaigns WHERE id = %s FOR UPDATE NOWAIT", (cid,)).fetchone()
        conn.rollback()
        return row


async def _released_runs(url: str, n: int) -> list[int]:
    """``n`` campaigns whose run is active with a free lease (their owner stopped gracefully); on the
    way, the app's two kinds of connections show the idle-in-transaction limit its lease gives."""
    ids = []
    async with app_client(url, run_lease_seconds=LEASE, run_heartbeat_seconds=0.4) as c:
        db = c.app.state.db
        with db.engine.connect() as conn:
            assert conn.execute(text(SHOW)).scalar_one() == "5s"
        async with db.hot_pool.connection() as (conn, _):
            assert await conn.fetchval(SHOW) == "5s"
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


def test_the_limit_is_the_lease_at_least_5_s_or_the_setting():
    assert make_settings("sqlite://").idle_transaction_seconds == 20.0  # the default lease
    assert make_settings("sqlite://", run_lease_seconds=2.0, run_heartbeat_seconds=0.5).idle_transaction_seconds == 5
    assert make_settings("sqlite://", run_lease_seconds=60.0).idle_transaction_seconds == 60.0
    assert make_settings("sqlite://", pg_idle_transaction_seconds=0.5).idle_transaction_seconds == 0.5
    assert make_settings("sqlite://", pg_idle_transaction_seconds=0).idle_transaction_seconds == 0


async def test_a_stalled_service_transaction_is_ended_and_its_process_meets_a_clean_error(pg_url):
    from service.db import Database, is_connection_error, upgrade_database
    from service.models import Campaign

    upgrade_database(pg_url)
    async with app_client(pg_url) as c:
        body = campaign_body(name="stalled writer", judge=simulated_judge())
        cid = (await c.post("/v1/campaigns", json=body)).json()["id"]
    db = Database(pg_url, idle_transaction_seconds=3.0)
    try:
        # psycopg: a write transaction locks the row, writes, and stalls
        with pytest.raises(sa_exc.DBAPIError) as woke:
            with db.write() as s:
                db.lock_campaign(s, cid).name = "half written"
                s.flush()
                assert s.execute(text(SHOW)).scalar_one() == "3s"
                pid = s.execute(text("SELECT pg_backend_pid()")).scalar_one()
                wait_until(lambda: _backend_gone(pg_url, pid), 30, "PostgreSQL ends the idle transaction's session")
                assert _campaign_row(pg_url, cid) == ("stalled writer",)  # lock free, nothing written
                s.execute(text("SELECT 1"))  # the process wakes up
        assert woke.value.statement == "SELECT 1", woke.value  # the wake-up's statement, not an earlier one
        assert woke.value.connection_invalidated  # a lost connection: 503 in a request (service/api/errors.py)
        with db.read() as s:  # the pool connects anew
            assert s.get(Campaign, cid).name == "stalled writer"
        # asyncpg (the hot path): the same, and the pool does not keep the dead connection
        woke_up = False
        with pytest.raises(Exception) as lost:
            async with db.hot_pool.connection() as (conn, _):
                async with conn.transaction():
                    await conn.execute("SELECT id FROM campaigns WHERE id = $1 FOR UPDATE", cid)
                    pid = conn.get_server_pid()
                    await asyncio.to_thread(
                        wait_until, lambda: _backend_gone(pg_url, pid), 30, "the hot-path session ended"
                    )
                    woke_up = True
                    await conn.fetchval("SELECT 1")
        assert woke_up and is_connection_error(lost.value), repr(lost.value)
        async with db.hot_pool.connection() as (conn, reused):
            assert not reused and await conn.fetchval(SHOW) == "3s"
    finally:
        db.dispose()


async def test_an_export_its_client_reads_slowly_is_not_cut_off(pg_url):
    """The export reads the log from one snapshot as the client takes the pieces: its transaction
    lifts the limit (service.db.Database.client_paced), or a slow download would be cut off."""
    from service.db import upgrade_database

    upgrade_database(pg_url)
    async with app_client(pg_url, pg_idle_transaction_seconds=3.0) as c:
        body = campaign_body(name="slow export", judge=simulated_judge(), max_duels=3)
        cid = (await c.post("/v1/campaigns", json=body)).json()["id"]
        assert (await c.post(f"/v1/campaigns/{cid}/run", json={})).status_code == 202
        deadline = time.monotonic() + 30
        while (await c.get(f"/v1/campaigns/{cid}")).json()["run"]["active"]:
            assert time.monotonic() < deadline, "the run's three duels"
            await asyncio.sleep(0.05)
        pieces = iter(c.app.state.campaigns.results.export_stream(cid))
        head = []
        while '"battles.jsonl"' not in "".join(head):  # inside the log's read transaction
            head.append(next(pieces))

        def idle_past_the_limit() -> bool:
            with psycopg.connect(_conninfo(pg_url), autocommit=True) as conn:
                return (
                    conn.execute(
                        "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database()"
                        " AND state = 'idle in transaction' AND now() - state_change > interval '4 seconds'"
                    ).fetchone()[0]
                    > 0
                )

        wait_until(idle_past_the_limit, 30, "the export's transaction idle past the 3 s limit, still there")
        export = json.loads("".join(head) + "".join(pieces))
    assert len(export["files"]["battles.jsonl"].splitlines()) == 3


@pytest.mark.slow
async def test_a_server_starts_and_takes_runs_over_while_other_processes_hold_their_row_locks(pg_url, tmp_path):
    from service.db import Database, upgrade_database
    from service.models import Campaign

    upgrade_database(pg_url)
    held, timed_out = await _released_runs(pg_url, 2)
    db = Database(pg_url)
    # a plain connection without the limit: holds the first campaign's row lock until rolled back
    holder = psycopg.connect(_conninfo(pg_url))
    holder.execute("SELECT id FROM campaigns WHERE id = %s FOR UPDATE", (held,))
    # a service session (the limit of a 2 s lease) holds the second one's, having written to it
    limit = make_settings(pg_url, **ENV_SETTINGS).idle_transaction_seconds
    assert limit == LIMIT
    service_db = Database(pg_url, idle_transaction_seconds=limit)
    server = None
    try:
        with pytest.raises(sa_exc.DBAPIError) as woke:
            with service_db.write() as s:
                service_db.lock_campaign(s, timed_out).name = "half written"
                s.flush()
                assert s.execute(text(SHOW)).scalar_one() == "5s"
                idle_since = time.monotonic()
                server = start_live_server(pg_url, tmp_path / "server.log", extra_env=ENV, timeout=60)
                r = httpx.get(f"{server.url}/v1/campaigns/{held}", headers={"Authorization": f"Bearer {ADMIN_KEY}"})
                assert r.status_code == 200 and r.json()["run"]["active"], r.text
                wait_until(
                    lambda: _owner_pid(db, timed_out) == server.process.pid, 30, "take-over once the session ended"
                )
                assert time.monotonic() - idle_since >= LIMIT - 0.5  # not before the limit ended the holder
                assert _owner_pid(db, held) is None  # still locked: skipped at every heartbeat
                s.execute(text("SELECT 1"))  # the stalled service process wakes up
        assert woke.value.statement == "SELECT 1", woke.value  # the wake-up's statement, not an earlier one
        assert woke.value.connection_invalidated
        with db.read() as s:
            assert s.get(Campaign, timed_out).name == "stalled lock 1"  # its write was rolled back
        holder.rollback()
        wait_until(
            lambda: _owner_pid(db, held) == server.process.pid, 10, "the run is taken over once the lock is free"
        )
        assert "Traceback" not in server.log()
    finally:
        holder.close()
        if server is not None:
            stop_live_server(server)
        service_db.dispose()
        db.dispose()
