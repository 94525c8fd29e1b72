"""The asyncpg driver's statements (service/cycle/pg_driver.py): the Core statements compiled once,
with numbered parameters."""

from __future__ import annotations

from service.cycle import pg_driver


def test_the_asyncpg_statements_are_the_core_statements_compiled_once():
    for compiled in (
        pg_driver.PG_IN_FLIGHT,
        pg_driver.PG_LOCK_FOR_PLAN,
        pg_driver.PG_VOTED,
        pg_driver._pg_plan_write(("campaign_id", "status", "number")),
    ):
        assert "%(" not in compiled.sql
        assert [f"${n}" in compiled.sql for n in range(1, len(compiled.names) + 1)] == [True] * len(compiled.names)
    assert pg_driver.PG_IN_FLIGHT.names == ("cid",)
    assert "'calling'" in pg_driver.PG_IN_FLIGHT.sql and "'pending'" in pg_driver.PG_IN_FLIGHT.sql
    assert pg_driver.PG_VOTED.sql.startswith("WITH u AS") and "FOR UPDATE" in pg_driver.PG_LOCK_FOR_PLAN.sql
