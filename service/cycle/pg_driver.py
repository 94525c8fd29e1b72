"""Driver 2: an asyncpg connection from :class:`service.db.HotPool`, on the event loop.

While PostgreSQL works, or the transaction waits for the row lock, the loop serves
other requests. It runs the plan, answers and verdict sequences with the SQLAlchemy
driver's statements (and the money writer's, :mod:`service.money.charges`), compiled
once for asyncpg (:func:`compile_pg`). The writes of a plan or a verdict are one
statement (data-modifying CTEs); the answers write their charge rows one by one (their
ids go into the answer store), then the duel and the campaign in one statement.
"""

from __future__ import annotations

import asyncio
import json
import re
import threading
import time
from functools import lru_cache
from types import SimpleNamespace
from typing import TYPE_CHECKING, NamedTuple

from sqlalchemy import (
    JSON,
    bindparam,
    exists,
    insert,
    select,
)
from sqlalchemy.dialects import postgresql
from sqlalchemy.sql.schema import ScalarElementColumnDefault

from ..campaigns import endings, policy_log, skips, spares, store_claims, store_lookup
from ..campaigns.judge_charges import Judgement
from ..campaigns.tasks import in_thread
from ..campaigns.types import DomainError, HeldDuel
from ..db import HotPathUnavailable, is_connection_error
from ..models import Campaign, Duel, PolicyCheckpoint
from ..money import charges, holds
from . import sync_driver
from .answers import decide_answers, settle
from .plan import decide_plan
from .shared import handles
from .verdict import decide_verdict

C = Campaign.__table__.c
D = Duel.__table__.c

if TYPE_CHECKING:  # pragma: no cover
    from ..auth import Principal
    from ..campaigns.types import DuelOutcome, DuelPlan
    from .service_port import HotService


# ---------------------------------------------------------------- driver 2: asyncpg, asynchronous
class Compiled(NamedTuple):
    """A Core statement compiled once for asyncpg: ``$n`` SQL and the parameter names in ``$n`` order."""

    sql: str
    names: tuple[str, ...]

    def args(self, params: dict) -> list:
        return [params[n] for n in self.names]


_PG = postgresql.dialect()  # psycopg's "pyformat" placeholders with explicit casts, renumbered below


def compile_pg(stmt) -> Compiled:
    """``stmt`` (SQLAlchemy Core) as asyncpg runs it: ``%(name)s`` placeholders become ``$n``."""
    compiled = stmt.compile(dialect=_PG)
    constants = {k: v for k, v in compiled.params.items() if v is not None}  # the statement's own values
    names: list[str] = []

    def number(m: re.Match) -> str:
        name = m.group(1)
        if name in constants:  # a constant (a status, an increment): written into the SQL, as PostgreSQL
            return _sql_literal(constants[name])  # plans a prepared statement better knowing it
        if name not in names:
            names.append(name)
        return f"${names.index(name) + 1}"

    sql = re.sub(r"%\((\w+)\)s", number, str(compiled))
    return Compiled(sql, tuple(names))


