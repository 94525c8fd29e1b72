"""Driver 1: SQLAlchemy Core statements on a :meth:`Database.write` session.

SQLite, and PostgreSQL in worker threads. Its methods never suspend, so
:func:`run_sync` drives a decision coroutine to its end in one step, in the
calling thread. The statements here are also the ones the asyncpg driver compiles
(:mod:`service.cycle.pg_driver`).
"""

from __future__ import annotations

import threading
import time
from typing import TYPE_CHECKING, Coroutine

from sqlalchemy import bindparam, func, insert, literal, select, update

from algorithms.vocabulary import IN_FLIGHT, DuelStatus

from ..campaigns import hybrid_tx, judge_charges, policy_log, sampling, skips, spares, store_claims, store_lookup
from ..campaigns.endings import end_campaign
from ..campaigns.judge_charges import Judgement
from ..campaigns.types import Conflict, DomainError, DuelOutcome, HeldDuel
from ..models import Campaign, Duel, Prompt
from ..money import charges, holds
from . import hybrid_verdict
from .answers import decide_answers, settle
from .plan import decide_plan
from .shared import _CONFIG_COLUMNS
from .verdict import decide_verdict

if TYPE_CHECKING:  # pragma: no cover
    from ..auth import Principal
    from ..campaigns.types import DuelPlan
    from .service_port import HotService

C = Campaign.__table__.c
D = Duel.__table__.c

# ---------------------------------------------------------------- driver 1: SQLAlchemy Core, synchronous
CONFIG = select(*(C[k] for k in _CONFIG_COLUMNS)).where(C.id == bindparam("cid"))
PROMPT = select(Prompt.text).where(Prompt.campaign_id == bindparam("cid"), Prompt.idx == bindparam("idx"))
REFERENCE = select(Prompt.reference).where(Prompt.campaign_id == bindparam("cid"), Prompt.idx == bindparam("idx"))
_PLAN_COLUMNS = (
    "status",
    "event_seq",
    "state_seq",  # the stored policy state's event_seq (service.campaigns.policy_log)
    "duels_created",
    "duels_judged",
    "duels_failed",
    "spend_nusd",
    "judge_spend_nusd",
    "max_duels",  # limits that PATCH can raise: read under the lock, never cached
    "budget_nusd",
    "run_active",  # a background run's lease and slots (service.cycle.plan.run_refusal)
    "run_owner",
    "run_remaining",
    "run_concurrency",
)
LOCK_FOR_PLAN = select(*(C[k] for k in _PLAN_COLUMNS)).where(C.id == bindparam("cid")).with_for_update()
_IN_FLIGHT_COLUMNS = ("id", "model_i", "model_j", "expected_cost_nusd", "expires_at", "requested_by")
# The statuses as plain bound values (not an "expanding" IN), so the statement compiles once for asyncpg too.
IN_FLIGHT_DUELS = select(*(D[k] for k in _IN_FLIGHT_COLUMNS)).where(
    D.campaign_id == bindparam("cid"), D.status.in_([literal(str(s)) for s in IN_FLIGHT])
)
# The in-flight duels past their expiry (the same set as service.cycle.plan.split_stale under the lock).
EXPIRE_STALE = (
    update(Duel.__table__)
    .where(
        D.campaign_id == bindparam("cid"),
        D.status.in_([literal(str(s)) for s in IN_FLIGHT]),
        D.expires_at <= bindparam("now"),
    )
    .values(status=DuelStatus.EXPIRED)
)
EXPIRE_DUEL = update(Duel.__table__).where(D.id == bindparam("did")).values(status=DuelStatus.EXPIRED)
TOUCHED = (
    update(Campaign.__table__)
    .where(C.id == bindparam("cid"))
    .values(version=C.version + 1, updated_at=bindparam("now"))
)
INSERT_DUEL = insert(Duel.__table__).returning(D.id)
PLANNED = (
    update(Campaign.__table__)
    .where(C.id == bindparam("cid"))
    .values(
        event_seq=bindparam("seq"),
        duels_created=bindparam("created"),
        duels_failed=C.duels_failed + bindparam("failed"),
        **charges.spend(bindparam("spent")),
        version=C.version + 1,
        updated_at=bindparam("now"),
    )
)
# The same at a new checkpoint (a hybrid campaign's, with every policy call; the state itself is
# policy_log.WRITE_STATE's, in the same transaction).
PLANNED_STATE = PLANNED.values(state_seq=bindparam("seq"))
# A background run's duel takes one of its max_duels (NULL: no cap).
RUN_STEP = update(Campaign.__table__).where(C.id == bindparam("cid")).values(run_remaining=C.run_remaining - 1)

