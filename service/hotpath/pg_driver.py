"""Driver 2: an asyncpg connection from :class:`service.db.HotPool`, on the event loop.

While PostgreSQL works, or the transaction waits for the row lock, the loop serves
other requests. The writes of a transaction are one statement (data-modifying
CTEs).
"""

from __future__ import annotations

import asyncio
import json
import re
import time
from functools import lru_cache
from types import SimpleNamespace
from typing import TYPE_CHECKING

from sqlalchemy import JSON
from sqlalchemy.dialects import postgresql

from algorithms.vocabulary import DuelStatus

from ..db import HotPathUnavailable, is_connection_error
from ..models import Campaign, Duel
from .decisions import _CONFIG_COLUMNS, Fallback, decide_plan, decide_vote
from .sync_driver import _IN_FLIGHT_COLUMNS, _PLAN_COLUMNS, _VOTE_COLUMNS

if TYPE_CHECKING:  # pragma: no cover
    from ..auth import Principal
    from ..campaigns import CampaignService, DuelOutcome, DuelPlan

# ---------------------------------------------------------------- driver 2: asyncpg, asynchronous
def _positional(sql: str) -> tuple[str, tuple[str, ...]]:
    """``%(name)s`` placeholders to asyncpg's ``$n`` (the names, in order of ``$n``)."""
    names: list[str] = []

    def number(m: re.Match) -> str:
        if m.group(1) not in names:
            names.append(m.group(1))
        return f"${names.index(m.group(1)) + 1}"

    return re.sub(r"%\((\w+)\)s", number, sql), tuple(names)


def _pg_type(column) -> str:
    return column.type.compile(dialect=postgresql.dialect())


def _columns(table, names) -> str:
    return ", ".join(table.c[n].name for n in names)


PG_CONFIG = f"SELECT {_columns(Campaign.__table__, _CONFIG_COLUMNS)} FROM campaigns WHERE id = %(cid)s::bigint"
PG_POLICY_STATE = "SELECT policy_state FROM campaigns WHERE id = %(cid)s::bigint"
PG_PROMPT = "SELECT text FROM prompts WHERE campaign_id = %(cid)s::bigint AND idx = %(idx)s::int"
# The policy state only when this process's cached policy is not at the row's event_seq.
PG_LOCK_FOR_PLAN = (
    f"SELECT {_columns(Campaign.__table__, _PLAN_COLUMNS)}, "
    "CASE WHEN event_seq = %(seq)s::int THEN NULL ELSE policy_state END AS policy_state "
    "FROM campaigns WHERE id = %(cid)s::bigint FOR UPDATE"
)
# A separate statement after the lock: it reads a snapshot taken once the lock is held.
PG_IN_FLIGHT = (f"SELECT {_columns(Duel.__table__, _IN_FLIGHT_COLUMNS)} FROM duels "
                f"WHERE campaign_id = %(cid)s::bigint AND status IN ('{DuelStatus.CALLING}', '{DuelStatus.PENDING}')")
PG_LOCK_FOR_VOTE = (
    f"SELECT {_columns(Campaign.__table__, _VOTE_COLUMNS)}, "
    "CASE WHEN id = %(hint)s::bigint AND event_seq = %(seq)s::int THEN NULL ELSE policy_state END AS policy_state "
    "FROM campaigns WHERE id = (SELECT campaign_id FROM duels WHERE id = %(did)s::bigint) FOR UPDATE"
)
PG_DUEL_ROW = f"SELECT {', '.join(c.name for c in Duel.__table__.c)} FROM duels WHERE id = %(did)s::bigint"
_PG_JUDGED = (
    f"UPDATE duels SET status = '{DuelStatus.JUDGED}', choice = %(choice)s::text, score = %(score)s::float8, "
    "counted = %(counted)s::bool, judged_by = %(judged_by)s::text, judged_at = %(now)s::timestamptz, "
    f"record_seq = %(record_seq)s::int WHERE id = %(did)s::bigint AND status = '{DuelStatus.PENDING}' RETURNING id"
)
PG_VOTED_TIE = (
    f"WITH u AS ({_PG_JUDGED}) UPDATE campaigns SET duels_judged = duels_judged + 1, version = version + 1, "
    "updated_at = %(now)s::timestamptz WHERE id = %(cid)s::bigint AND EXISTS (SELECT 1 FROM u) RETURNING id"
)
PG_VOTED = (
    f"WITH u AS ({_PG_JUDGED}) UPDATE campaigns SET duels_judged = duels_judged + 1, "
    "duels_counted = duels_counted + 1, event_seq = %(seq)s::int, policy_state = %(policy_state)s::json, "
    "counts = %(counts)s::json, stats = %(stats)s::json, leader = %(leader)s::int, version = version + 1, "
    "updated_at = %(now)s::timestamptz WHERE id = %(cid)s::bigint AND EXISTS (SELECT 1 FROM u) RETURNING id"
)
PG_CONFIG, PG_POLICY_STATE, PG_PROMPT, PG_LOCK_FOR_PLAN, PG_IN_FLIGHT, PG_LOCK_FOR_VOTE, PG_DUEL_ROW, PG_VOTED_TIE, \
    PG_VOTED = (_positional(q) for q in (PG_CONFIG, PG_POLICY_STATE, PG_PROMPT, PG_LOCK_FOR_PLAN, PG_IN_FLIGHT,
                                         PG_LOCK_FOR_VOTE, PG_DUEL_ROW, PG_VOTED_TIE, PG_VOTED))
