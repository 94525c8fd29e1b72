"""The two hot transactions of a vote cycle: the logic once, two drivers.

An annotator's cycle is "next duel" then "vote". The general transactions
(:meth:`CampaignService.plan_duel_tx` and :meth:`CampaignService.record_verdict_tx`)
use the ORM and handle every case: ended campaigns, stale duels to expire,
``max_duels``, budgets, background runs, judge charges, certification. Most of a
campaign's life is the plain case, and there the ORM's bookkeeping costs more than
the decision. This module does the plain case, and whenever it does not apply it
raises :class:`Fallback` before writing anything; the caller then runs the
general transaction.

The decisions (:func:`_plan` and :func:`_vote`) are written once, as coroutines
that ask a *transaction driver* for each database round trip:

* :class:`SyncTx`: SQLAlchemy Core statements on a :meth:`Database.write` session
  (SQLite, and PostgreSQL in worker threads). Its methods never suspend, so
  :func:`run_sync` drives the coroutine to its end in one step, in the calling
  thread.
* :class:`PgTx`: an asyncpg connection from :class:`service.db.HotPool`, on the
  event loop: while PostgreSQL works, or the transaction waits for the row lock,
  the loop serves other requests. The writes of a transaction are one statement
  (data-modifying CTEs). asyncpg took about 0.2 ms of client CPU per transaction
  here against psycopg's 0.5 ms, which the 300 votes/s target needed
  (docs/reliability.md).

Both take the same lock (the campaign row; ``BEGIN IMMEDIATE`` on SQLite), make
the same decisions and write the same rows, so a campaign's stored state equals
its replayed log whichever path each step took. ``tests/test_fastpath.py`` runs one
scripted session on each path (and on the general path, with :data:`ENABLED`
off) and requires identical stored campaigns, duels and charges.
"""

from __future__ import annotations

import asyncio
import json
import re
import time
from dataclasses import dataclass
from functools import lru_cache
from types import SimpleNamespace
from typing import TYPE_CHECKING, Any, Coroutine

from sqlalchemy import JSON, bindparam, insert, select, update

from .models import (CALLING, FAILED, IN_FLIGHT, JUDGED, PENDING, RUNNING, Campaign, Charge, Duel, Prompt, to_nusd,
                     utcnow)

if TYPE_CHECKING:  # pragma: no cover
    from .auth import Principal
    from .campaigns import CampaignService, DuelOutcome, DuelPlan

ENABLED = True  # tests switch it off to run the same scenarios on the general path

C = Campaign.__table__.c
D = Duel.__table__.c


class Fallback(Exception):
    """The plain case does not apply: nothing was written; use the general transaction."""


@dataclass(frozen=True)
class CampaignConfig:
    """What never changes once a campaign exists (cached per process)."""

    models: list
    judge: dict
    tie_policy: str
    seed: int
    n_prompts: int
    max_duels: int | None
    budget_nusd: int | None


_CONFIG_COLUMNS = ("models", "judge", "tie_policy", "seed", "n_prompts", "max_duels", "budget_nusd")


class DuelRow(SimpleNamespace):
    """A duel's columns as plain attributes (unset ones None): the hot path builds
    its views from this instead of an ORM instance."""

    _EMPTY = dict.fromkeys(Duel.__table__.c.keys())
    model_a = Duel.model_a
    model_b = Duel.model_b

    def __init__(self, **columns):
        super().__init__(**{**self._EMPTY, **columns})


def _remember_config(svc: CampaignService, campaign_id: int, row) -> CampaignConfig:
    cfg = CampaignConfig(models=row.models, judge=row.judge, tie_policy=row.tie_policy, seed=int(row.seed),
                         n_prompts=int(row.n_prompts), max_duels=row.max_duels, budget_nusd=row.budget_nusd)
    cache: dict = svc.config_cache
    if len(cache) >= 10_000:
        cache.clear()
    cache[campaign_id] = cfg
    return cfg