# ---------------------------------------------------------------- the answers (service.cycle.answers)
LOCK_FOR_ANSWERS = select(C.id, C.status, C.models, C.judge).where(C.id == bindparam("cid")).with_for_update()
ANSWERED_DUEL = (
    update(Duel.__table__)
    .where(D.id == bindparam("did"))
    .values(
        status=bindparam("status"),
        error=bindparam("error"),
        cost_nusd=bindparam("cost_nusd"),
        completion_a=bindparam("completion_a", type_=D.completion_a.type),
        completion_b=bindparam("completion_b", type_=D.completion_b.type),
        answer_a=bindparam("answer_a"),
        answer_b=bindparam("answer_b"),
        answer_style=bindparam("answer_style", type_=D.answer_style.type),
        answered_at=bindparam("answered_at", type_=D.answered_at.type),
        expires_at=bindparam("expires_at", type_=D.expires_at.type),
    )
)
ANSWERED = (
    update(Campaign.__table__)
    .where(C.id == bindparam("cid"))
    .values(
        duels_failed=C.duels_failed + bindparam("failed"),
        **charges.spend(bindparam("spent")),
        version=C.version + 1,
        updated_at=bindparam("now"),
    )
)

# Outcomes held for an earlier position of their pair, entering the policy now.
RELEASED = update(Duel.__table__).where(D.id == bindparam("rid")).values(record_seq=bindparam("rseq"), counted=True)
# How many outcomes of a pair the policy has (positions 0 .. n-1, sampling without replacement).
PAIR_RECORDED = select(func.count(D.id)).where(
    D.campaign_id == bindparam("cid"),
    D.model_i == bindparam("i"),
    D.model_j == bindparam("j"),
    D.record_seq.is_not(None),
)

# ---------------------------------------------------------------- without replacement, hybrid pool
_JUDGED_UNRECORDED = (D.status == DuelStatus.JUDGED, D.record_seq.is_(None))
# Judged duels whose outcome waits for an earlier position of their pair.
HELD_OUTCOMES = (
    select(D.id, D.model_i, D.model_j, D.position, D.score)
    .where(D.campaign_id == bindparam("cid"), *_JUDGED_UNRECORDED, D.position.is_not(None), D.score.is_not(None))
    .order_by(D.id)
)
HELD_OF_PAIR = HELD_OUTCOMES.where(D.model_i == bindparam("i"), D.model_j == bindparam("j"))
# The positions of a pair that are judged or in flight (stale duels are already expired).
OCCUPIED_POSITIONS = select(D.position).where(
    D.campaign_id == bindparam("cid"),
    D.model_i == bindparam("i"),
    D.model_j == bindparam("j"),
    D.position.is_not(None),
    D.status.in_([literal(str(s)) for s in (DuelStatus.JUDGED, *IN_FLIGHT)]),
)
# A hybrid campaign's judged duels not recorded yet (waiting behind an earlier duel of their pair).
UNRECORDED_PAIRS = select(D.model_i, D.model_j).where(D.campaign_id == bindparam("cid"), *_JUDGED_UNRECORDED)
_VOTE_COLUMNS = (
    "id",
    "status",
    "event_seq",
    "state_seq",
    "duels_judged",
    "duels_counted",
    "spend_nusd",
    "max_duels",
    "budget_nusd",
)
LOCK_FOR_VOTE = (
    select(*(C[k] for k in _VOTE_COLUMNS))
    .where(C.id == select(D.campaign_id).where(D.id == bindparam("did")).scalar_subquery())
    .with_for_update()
)
DUEL_ROW = select(Duel.__table__).where(D.id == bindparam("did"))
JUDGED_DUEL = (
    update(Duel.__table__)
    .where(D.id == bindparam("did"), D.status == DuelStatus.PENDING)
    .values(
        status=bindparam("status"),
        choice=bindparam("choice"),
        score=bindparam("score"),
        counted=bindparam("counted"),
        judged_by=bindparam("judged_by"),
        judge_detail=bindparam("judge_detail", type_=D.judge_detail.type),
        error=bindparam("error"),
        judged_at=bindparam("now"),
        record_seq=bindparam("record_seq"),
        cost_nusd=D.cost_nusd + bindparam("fee"),
    )
)
# A verdict that enters no policy record (a tie dropped, a judge error, an outcome held for an
# earlier position), and one that does (``n_counted`` outcomes recorded with it).
VOTED_TIE = (
    update(Campaign.__table__)
    .where(C.id == bindparam("cid"))
    .values(
        duels_judged=C.duels_judged + bindparam("n_judged"),
        duels_failed=C.duels_failed + bindparam("n_failed"),
        **charges.judge_spend(bindparam("fee")),
        version=C.version + 1,
        updated_at=bindparam("now"),
    )
)
VOTED = VOTED_TIE.values(
    duels_counted=C.duels_counted + bindparam("n_counted"),
    event_seq=bindparam("seq"),
    leader=bindparam("leader"),
)
# The same at a checkpoint of the policy (service.campaigns.policy_log: every few records; its
# state, counts and statistics are policy_log.WRITE_CHECKPOINT's, in the same transaction).
VOTED_STATE = VOTED.values(state_seq=bindparam("seq"))


