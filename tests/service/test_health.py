"""``/healthz`` reports whether the database still accepts writes, on SQLite and PostgreSQL.

A database that answers reads but refuses writes is made the way operators meet it:
SQLite opened read-only (``PRAGMA query_only``, as a read-only file or mount behaves),
PostgreSQL with read-only transactions by default (as a standby or a database switched
to ``default_transaction_read_only`` does). Every connection of the app's pool gets the
setting; the API's writes then fail too, and ``/healthz`` must say so with 503.
"""

from __future__ import annotations

from conftest import app_client
from service_helpers import campaign_body
from sqlalchemy import event


def _read_only(dbapi_conn, _record):
    if type(dbapi_conn).__module__.startswith("sqlite3"):
        dbapi_conn.execute("PRAGMA query_only = ON")
        return
    dbapi_conn.autocommit = True  # a SET inside a transaction that is rolled back would be undone
    dbapi_conn.execute("SET default_transaction_read_only = on")
    dbapi_conn.autocommit = False


async def test_healthz_answers_503_with_a_reason_when_writes_fail(db_url):
    async with app_client(db_url, inline_transactions=False) as api:
        app = api.app
        db = app.state.db
        r = await api.get("/healthz")
        assert r.status_code == 200 and r.json() == {"status": "ok", "database": "ok"}

        event.listen(db.engine, "connect", _read_only)
        db.engine.dispose()  # every connection from now on refuses writes
        app.state.health.forget()
        assert (await api.get("/v1/campaigns")).status_code == 200  # reads still work
        assert (await api.post("/v1/campaigns", json=campaign_body())).status_code == 503  # writes do not
        r = await api.get("/healthz")
        assert r.status_code == 503, r.text
        body = r.json()
        assert body["status"] == "degraded" and body["database"] == "read-only"
        assert body["reason"].startswith("writes fail: ") and "read" in body["reason"].lower(), body

        event.remove(db.engine, "connect", _read_only)
        db.engine.dispose()  # writable again: the next probe sees it (a bad answer is not cached)
        r = await api.get("/healthz")
        assert r.status_code == 200 and r.json() == {"status": "ok", "database": "ok"}


async def test_a_good_answer_is_cached_and_a_schema_without_the_table_is_read_checked_only(tmp_path):
    from service.db import upgrade_database

    url = f"sqlite:///{tmp_path / 'old.db'}"
    upgrade_database(url, "0010")  # before the health table
    async with app_client(url, headers=None) as anon:
        app = anon.app
        r = await anon.get("/healthz")
        assert r.status_code == 200 and r.json()["writes"].startswith("unchecked"), r.text
        upgrade_database(url)
        app.state.health.forget()
        assert (await anon.get("/healthz")).json() == {"status": "ok", "database": "ok"}
        with app.state.db.engine.connect() as conn:
            first = conn.exec_driver_sql("SELECT checked_at FROM health_checks").scalar_one()
        for _ in range(5):  # within the cache: no further write
            assert (await anon.get("/healthz")).status_code == 200
        with app.state.db.engine.connect() as conn:
            assert conn.exec_driver_sql("SELECT checked_at FROM health_checks").scalar_one() == first