async def _config(svc: CampaignService, tx, campaign_id: int) -> CampaignConfig:
    cfg = svc.config_cache.get(campaign_id)
    return cfg if cfg is not None else _remember_config(svc, campaign_id, await tx.config(campaign_id))


async def _policy(svc: CampaignService, tx, campaign_id: int, event_seq: int, fetched_state: dict | None):
    """The campaign's policy at ``event_seq``: the cached object, else rebuilt from
    its stored state (``fetched_state`` when the first round trip brought it)."""
    from .campaigns import restore_policy

    hit = svc._policies.take_exact(campaign_id, event_seq)
    if hit is not None:
        return hit
    state = fetched_state if fetched_state is not None else await tx.policy_state(campaign_id)
    return restore_policy(state)


# ---------------------------------------------------------------- the decisions
async def _plan(svc: CampaignService, tx, campaign_id: int, principal: Principal) -> DuelPlan:
    """:meth:`CampaignService.plan_duel_tx` for a running campaign with nothing to expire or end."""
    from .campaigns import DuelOutcome, DuelPlan, draw_prompt_and_side

    if not principal.can_access(campaign_id):
        raise Fallback
    known = svc.config_cache.get(campaign_id)
    row, state, inflight, cfg_row = await tx.plan_reads(campaign_id, svc._policies.seq_of(campaign_id),
                                                        known is None)
    if row is None or row.status != RUNNING:
        raise Fallback
    cfg = known if known is not None else _remember_config(svc, campaign_id, cfg_row)
    if not principal.admin and cfg.judge.get("kind") != "human":
        raise Fallback
    now = utcnow()
    if any(r.expires_at <= now for r in inflight):
        raise Fallback  # stale duels to expire
    if cfg.max_duels is not None and row.duels_judged + len(inflight) >= cfg.max_duels:
        raise Fallback
    policy = await _policy(svc, tx, campaign_id, row.event_seq, state)
    pending = [[int(r.model_i), int(r.model_j)] for r in inflight]
    i, j = (int(x) for x in policy.next_pair(pending=pending))  # pure: the stored state is unchanged
    if i > j:
        i, j = j, i
    expected = to_nusd(float(cfg.models[i]["cost"]) + float(cfg.models[j]["cost"])) + svc.expected_judge_nusd(
        row.judge_spend_nusd, row.duels_judged + row.duels_failed)
    if cfg.budget_nusd is not None:
        reserved = sum(int(r.expected_cost_nusd) for r in inflight)
        if row.spend_nusd + reserved + expected > cfg.budget_nusd:
            raise Fallback
    number = row.duels_created + 1
    prompt_index, a_is_i = draw_prompt_and_side(cfg.seed, number, cfg.n_prompts)
    seq = row.event_seq + 1
    prompt = svc.cached_prompt(campaign_id, prompt_index)
    if prompt is None:
        prompt = svc.remember_prompt(campaign_id, prompt_index, await tx.prompt(campaign_id, prompt_index))
    duel = dict(
        campaign_id=campaign_id, number=number, model_i=i, model_j=j, a_is_i=a_is_i,
        prompt_index=prompt_index, prompt=prompt, status=CALLING, counted=False, cost_nusd=0,
        expected_cost_nusd=expected, select_seq=seq, pending_at_select=pending,
        requested_by=principal.label, created_at=now, expires_at=now + svc._call_expiry,
    )  # columns left out are NULL, as in the ORM's INSERT
    plan = DuelPlan(campaign_id=campaign_id, duel_id=0, number=number, i=i, j=j, a_is_i=a_is_i,
                    prompt=prompt, models=[dict(m) for m in cfg.models], judge=dict(cfg.judge),
                    tie_policy=cfg.tie_policy, seed=cfg.seed)
    charges, columns = svc._answer_now(plan, now)
    duel.update(columns)
    failed = int(duel["status"] == FAILED)
    campaign = {"cid": campaign_id, "seq": seq, "created": number, "failed": failed, "spent": duel["cost_nusd"],
                "now": now}
    duel_id = await tx.plan_writes(duel, charges, campaign)
    tx.after_commit = lambda: svc._policies.put(campaign_id, seq, policy)
    plan.duel_id = duel_id
    if plan.results is not None:
        d = DuelRow(id=duel_id, **duel)
        plan.outcome = DuelOutcome(duel_id, duel["status"], failed=failed == 1, error=duel.get("error"),
                                   view=svc.duel_view(d, SimpleNamespace(models=cfg.models, status=RUNNING)))
    return plan