class SyncTx:
    """The round trips of :func:`.plan.decide_plan` and :func:`.verdict.decide_verdict` as Core statements on one session.

    Every method completes without suspending (see :func:`run_sync`). The policy
    state is never read speculatively (``None``): :func:`.shared.policy_at` asks for it on a
    cache miss.
    """

    def __init__(self, session):
        self.session = session
        self.conn = session.connection()
        self.after_commit = None

    def covers(self, cfg, run: bool) -> bool:
        """Every campaign and every request (its extra round trips below)."""
        return True

    async def plan_reads(self, campaign_id: int, cached_seq: int | None, want_config: bool):
        row = self.conn.execute(LOCK_FOR_PLAN, {"cid": campaign_id}).first()
        if row is None:
            return None, None, [], None
        cfg = self.conn.execute(CONFIG, {"cid": campaign_id}).first() if want_config else None
        return row, None, self.conn.execute(IN_FLIGHT_DUELS, {"cid": campaign_id}).all(), cfg

    async def config(self, campaign_id: int):
        return self.conn.execute(CONFIG, {"cid": campaign_id}).first()

    async def policy_state(self, campaign_id: int) -> dict:
        return policy_log.stored_state(self.conn, campaign_id)

    async def policy_tail(self, campaign_id: int, after: int, upto: int) -> list:
        return policy_log.read_tail(self.conn, campaign_id, after, upto)

    async def wait_returned(self, returned: threading.Event, timeout_s: float) -> None:
        returned.wait(timeout_s)  # a worker thread: blocking does not suspend the coroutine

    async def prompt(self, campaign_id: int, idx: int) -> str:
        return self.conn.execute(PROMPT, {"cid": campaign_id, "idx": idx}).scalar_one()

    async def reference(self, campaign_id: int, idx: int) -> str | None:
        return self.conn.execute(REFERENCE, {"cid": campaign_id, "idx": idx}).scalar_one_or_none()

    async def ready_answers(self, keys, with_text: bool) -> dict:
        return await store_lookup.SessionLookup(self.conn).ready_answers(keys, with_text)

    async def ready_verdict(self, key: str) -> bool:
        return await store_lookup.SessionLookup(self.conn).ready_verdict(key)

    async def held(self, campaign_id: int, now) -> int:
        return holds.held_nusd(self.conn, campaign_id, now)

    async def expire_stale(self, campaign_id: int, now) -> None:
        self.conn.execute(EXPIRE_STALE, {"cid": campaign_id, "now": now})

    async def expire_duel(self, duel_id: int, campaign_id: int, now) -> None:
        self.conn.execute(EXPIRE_DUEL, {"did": duel_id})
        self.conn.execute(TOUCHED, {"cid": campaign_id, "now": now})

    async def claim_pooled(self, campaign_id: int, label: str, now, back: bool = False) -> int | None:
        params = {"cid": campaign_id, "label": label, "now": now, "back": back}
        duel_id = self.conn.execute(skips.POOLED, params).scalar()
        if duel_id is None:
            return None
        self.conn.execute(skips.HAND_OVER, {"did": duel_id, "label": label})
        return int(duel_id)

    async def finish(self, campaign_id: int, end, now, keep_duel: int | None = None) -> None:
        end_campaign(self.conn, campaign_id, end, now, keep_duel=keep_duel)

    async def plan_writes(self, duel: dict, rows: list[dict], campaign: dict) -> int:
        duel_id = int(self.conn.execute(INSERT_DUEL, duel).scalar_one())
        if rows:
            self.conn.execute(charges.INSERT_CHARGES, [dict(ch, duel_id=duel_id) for ch in rows])
        if "policy_state" in campaign:
            self.conn.execute(PLANNED_STATE, campaign)
            self.conn.execute(policy_log.WRITE_STATE, {k: campaign[k] for k in ("cid", "policy_state")})
        else:
            self.conn.execute(PLANNED, campaign)
        if campaign.get("run"):  # only its own parameter: a column-named key would join the SET list
            self.conn.execute(RUN_STEP, {"cid": campaign["cid"]})
        return duel_id

    # ---- sampling without replacement
    async def held_outcomes(self, campaign_id: int) -> list:
        return self.conn.execute(HELD_OUTCOMES, {"cid": campaign_id}).all()

    async def free_position(self, campaign_id: int, pair: tuple[int, int], n_prompts: int) -> int:
        """The lowest position of ``pair`` neither judged nor in flight."""
        i, j = pair
        occupied = self.conn.execute(OCCUPIED_POSITIONS, {"cid": campaign_id, "i": i, "j": j}).scalars()
        q = sampling.free_position(occupied, n_prompts)
        if q is None:  # the policy never picks a pair whose positions are all taken (NoPairAvailable)
            raise Conflict(f"pair ({i}, {j}) has no free position", retry_later=True)
        return q

    # ---- a hybrid judge's pool of duels selected for a human (service.campaigns.hybrid_tx)
    async def renew_selected(self, campaign_id: int, inflight: list, now) -> list:
        return hybrid_tx.renew_lapsed(self.conn, inflight, now)

    async def claim_selected(self, duel_id: int | None, now, lease) -> int:
        return hybrid_tx.lease_selected(self.conn, duel_id, now, lease)

    async def unrecorded_pairs(self, campaign_id: int) -> list[list[int]]:
        return [[int(r.model_i), int(r.model_j)] for r in self.conn.execute(UNRECORDED_PAIRS, {"cid": campaign_id})]

    async def vote_reads(self, duel_id: int, hint: int | None, cached_seq: int | None):
        crow = self.conn.execute(LOCK_FOR_VOTE, {"did": duel_id}).first()
        drow = self.conn.execute(DUEL_ROW, {"did": duel_id}).first() if crow is not None else None
        return crow, None, drow

    async def vote_writes(self, judged: dict, campaign: dict, *, recorded: dict | None, end=None, others=()) -> bool:
        """The verdict (``judged``), the outcomes it releases (``others``: held for an earlier
        position, as (duel id, record_seq)), the campaign's counters and policy, and its end."""
        if self.conn.execute(JUDGED_DUEL, judged).rowcount != 1:
            return False
        if judged["fee"]:  # a human judge's fee per vote (costs.vote_fee_nusd): one judge charge with the vote
            self.conn.execute(
                charges.VOTE_FEE_CHARGE, {k: campaign[k] for k in ("cid", "now", "fee")} | {"did": judged["did"]}
            )
        for rid, rseq in others:
            self.conn.execute(RELEASED, {"rid": rid, "rseq": rseq})
        query = VOTED_TIE if recorded is None else VOTED_STATE if "policy_state" in recorded else VOTED
        self.conn.execute(query, {**campaign, **(recorded or {})})
        if recorded is not None and query is VOTED_STATE:
            checkpoint = {k: recorded[k] for k in ("policy_state", "counts", "stats")}
            self.conn.execute(policy_log.WRITE_CHECKPOINT, {"cid": campaign["cid"], **checkpoint})
        if end is not None:  # this verdict ends the campaign (service.cycle.verdict.Ending)
            await self.finish(campaign["cid"], end, campaign["now"], judged["did"])
        return True

    async def touch(self, campaign_id: int, now) -> None:
        self.conn.execute(TOUCHED, {"cid": campaign_id, "now": now})

    async def judge_charges(self, campaign_id: int, duel_id: int, *, j, amount_nusd: int, detail: dict, now) -> None:
        judge_charges.write_judge_charges(
            self.conn, campaign_id, duel_id, j=j, amount_nusd=amount_nusd, detail=detail, now=now
        )

    async def pair_outcomes(self, campaign_id: int, i: int, j: int) -> tuple[int, list]:
        """(how many outcomes of pair (i, j) the policy has, the pair's held outcomes)."""
        p = {"cid": campaign_id, "i": i, "j": j}
        return self.conn.execute(PAIR_RECORDED, p).scalar_one(), self.conn.execute(HELD_OF_PAIR, p).all()

    async def hybrid_verdict(self, svc, duel_id: int, j) -> DuelOutcome:
        """A hybrid judge's vote or automatic verdict (:mod:`.hybrid_verdict`), in this transaction."""
        return hybrid_verdict.record_in_session(svc, self.session, duel_id, j)

    # ---- the answers (service.cycle.answers.decide_answers)
    async def answer_reads(self, campaign_id: int, duel_id: int):
        crow = self.conn.execute(LOCK_FOR_ANSWERS, {"cid": campaign_id}).first()
        drow = self.conn.execute(DUEL_ROW, {"did": duel_id}).first() if crow is not None else None
        return crow, drow

    async def answer_charges(self, campaign_id: int, duel_id: int, rows: list[dict]) -> dict[int, int]:
        return charges.charge_answers(self.conn, duel_id, rows)

    async def store_answer(self, claim, completion, *, text: str, amount_nusd: int, charge_id: int | None) -> None:
        params = store_claims.finalized_answer(
            claim, completion, text=text, amount_nusd=amount_nusd, charge_id=charge_id
        )
        self.conn.execute(store_claims.FINALIZE_ANSWER, params)

    async def settle_spares(self, plan, results: dict, *, charge_ids: dict, paid: set[int], failed: bool) -> None:
        for query, params in spares.settle_writes(plan, results, charge_ids=charge_ids, paid=paid, failed=failed):
            self.conn.execute(query, params)

    async def answer_writes(self, duel: dict, campaign: dict, end=None) -> None:
        """The duel's answer columns, its campaign's end (a provider fault's pause), then the campaign's
        spend and counters."""
        self.conn.execute(ANSWERED_DUEL, duel)
        if end is not None:
            await self.finish(campaign["cid"], end, campaign["now"], duel["did"])
        self.conn.execute(ANSWERED, campaign)