def _sql_literal(value) -> str:
    """A statement constant as SQL (they are statuses, counts and defaults, never request data)."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(int(value))
    if isinstance(value, str):
        return "'" + str(value).replace("'", "''") + "'"
    raise TypeError(f"no SQL literal for a constant of type {type(value).__name__}")


# The same statements as the synchronous driver's, plus what saves round trips here: the writes
# are one statement (data-modifying CTEs). The policy state is read only on a cache miss
# (:func:`.shared.policy_at`): sent with every lock it cost O(L^2) per duel whenever the cached
# policy was still with the transaction before.
PG_CONFIG = compile_pg(sync_driver.CONFIG)
PG_POLICY_STATE = compile_pg(policy_log.STORED_STATE)
PG_PROMPT = compile_pg(sync_driver.PROMPT)
PG_REFERENCE = compile_pg(sync_driver.REFERENCE)
PG_READY_ANSWER_KEYS = compile_pg(store_lookup.READY_ANSWER_KEYS)
PG_READY_ANSWER_TEXTS = compile_pg(store_lookup.READY_ANSWER_TEXTS)
PG_READY_VERDICT = compile_pg(store_lookup.READY_VERDICT)
PG_HELD = compile_pg(holds.HELD)
PG_LOCK_FOR_PLAN = compile_pg(sync_driver.LOCK_FOR_PLAN)
# A separate statement after the lock: it reads a snapshot taken once the lock is held.
PG_IN_FLIGHT = compile_pg(sync_driver.IN_FLIGHT_DUELS)
PG_LOCK_FOR_VOTE = compile_pg(sync_driver.LOCK_FOR_VOTE)
PG_DUEL_ROW = compile_pg(sync_driver.DUEL_ROW)
PG_TAIL_SELECTED = compile_pg(policy_log.TAIL_SELECTED)
PG_TAIL_RECORDED = compile_pg(policy_log.TAIL_RECORDED)
PG_EXPIRE_STALE = compile_pg(sync_driver.EXPIRE_STALE)
PG_EXPIRE_DUEL = compile_pg(sync_driver.EXPIRE_DUEL)
PG_TOUCHED = compile_pg(sync_driver.TOUCHED)
PG_FINISH = tuple(compile_pg(q) for q in endings.ENDING)
PG_POOLED = compile_pg(skips.POOLED)
PG_HAND_OVER = compile_pg(skips.HAND_OVER)
# The answers (service.cycle.answers): the lock, a charge row (its id returned), a stored answer, the
# spares' rows, then the duel and the campaign in one statement (two when a provider fault pauses it).
PG_LOCK_FOR_ANSWERS = compile_pg(sync_driver.LOCK_FOR_ANSWERS)
PG_ANSWER_CHARGE = compile_pg(charges.ANSWER_CHARGE)
PG_FINALIZE_ANSWER = compile_pg(store_claims.FINALIZE_ANSWER)
PG_SETTLE_SPARES = {id(q): compile_pg(q) for q in spares.SETTLE_STATEMENTS}
PG_ANSWERED_DUEL = compile_pg(sync_driver.ANSWERED_DUEL)
PG_ANSWERED = compile_pg(sync_driver.ANSWERED)
PG_ANSWERED_BOTH = compile_pg(sync_driver.ANSWERED.add_cte(sync_driver.ANSWERED_DUEL.cte("u")))


def _after_judged(campaign_update, checkpoint: bool = False):
    """The duel's ``pending -> judged`` update and the campaign's, one statement: the
    campaign (and with ``checkpoint`` its policy checkpoint row) changes only when the duel
    did (RETURNING tells)."""
    judged = sync_driver.JUDGED_DUEL.returning(D.id).cte("u")
    # a human judge's fee per vote: one judge charge, written only when the duel was judged and fee > 0
    fee = charges.vote_fee_after(judged)
    query = campaign_update.where(exists(select(judged.c.id))).returning(C.id).add_cte(judged).add_cte(fee)
    if checkpoint:
        query = query.add_cte(policy_log.WRITE_CHECKPOINT.where(exists(select(judged.c.id))).cte("k"))
    return compile_pg(query)


PG_VOTED_TIE = _after_judged(sync_driver.VOTED_TIE)
PG_VOTED = _after_judged(sync_driver.VOTED)
PG_VOTED_STATE = _after_judged(sync_driver.VOTED_STATE, checkpoint=True)
_JSON_DUEL_COLUMNS = frozenset(c.name for c in Duel.__table__.c if isinstance(c.type, JSON))


@lru_cache(maxsize=64)
def _pg_plan_write(duel_columns: tuple[str, ...], with_state: bool = False) -> Compiled:
    """One statement: insert the duel, its charges (a JSON array, in order) and update the campaign."""
    defaults = {
        c.name: c.default.arg
        for c in D
        if c.name not in duel_columns and isinstance(c.default, ScalarElementColumnDefault)
    }  # what Core's INSERT fills in for columns left out
    duel = insert(Duel.__table__).values(
        {**defaults, **{k: bindparam(f"d_{k}", type_=D[k].type) for k in duel_columns}}
    )
    d = duel.returning(D.id).cte("d")
    paid = charges.charges_from_json(d)  # the charges arrive as one JSON array; "n" keeps their order
    campaign = (sync_driver.PLANNED_STATE if with_state else sync_driver.PLANNED).cte("c")
    ctes = (paid, campaign, policy_log.WRITE_STATE.cte("k")) if with_state else (paid, campaign)
    return compile_pg(select(d.c.id).add_cte(*ctes))


class _Row(SimpleNamespace):
    """A result row with attribute access (asyncpg's records have keys only)."""

    def _asdict(self) -> dict:
        return dict(self.__dict__)


_JSON_RESULT_COLUMNS = frozenset(
    c.name
    for t in (Campaign.__table__, Duel.__table__, PolicyCheckpoint.__table__)
    for c in t.c
    if isinstance(c.type, JSON)
)


def _row(record) -> _Row | None:
    return None if record is None else _row_of(record)


def _row_of(record) -> _Row:
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

    def covers(self, cfg, run: bool) -> bool:
        """The campaigns :func:`.shared.handles` accepts, for an annotator's or the admin's
        request (a background run and the other campaigns take the SQLAlchemy driver)."""
        return handles(cfg) and not run

    async def _begin(self) -> None:
        if not self.open:
            await self.conn.execute("BEGIN")
            self.open = True

    async def _fetchrow(self, query: Compiled, params: dict) -> _Row | None:
        return _row(await self.conn.fetchrow(query.sql, *query.args(params)))

    async def _fetchone(self, query: Compiled, params: dict) -> _Row:
        """The row of a statement that always returns one (an aggregate, a row read under its lock)."""
        row = await self._fetchrow(query, params)
        if row is None:
            raise RuntimeError(f"no row from {query.sql[:60]!r}")
        return row

    async def _fetch(self, query: Compiled, params: dict) -> list[_Row]:
        return [_row_of(r) for r in await self.conn.fetch(query.sql, *query.args(params))]

    async def _write(self, query: Compiled, params: dict) -> None:
        """A write that the transaction's last statement (or :meth:`commit`) commits."""
        self.wrote = True
        await self.conn.execute(query.sql, *query.args(params))

    async def commit(self) -> None:
        if self.open:
            await self.conn.execute("COMMIT")
            self.open = False

    async def finish(self, campaign_id: int, end, now, keep_duel: int | None = None) -> None:
        params = endings.finish_params(campaign_id, end, now, keep_duel)
        for query in PG_FINISH:
            await self._write(query, params)

    async def expire_stale(self, campaign_id: int, now) -> None:
        await self._write(PG_EXPIRE_STALE, {"cid": campaign_id, "now": now})

    async def expire_duel(self, duel_id: int, campaign_id: int, now) -> None:
        await self._write(PG_EXPIRE_DUEL, {"did": duel_id})
        await self._write(PG_TOUCHED, {"cid": campaign_id, "now": now})

    async def claim_pooled(self, campaign_id: int, label: str, now, back: bool = False) -> int | None:
        row = await self._fetchrow(PG_POOLED, {"cid": campaign_id, "label": label, "now": now, "back": back})
        if row is None:
            return None
        await self._write(PG_HAND_OVER, {"did": row.id, "label": label})
        return int(row.id)

    async def _write_and_commit(self, query: Compiled, params: dict) -> _Row | None:
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
        return row, None, inflight, cfg

    async def config(self, campaign_id: int):
        await self._begin()
        return await self._fetchrow(PG_CONFIG, {"cid": campaign_id})

    async def policy_state(self, campaign_id: int) -> dict:
        await self._begin()
        return (await self._fetchone(PG_POLICY_STATE, {"cid": campaign_id})).policy_state

    async def wait_returned(self, returned: threading.Event, timeout_s: float) -> None:
        """On the event loop: polled, so that a holder on this loop (its COMMIT still awaited) runs."""
        deadline = time.monotonic() + timeout_s
        while not returned.is_set() and time.monotonic() < deadline:
            await asyncio.sleep(0.0005)

    async def policy_tail(self, campaign_id: int, after: int, upto: int) -> list:
        await self._begin()
        p = {"cid": campaign_id, "after": after, "upto": upto}
        return policy_log.tail_events(await self._fetch(PG_TAIL_SELECTED, p), await self._fetch(PG_TAIL_RECORDED, p))

    async def prompt(self, campaign_id: int, idx: int) -> str:
        await self._begin()
        return (await self._fetchone(PG_PROMPT, {"cid": campaign_id, "idx": idx})).text

    async def reference(self, campaign_id: int, idx: int) -> str | None:
        row = await self._fetchrow(PG_REFERENCE, {"cid": campaign_id, "idx": idx})
        return None if row is None else row.reference

    async def ready_answers(self, keys, with_text: bool) -> dict:
        query = PG_READY_ANSWER_TEXTS if with_text else PG_READY_ANSWER_KEYS
        rows = await self._fetch(query, {"k1": keys[0], "k2": keys[-1]})
        return {r.key: (r.text if with_text else None) for r in rows}

    async def ready_verdict(self, key: str) -> bool:
        return await self._fetchrow(PG_READY_VERDICT, {"vk": key}) is not None

    async def held(self, campaign_id: int, now) -> int:
        return int((await self._fetchone(PG_HELD, {"cid": campaign_id, "now": now})).held)

    async def plan_writes(self, duel: dict, rows: list[dict], campaign: dict) -> int:
        columns = tuple(sorted(duel))
        params = {f"d_{k}": _json(v) if k in _JSON_DUEL_COLUMNS else v for k, v in duel.items()}
        params.update(
            campaign,
            charges=_json([dict({k: ch[k] for k in charges.CHARGE_FIELDS}, n=n) for n, ch in enumerate(rows)]),
        )
        with_state = "policy_state" in campaign
        if with_state:
            params["policy_state"] = _json(campaign["policy_state"])
        row = await self._write_and_commit(_pg_plan_write(columns, with_state), params)
        assert row is not None  # the insert returns the new duel's id
        return int(row.id)

    async def vote_reads(self, duel_id: int, hint: int | None, cached_seq: int | None):
        p = {"did": duel_id, "hint": hint, "seq": cached_seq}
        await self._begin()
        crow = await self._fetchrow(PG_LOCK_FOR_VOTE, p)
        if crow is None:
            return None, None, None
        return crow, None, await self._fetchrow(PG_DUEL_ROW, p)

    async def vote_writes(self, judged: dict, campaign: dict, *, recorded: dict | None, end=None, others=()) -> bool:
        """The vote in one statement, committed with it; with an ``end``, the campaign's end too.
        (No outcomes held for an earlier position: this driver never samples without replacement.)"""
        if others:  # pragma: no cover - covers() routes such campaigns to the SQLAlchemy driver
            raise RuntimeError("the asyncpg driver does not release held outcomes")
        params = {**judged, **campaign}
        if judged["judge_detail"] is not None:
            params["judge_detail"] = _json(judged["judge_detail"])
        query = PG_VOTED_TIE if recorded is None else PG_VOTED
        if recorded is not None:
            params.update(recorded)
        if recorded is not None and "policy_state" in recorded:  # a checkpoint (service.campaigns.policy_log)
            query = PG_VOTED_STATE
            params.update({k: _json(recorded[k]) for k in ("policy_state", "counts", "stats")})
        if end is None:
            return await self._write_and_commit(query, params) is not None
        self.wrote = True
        if await self._fetchrow(query, params) is None:
            return False
        await self.finish(campaign["cid"], end, campaign["now"], judged["did"])
        await self.commit()
        return True

    # ---- the answers (service.cycle.answers.decide_answers)
    async def answer_reads(self, campaign_id: int, duel_id: int):
        await self._begin()
        crow = await self._fetchrow(PG_LOCK_FOR_ANSWERS, {"cid": campaign_id})
        drow = await self._fetchrow(PG_DUEL_ROW, {"did": duel_id}) if crow is not None else None
        return crow, drow

    async def answer_charges(self, campaign_id: int, duel_id: int, rows: list[dict]) -> dict[int, int]:
        """:func:`service.money.charges.charge_answers`: the same statement, per row, in order."""
        ids = {}
        for row in rows:
            params = charges.answer_charge_params(duel_id, row)
            params["detail"] = _json(params["detail"])
            self.wrote = True
            ids[row["model_index"]] = int((await self._fetchone(PG_ANSWER_CHARGE, params)).id)
        return ids

    async def store_answer(self, claim, completion, *, text: str, amount_nusd: int, charge_id: int | None) -> None:
        params = store_claims.finalized_answer(
            claim, completion, text=text, amount_nusd=amount_nusd, charge_id=charge_id
        )
        await self._write(PG_FINALIZE_ANSWER, params)

    async def settle_spares(self, plan, results: dict, *, charge_ids: dict, paid: set[int], failed: bool) -> None:
        for query, params in spares.settle_writes(plan, results, charge_ids=charge_ids, paid=paid, failed=failed):
            await self._write(PG_SETTLE_SPARES[id(query)], params)

    async def answer_writes(self, duel: dict, campaign: dict, end=None) -> None:
        """The duel's answer columns and the campaign's spend and counters, one statement committed
        with it; with an ``end`` (a provider fault's pause), the duel, the end, then the campaign."""
        params = {k: _json(v) if k in _JSON_DUEL_COLUMNS else v for k, v in duel.items()}
        if end is None:
            await self._write_and_commit(PG_ANSWERED_BOTH, {**params, **campaign})
            return
        await self._write(PG_ANSWERED_DUEL, params)
        await self.finish(campaign["cid"], end, campaign["now"], duel["did"])
        await self._write_and_commit(PG_ANSWERED, campaign)

    # ---- the SQLAlchemy driver's only (service.cycle.driver.Tx): covers() routes those campaigns there
    async def held_outcomes(self, campaign_id: int) -> list:
        raise _not_covered("held_outcomes")

    async def free_position(self, campaign_id: int, pair: tuple[int, int], n_prompts: int) -> int:
        raise _not_covered("free_position")

    async def renew_selected(self, campaign_id: int, inflight: list, now) -> list:
        raise _not_covered("renew_selected")

    async def claim_selected(self, duel_id: int | None, now, lease) -> int:
        raise _not_covered("claim_selected")

    async def unrecorded_pairs(self, campaign_id: int) -> list[list[int]]:
        raise _not_covered("unrecorded_pairs")

    async def touch(self, campaign_id: int, now) -> None:
        raise _not_covered("touch")

    async def judge_charges(self, campaign_id: int, duel_id: int, *, j, amount_nusd: int, detail: dict, now) -> None:
        raise _not_covered("judge_charges")

    async def pair_outcomes(self, campaign_id: int, i: int, j: int) -> tuple[int, list]:
        raise _not_covered("pair_outcomes")

    async def hybrid_verdict(self, svc, duel_id: int, j) -> DuelOutcome:
        raise _not_covered("hybrid_verdict")


def _not_covered(method: str) -> RuntimeError:  # pragma: no cover - covers() never sends such a campaign here
    return RuntimeError(f"the asyncpg driver has no {method}: covers() routes such campaigns to the SQLAlchemy driver")


async def _on_pool(svc: HotService, make):
    """Run one transaction on a pooled connection, and its ``after_commit`` after COMMIT.

    A connection that died while idle in the pool (the server restarted, a proxy
    closed it) fails at its first round trip, before anything was written: then
    the transaction is tried once more on a new connection, so a database that came
    back costs no request a 503.
    """
    pool = svc.deps.db.hot_pool
    assert pool is not None  # this driver runs only for the campaigns handles() sends it, with a hot pool
    for attempt in (1, 2):
        async with pool.connection() as (conn, reused):
            tx = PgTx(conn)
            try:
                out = await make(tx)
            except (DomainError, HeldDuel):  # a refusal: what the decision wrote before it stays
                await (tx.commit() if tx.wrote else tx.rollback())
                raise
            except Exception as exc:
                if attempt == 1 and reused and not tx.wrote and is_connection_error(exc):
                    continue  # the pool closes this connection; the next one is new
                if isinstance(exc, (OSError, asyncio.TimeoutError)):  # a lost socket, asyncpg's command timeout
                    raise HotPathUnavailable(f"database connection lost ({type(exc).__name__})") from exc
                raise
            if tx.open:  # pragma: no cover - every path above ends with its write and COMMIT
                raise RuntimeError("fast-path transaction left open")
            if tx.after_commit is not None:  # before the connection goes back: the next transaction
                tx.after_commit()  # of this campaign finds the policy in the cache
        return out
    raise AssertionError("unreachable")  # pragma: no cover


async def plan_duel_async(svc: HotService, campaign_id: int, principal: Principal) -> DuelPlan:
    """The plan transaction on the event loop (PostgreSQL; a campaign :func:`.shared.handles` accepts)."""
    t0 = time.perf_counter()
    plan = await _on_pool(svc, lambda tx: decide_plan(svc, tx, campaign_id, principal))
    plan.select_ms = (time.perf_counter() - t0) * 1000.0
    return plan


async def store_answers_async(svc: HotService, plan: DuelPlan, results: dict) -> DuelOutcome:
    """The answers transaction (:func:`.answers.decide_answers`) on the event loop (PostgreSQL; a campaign
    :func:`.shared.handles` accepts, a duel an annotator or the admin asked for), both results settled
    before it in a worker thread (:func:`.answers.settle`: cleaning and masking a long answer takes a while)."""
    settled = await in_thread(settle, svc, plan, results)

    async def answers(tx: PgTx) -> DuelOutcome:
        outcome = await decide_answers(svc, tx, plan, results=results, settled=settled)
        await tx.rollback()  # a campaign or duel deleted meanwhile: nothing was written (else committed)
        return outcome

    return await _on_pool(svc, answers)


async def record_vote_async(svc: HotService, duel_id: int, choice: str, principal: Principal) -> DuelOutcome:
    """The vote transaction on the event loop (PostgreSQL; a campaign :func:`.shared.handles` accepts)."""
    j = Judgement(choice, principal.label, principal)
    return await _on_pool(svc, lambda tx: decide_verdict(svc, tx, duel_id, j))