async def _vote(svc: CampaignService, tx, duel_id: int, choice: str, principal: Principal) -> DuelOutcome:
    """:meth:`CampaignService.record_verdict_tx` for a human vote that neither ends the campaign nor fails."""
    from .campaigns import DuelOutcome, policy_snapshot

    hint = principal.campaign_id  # an annotator's campaign (the admin's is learnt from the duel)
    crow, state, drow = await tx.vote_reads(duel_id, hint, svc._policies.seq_of(hint) if hint else None)
    if crow is None or crow.status != RUNNING or not principal.can_access(crow.id):
        raise Fallback
    now = utcnow()
    if drow is None or drow.status != PENDING or drow.expires_at <= now:
        raise Fallback
    cfg = await _config(svc, tx, crow.id)
    if cfg.max_duels is not None and crow.duels_judged + 1 >= cfg.max_duels:
        raise Fallback
    if cfg.budget_nusd is not None and crow.spend_nusd >= cfg.budget_nusd:
        raise Fallback
    d = DuelRow(**drow._asdict())
    c = SimpleNamespace(id=crow.id, models=cfg.models, status=RUNNING, tie_policy=cfg.tie_policy, seed=cfg.seed)
    score = svc._score(c, d, choice)
    d.status, d.choice, d.judged_by, d.judged_at = JUDGED, choice, principal.label, now
    judged: dict[str, Any] = {"did": duel_id, "choice": choice, "score": None, "counted": False,
                              "judged_by": d.judged_by, "now": now, "record_seq": None}
    recorded = None
    if score is not None:
        seq = crow.event_seq + 1
        policy = await _policy(svc, tx, crow.id, crow.event_seq, state)
        policy.record(d.model_i, d.model_j, score)
        if policy.should_stop():
            raise Fallback  # certification: the general path ends the campaign
        d.score, d.counted, d.record_seq = score, True, seq
        judged.update(score=score, counted=True, record_seq=seq)
        policy_state, counts, stats, leader = policy_snapshot(policy)
        recorded = {"seq": seq, "policy_state": policy_state, "counts": counts, "stats": stats, "leader": leader}
    if not await tx.vote_writes(judged, {"cid": crow.id, "now": now}, recorded):
        raise Fallback  # the duel was not pending after all: nothing was written
    if recorded is not None:
        tx.after_commit = lambda: svc._policies.put(crow.id, recorded["seq"], policy)
    return DuelOutcome(duel_id, JUDGED, view=svc.duel_view(d, c))


# ---------------------------------------------------------------- driver 1: SQLAlchemy Core, synchronous
CONFIG = select(*(C[k] for k in _CONFIG_COLUMNS)).where(C.id == bindparam("cid"))
POLICY_STATE = select(C.policy_state).where(C.id == bindparam("cid"))
PROMPT = select(Prompt.text).where(Prompt.campaign_id == bindparam("cid"), Prompt.idx == bindparam("idx"))
_PLAN_COLUMNS = ("status", "event_seq", "duels_created", "duels_judged", "duels_failed", "spend_nusd",
                 "judge_spend_nusd")