def run_sync(coro: Coroutine):
    """Run a coroutine whose awaits never suspend (a :class:`SyncTx` transaction) to its end
    (:func:`service.campaigns.store_lookup.run_now`; a suspension is a RuntimeError)."""
    return store_lookup.run_now(coro)


def _in_session(svc: HotService, make):
    """One transaction; a refusal (DomainError, HeldDuel) is raised after the commit, so what
    the decision wrote before it (stale duels expired, a pooled duel handed over) stays."""
    refused: Exception | None = None
    with svc.deps.db.write() as s:
        tx = SyncTx(s)
        try:
            out = run_sync(make(tx))
        except (DomainError, HeldDuel) as exc:
            refused = exc
        if tx.after_commit is not None:
            s.info["after_commit"] = tx.after_commit
    if refused is not None:
        raise refused
    return out


def store_answers(svc: HotService, plan: DuelPlan, results: dict) -> DuelOutcome:
    """The answers transaction (:func:`.answers.decide_answers`) in the calling thread, both
    results settled before it (:func:`.answers.settle`)."""
    settled = settle(svc, plan, results)
    return _in_session(svc, lambda tx: decide_answers(svc, tx, plan, results=results, settled=settled))


def plan_duel(svc: HotService, campaign_id: int, principal: Principal | None, run: bool = False) -> DuelPlan:
    """The plan transaction (:func:`.plan.decide_plan`) in the calling thread, for any campaign
    and any caller (``principal`` None: this process's background run)."""
    t0 = time.perf_counter()
    plan = _in_session(svc, lambda tx: decide_plan(svc, tx, campaign_id, principal, run=run))
    plan.select_ms = (time.perf_counter() - t0) * 1000.0
    return plan


def record_verdict(svc: HotService, duel_id: int, j) -> DuelOutcome:
    """The verdict transaction (:func:`.verdict.decide_verdict`) in the calling thread, for any
    campaign: a vote (``j.principal`` set) or an automatic judge's verdict."""
    return _in_session(svc, lambda tx: decide_verdict(svc, tx, duel_id, j))


def record_vote(svc: HotService, duel_id: int, choice: str, principal: Principal) -> DuelOutcome:
    """A vote of ``principal`` (:func:`record_verdict`)."""
    return record_verdict(svc, duel_id, Judgement(choice, principal.label, principal))