_JSON_DUEL_COLUMNS = frozenset(c.name for c in Duel.__table__.c if isinstance(c.type, JSON))


@lru_cache(maxsize=64)
def _pg_plan_write(duel_columns: tuple[str, ...]) -> tuple[str, tuple[str, ...]]:
    """One statement: insert the duel, its charges (a JSON array, in order) and update the campaign."""
    names = ", ".join(duel_columns)
    values = ", ".join(f"%(d_{k})s::{_pg_type(Duel.__table__.c[k])}" for k in duel_columns)
    sql = (
        f"WITH d AS (INSERT INTO duels ({names}) VALUES ({values}) RETURNING id), "
        "ch AS (INSERT INTO charges (campaign_id, duel_id, kind, model_index, amount_nusd, detail, created_at) "
        "SELECT %(cid)s::bigint, d.id, x.kind, x.model_index, x.amount_nusd, x.detail, %(now)s::timestamptz "
        "FROM d CROSS JOIN ROWS FROM (json_to_recordset(%(charges)s::json) "
        "AS (kind text, model_index int, amount_nusd bigint, detail json)) WITH ORDINALITY "
        "AS x(kind, model_index, amount_nusd, detail, n) ORDER BY x.n), "
        "c AS (UPDATE campaigns SET event_seq = %(seq)s::int, duels_created = %(created)s::int, "
        "duels_failed = duels_failed + %(failed)s::int, spend_nusd = spend_nusd + %(spent)s::bigint, "
        "version = version + 1, updated_at = %(now)s::timestamptz WHERE id = %(cid)s::bigint) "
        "SELECT id FROM d"
    )
    return _positional(sql)


class _Row(SimpleNamespace):
    """A result row with attribute access (asyncpg's records have keys only)."""

    def _asdict(self) -> dict:
        return dict(self.__dict__)


_JSON_RESULT_COLUMNS = frozenset(c.name for t in (Campaign.__table__, Duel.__table__) for c in t.c
                                 if isinstance(c.type, JSON))


def _row(record) -> _Row | None:
    if record is None:
        return None
    out = _Row(**record)
    for key in _JSON_RESULT_COLUMNS.intersection(out.__dict__):  # json arrives as text (no codec: see PgTx)
        value = out.__dict__[key]
        if isinstance(value, str):
            out.__dict__[key] = json.loads(value)
    return out


def _json(value) -> str:
    return json.dumps(value, separators=(",", ":"), allow_nan=False)