LOCK_FOR_PLAN = select(*(C[k] for k in _PLAN_COLUMNS)).where(C.id == bindparam("cid")).with_for_update()
_IN_FLIGHT_COLUMNS = ("model_i", "model_j", "expected_cost_nusd", "expires_at")
IN_FLIGHT_DUELS = select(*(D[k] for k in _IN_FLIGHT_COLUMNS)).where(
    D.campaign_id == bindparam("cid"), D.status.in_(IN_FLIGHT))
INSERT_DUEL = insert(Duel.__table__).returning(D.id)
INSERT_CHARGES = insert(Charge.__table__)
PLANNED = (
    update(Campaign.__table__)
    .where(C.id == bindparam("cid"))
    .values(event_seq=bindparam("seq"), duels_created=bindparam("created"),
            duels_failed=C.duels_failed + bindparam("failed"), spend_nusd=C.spend_nusd + bindparam("spent"),
            version=C.version + 1, updated_at=bindparam("now"))
)
_VOTE_COLUMNS = ("id", "status", "event_seq", "duels_judged", "duels_counted", "spend_nusd")
LOCK_FOR_VOTE = select(*(C[k] for k in _VOTE_COLUMNS)).where(
    C.id == select(D.campaign_id).where(D.id == bindparam("did")).scalar_subquery()).with_for_update()
DUEL_ROW = select(Duel.__table__).where(D.id == bindparam("did"))
JUDGED_DUEL = (
    update(Duel.__table__)
    .where(D.id == bindparam("did"), D.status == PENDING)
    .values(status=JUDGED, choice=bindparam("choice"), score=bindparam("score"), counted=bindparam("counted"),
            judged_by=bindparam("judged_by"), judged_at=bindparam("now"), record_seq=bindparam("record_seq"))
)
VOTED_TIE = (
    update(Campaign.__table__)
    .where(C.id == bindparam("cid"))
    .values(duels_judged=C.duels_judged + 1, version=C.version + 1, updated_at=bindparam("now"))
)
VOTED = (
    update(Campaign.__table__)
    .where(C.id == bindparam("cid"))
    .values(duels_judged=C.duels_judged + 1, duels_counted=C.duels_counted + 1, event_seq=bindparam("seq"),
            policy_state=bindparam("policy_state", type_=C.policy_state.type),
            counts=bindparam("counts", type_=C.counts.type), stats=bindparam("stats", type_=C.stats.type),
            leader=bindparam("leader"), version=C.version + 1, updated_at=bindparam("now"))
)


class SyncTx:
    """The round trips of :func:`_plan` and :func:`_vote` as Core statements on one session.

    Every method completes without suspending (see :func:`run_sync`). The policy
    state is never read speculatively (``None``): :func:`_policy` asks for it on a
    cache miss.
    """

    def __init__(self, session):
        self.session = session
        self.conn = session.connection()
        self.after_commit = None

    async def plan_reads(self, campaign_id: int, cached_seq: int | None, want_config: bool):
        row = self.conn.execute(LOCK_FOR_PLAN, {"cid": campaign_id}).first()
        if row is None:
            return None, None, [], None
        cfg = self.conn.execute(CONFIG, {"cid": campaign_id}).first() if want_config else None
        return row, None, self.conn.execute(IN_FLIGHT_DUELS, {"cid": campaign_id}).all(), cfg

    async def config(self, campaign_id: int):
        return self.conn.execute(CONFIG, {"cid": campaign_id}).first()

    async def policy_state(self, campaign_id: int) -> dict:
        return self.conn.execute(POLICY_STATE, {"cid": campaign_id}).scalar_one()

    async def prompt(self, campaign_id: int, idx: int) -> str:
        return self.conn.execute(PROMPT, {"cid": campaign_id, "idx": idx}).scalar_one()

    async def plan_writes(self, duel: dict, charges: list[dict], campaign: dict) -> int:
        duel_id = int(self.conn.execute(INSERT_DUEL, duel).scalar_one())
        if charges:
            self.conn.execute(INSERT_CHARGES, [dict(ch, duel_id=duel_id) for ch in charges])
        self.conn.execute(PLANNED, campaign)
        return duel_id

    async def vote_reads(self, duel_id: int, hint: int | None, cached_seq: int | None):
        crow = self.conn.execute(LOCK_FOR_VOTE, {"did": duel_id}).first()
        drow = self.conn.execute(DUEL_ROW, {"did": duel_id}).first() if crow is not None else None
        return crow, None, drow

    async def vote_writes(self, judged: dict, campaign: dict, recorded: dict | None) -> bool:
        if self.conn.execute(JUDGED_DUEL, judged).rowcount != 1:
            return False
        self.conn.execute(VOTED_TIE if recorded is None else VOTED, {**campaign, **(recorded or {})})
        return True


