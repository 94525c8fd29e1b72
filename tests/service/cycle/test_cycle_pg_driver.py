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


def test_the_answers_statements_are_compiled_with_their_constants_written_in():
    """The answers stage's statements (the money writer's charge row, a stored answer, the spares, the duel
    and the campaign in one statement): every value a parameter, the constants (statuses, NULL) in the SQL."""
    answers = (
        pg_driver.PG_LOCK_FOR_ANSWERS,
        pg_driver.PG_ANSWER_CHARGE,
        pg_driver.PG_FINALIZE_ANSWER,
        pg_driver.PG_ANSWERED_DUEL,
        pg_driver.PG_ANSWERED,
        pg_driver.PG_ANSWERED_BOTH,
        *pg_driver.PG_SETTLE_SPARES.values(),
    )
    for compiled in answers:
        assert "%(" not in compiled.sql
        assert [f"${n}" in compiled.sql for n in range(1, len(compiled.names) + 1)] == [True] * len(compiled.names)
    assert (
        pg_driver.PG_ANSWER_CHARGE.sql.endswith("RETURNING charges.id") and "detail" in pg_driver.PG_ANSWER_CHARGE.names
    )
    assert "taken_by" not in {
        n for c in pg_driver.PG_SETTLE_SPARES.values() for n in c.names if c.sql.startswith("UPDATE")
    }
    assert all("taken_by=NULL" in c.sql for c in pg_driver.PG_SETTLE_SPARES.values() if c.sql.startswith("UPDATE"))
    assert "status != 'ready'" in pg_driver.PG_FINALIZE_ANSWER.sql  # a ready stored answer is never changed
    both = pg_driver.PG_ANSWERED_BOTH
    assert both.sql.startswith("WITH u AS") and set(both.names) == set(pg_driver.PG_ANSWERED_DUEL.names) | set(
        pg_driver.PG_ANSWERED.names
    )