class PgTx:
    """The same round trips on an asyncpg connection, on the event loop.

    BEGIN, the row lock, the reads, one data-modifying statement (CTEs: the duel,
    its charges and the campaign's counters in one), COMMIT. JSON is sent and
    received as text: ``None`` in a JSON column is stored as JSON ``null``, as
    SQLAlchemy's JSON type stores it on the other paths.
    """

    def __init__(self, conn):
        self.conn = conn
        self.open = False  # a transaction is open on the server
        self.wrote = False  # the writes were sent (from then on, no retry)
        self.after_commit = None

    async def _begin(self) -> None:
        if not self.open:
            await self.conn.execute("BEGIN")
            self.open = True

    async def _fetchrow(self, query: tuple[str, tuple[str, ...]], params: dict) -> _Row | None:
        sql, names = query
        return _row(await self.conn.fetchrow(sql, *[params[n] for n in names]))

    async def _fetch(self, query: tuple[str, tuple[str, ...]], params: dict) -> list[_Row]:
        sql, names = query
        return [_row(r) for r in await self.conn.fetch(sql, *[params[n] for n in names])]

    async def _write_and_commit(self, query: tuple[str, tuple[str, ...]], params: dict) -> _Row | None:
        self.wrote = True
        row = await self._fetchrow(query, params)
        await self.conn.execute("COMMIT")
        self.open = False
        return row

    async def rollback(self) -> None:
        if self.open:
            await self.conn.execute("ROLLBACK")
            self.open = False

    async def plan_reads(self, campaign_id: int, cached_seq: int | None, want_config: bool):
        p = {"cid": campaign_id, "seq": cached_seq}
        await self._begin()
        row = await self._fetchrow(PG_LOCK_FOR_PLAN, p)
        if row is None:
            return None, None, [], None
        inflight = await self._fetch(PG_IN_FLIGHT, p)
        cfg = await self._fetchrow(PG_CONFIG, p) if want_config else None
        return row, row.policy_state, inflight, cfg

    async def config(self, campaign_id: int):
        await self._begin()
        return await self._fetchrow(PG_CONFIG, {"cid": campaign_id})

    async def policy_state(self, campaign_id: int) -> dict:
        await self._begin()
        return (await self._fetchrow(PG_POLICY_STATE, {"cid": campaign_id})).policy_state

    async def prompt(self, campaign_id: int, idx: int) -> str:
        await self._begin()
        return (await self._fetchrow(PG_PROMPT, {"cid": campaign_id, "idx": idx})).text

    async def plan_writes(self, duel: dict, charges: list[dict], campaign: dict) -> int:
        columns = tuple(sorted(duel))
        params = {f"d_{k}": _json(v) if k in _JSON_DUEL_COLUMNS else v for k, v in duel.items()}
        params.update(campaign, charges=_json([{k: ch[k] for k in ("kind", "model_index", "amount_nusd", "detail")}
                                               for ch in charges]))
        return int((await self._write_and_commit(_pg_plan_write(columns), params)).id)

    async def vote_reads(self, duel_id: int, hint: int | None, cached_seq: int | None):
        p = {"did": duel_id, "hint": hint, "seq": cached_seq}
        await self._begin()
        crow = await self._fetchrow(PG_LOCK_FOR_VOTE, p)
        if crow is None:
            return None, None, None
        return crow, crow.policy_state, await self._fetchrow(PG_DUEL_ROW, p)

    async def vote_writes(self, judged: dict, campaign: dict, recorded: dict | None) -> bool:
        params = {**judged, **campaign}
        if recorded is not None:
            params.update(recorded, policy_state=_json(recorded["policy_state"]), counts=_json(recorded["counts"]),
                          stats=_json(recorded["stats"]))
        return await self._write_and_commit(PG_VOTED_TIE if recorded is None else PG_VOTED, params) is not None


async def _on_pool(svc: CampaignService, make):
    """Run one transaction on a pooled connection, and its ``after_commit`` after COMMIT.

    A connection that died while idle in the pool (the server restarted, a proxy
    closed it) fails at its first round trip, before anything was written: then
    the transaction is tried once more on a new connection, so a database that came
    back costs no request a 503.
    """
    for attempt in (1, 2):
        async with svc.db.hot_pool.connection() as (conn, reused):
            tx = PgTx(conn)
            try:
                out = await make(tx)
            except Fallback:
                await tx.rollback()
                raise
            except Exception as exc:
                if attempt == 1 and reused and not tx.wrote and is_connection_error(exc):
                    continue  # the pool closes this connection; the next one is new
                if isinstance(exc, (OSError, asyncio.TimeoutError)):  # a lost socket, asyncpg's command timeout
                    raise HotPathUnavailable(f"database connection lost ({type(exc).__name__})") from exc
                raise
            if tx.open:  # pragma: no cover - every path above ends with its write and COMMIT
                raise RuntimeError("fast-path transaction left open")
        if tx.after_commit is not None:
            tx.after_commit()
        return out
    raise AssertionError("unreachable")  # pragma: no cover


async def plan_duel_async(svc: CampaignService, campaign_id: int, principal: Principal) -> DuelPlan:
    """The plain-case plan transaction on the event loop (PostgreSQL; raises :class:`Fallback`)."""
    t0 = time.perf_counter()
    plan = await _on_pool(svc, lambda tx: decide_plan(svc, tx, campaign_id, principal))
    plan.select_ms = (time.perf_counter() - t0) * 1000.0
    return plan


async def record_vote_async(svc: CampaignService, duel_id: int, choice: str, principal: Principal) -> DuelOutcome:
    """The plain-case vote transaction on the event loop (PostgreSQL; raises :class:`Fallback`)."""
    return await _on_pool(svc, lambda tx: decide_vote(svc, tx, duel_id, choice, principal))