def run_sync(coro: Coroutine):
    """Run a coroutine whose awaits never suspend (a :class:`SyncTx` transaction) to its end."""
    try:
        coro.send(None)
    except StopIteration as done:
        return done.value
    coro.close()
    raise RuntimeError("a synchronous fast-path transaction tried to suspend")


def _in_session(svc: CampaignService, make):
    with svc.db.write() as s:
        tx = SyncTx(s)
        out = run_sync(make(tx))
        if tx.after_commit is not None:
            s.info["after_commit"] = tx.after_commit
    return out


def plan_duel(svc: CampaignService, campaign_id: int, principal: Principal) -> DuelPlan:
    """The plain-case plan transaction in the calling thread (raises :class:`Fallback`)."""
    t0 = time.perf_counter()
    plan = _in_session(svc, lambda tx: _plan(svc, tx, campaign_id, principal))
    plan.select_ms = (time.perf_counter() - t0) * 1000.0
    return plan


def record_vote(svc: CampaignService, duel_id: int, choice: str, principal: Principal) -> DuelOutcome:
    """The plain-case vote transaction in the calling thread (raises :class:`Fallback`)."""
    return _in_session(svc, lambda tx: _vote(svc, tx, duel_id, choice, principal))


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
    from sqlalchemy.dialects import postgresql

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
                f"WHERE campaign_id = %(cid)s::bigint AND status IN ('{CALLING}', '{PENDING}')")
PG_LOCK_FOR_VOTE = (
    f"SELECT {_columns(Campaign.__table__, _VOTE_COLUMNS)}, "
    "CASE WHEN id = %(hint)s::bigint AND event_seq = %(seq)s::int THEN NULL ELSE policy_state END AS policy_state "
    "FROM campaigns WHERE id = (SELECT campaign_id FROM duels WHERE id = %(did)s::bigint) FOR UPDATE"
)
PG_DUEL_ROW = f"SELECT {', '.join(c.name for c in Duel.__table__.c)} FROM duels WHERE id = %(did)s::bigint"
_PG_JUDGED = (
    f"UPDATE duels SET status = '{JUDGED}', choice = %(choice)s::text, score = %(score)s::float8, "
    "counted = %(counted)s::bool, judged_by = %(judged_by)s::text, judged_at = %(now)s::timestamptz, "
    f"record_seq = %(record_seq)s::int WHERE id = %(did)s::bigint AND status = '{PENDING}' RETURNING id"
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
    from .db import HotPathUnavailable, is_connection_error

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
    plan = await _on_pool(svc, lambda tx: _plan(svc, tx, campaign_id, principal))
    plan.select_ms = (time.perf_counter() - t0) * 1000.0
    return plan


async def record_vote_async(svc: CampaignService, duel_id: int, choice: str, principal: Principal) -> DuelOutcome:
    """The plain-case vote transaction on the event loop (PostgreSQL; raises :class:`Fallback`)."""
    return await _on_pool(svc, lambda tx: _vote(svc, tx, duel_id, choice, principal))
