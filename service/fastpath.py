"""The two hot transactions of a vote cycle, in SQLAlchemy Core.

An annotator's cycle is "next duel" then "vote". The general transactions
(:meth:`CampaignService.plan_duel_tx` and :meth:`CampaignService.record_verdict_tx`)
use the ORM and handle every case: ended campaigns, stale duels to expire,
``max_duels``, budgets, background runs, judge charges, certification. Most of a
campaign's life is the plain case, and there the ORM's bookkeeping (identity map,
unit of work, loading ~40 columns and their JSON) costs more than the decision.

This module does the plain case with a few prepared Core statements that read and
write only the columns involved. Whenever the plain case does not apply it
raises :class:`Fallback` *inside* the transaction (so nothing is written) and the
caller runs the general ORM transaction instead. Both paths take the same lock
(the campaign row; ``BEGIN IMMEDIATE`` on SQLite), make the same decisions and
write the same rows, so a campaign's stored state stays equal to its replayed log
whichever path each step took (the test suite runs the API on both paths:
:data:`ENABLED` off forces the general one).
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from types import SimpleNamespace
from typing import TYPE_CHECKING, Any

from sqlalchemy import bindparam, insert, select, update
from sqlalchemy.exc import OperationalError

from .models import CALLING, FAILED, IN_FLIGHT, JUDGED, PENDING, RUNNING, Campaign, Charge, Duel, to_nusd, utcnow

if TYPE_CHECKING:  # pragma: no cover
    from .auth import Principal
    from .campaigns import CampaignService, DuelOutcome, DuelPlan

ENABLED = True  # tests switch it off to run the same scenarios on the general path

C = Campaign.__table__.c
D = Duel.__table__.c


class Fallback(Exception):
    """The plain case does not apply: roll back and use the general transaction."""


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


CONFIG = select(C.models, C.judge, C.tie_policy, C.seed, C.n_prompts, C.max_duels, C.budget_nusd).where(
    C.id == bindparam("cid"))
POLICY_STATE = select(C.policy_state).where(C.id == bindparam("cid"))
_PLAN_COLUMNS = (C.status, C.event_seq, C.duels_created, C.duels_judged, C.duels_failed, C.spend_nusd,
                 C.judge_spend_nusd)
LOCK_FOR_PLAN = select(*_PLAN_COLUMNS).where(C.id == bindparam("cid")).with_for_update()

IN_FLIGHT_DUELS = select(D.model_i, D.model_j, D.expected_cost_nusd, D.expires_at).where(
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
_VOTE_LOCK = select(C.id, C.status, C.event_seq, C.duels_judged, C.duels_counted, C.spend_nusd).where(
    C.id == select(D.campaign_id).where(D.id == bindparam("did")).scalar_subquery())
LOCK_FOR_VOTE = _VOTE_LOCK.with_for_update()

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
            policy_state=bindparam("policy_state", type_=Campaign.__table__.c.policy_state.type),
            counts=bindparam("counts", type_=Campaign.__table__.c.counts.type),
            stats=bindparam("stats", type_=Campaign.__table__.c.stats.type),
            leader=bindparam("leader"), version=C.version + 1, updated_at=bindparam("now"))
)


def campaign_config(svc: CampaignService, conn, campaign_id: int) -> CampaignConfig:
    cache: dict = svc.config_cache
    cfg = cache.get(campaign_id)
    if cfg is None:
        row = conn.execute(CONFIG, {"cid": campaign_id}).first()
        cfg = CampaignConfig(models=row.models, judge=row.judge, tie_policy=row.tie_policy, seed=int(row.seed),
                             n_prompts=int(row.n_prompts), max_duels=row.max_duels, budget_nusd=row.budget_nusd)
        if len(cache) >= 10_000:
            cache.clear()
        cache[campaign_id] = cfg
    return cfg


def _policy(svc: CampaignService, conn, campaign_id: int, event_seq: int):
    return svc._policies.take_at(
        campaign_id, event_seq, lambda: conn.execute(POLICY_STATE, {"cid": campaign_id}).scalar_one())


def _lock(conn, statement, params: dict, inline: bool):
    """The locked row; ``inline``: :class:`Fallback` when the lock is not had within the inline lock_timeout."""
    if not inline:
        return conn.execute(statement, params).first()
    try:
        return conn.execute(statement, params).first()
    except OperationalError as exc:
        if getattr(exc.orig, "sqlstate", None) == "55P03":  # lock_not_available
            raise Fallback from None
        raise


def plan_duel(svc: CampaignService, campaign_id: int, principal: Principal, inline: bool = False) -> DuelPlan:
    """:meth:`CampaignService.plan_duel_tx` for a running campaign with nothing to expire or end.

    ``inline`` (PostgreSQL, on the event loop): on the inline pool, whose
    connection gives up on a row lock after a few milliseconds (then Fallback).
    """
    from .campaigns import DuelOutcome, DuelPlan, draw_prompt_and_side

    if not principal.can_access(campaign_id):
        raise Fallback
    t0 = time.perf_counter()
    with svc.db.write(inline=inline) as s:
        conn = s.connection()
        row = _lock(conn, LOCK_FOR_PLAN, {"cid": campaign_id}, inline)
        if row is None or row.status != RUNNING:
            raise Fallback
        cfg = campaign_config(svc, conn, campaign_id)
        if not principal.admin and cfg.judge.get("kind") != "human":
            raise Fallback
        now = utcnow()
        inflight = conn.execute(IN_FLIGHT_DUELS, {"cid": campaign_id}).all()
        if any(r.expires_at <= now for r in inflight):
            raise Fallback  # stale duels to expire
        if cfg.max_duels is not None and row.duels_judged + len(inflight) >= cfg.max_duels:
            raise Fallback
        policy = _policy(svc, conn, campaign_id, row.event_seq)
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
        prompt = svc._prompt(s, campaign_id, prompt_index)
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
        duel_id = int(conn.execute(INSERT_DUEL, duel).scalar_one())
        if charges:
            conn.execute(INSERT_CHARGES, [dict(ch, duel_id=duel_id) for ch in charges])
        conn.execute(PLANNED, {"cid": campaign_id, "seq": seq, "created": number, "failed": failed,
                               "spent": duel["cost_nusd"], "now": now})
        s.info["after_commit"] = lambda: svc._policies.put(campaign_id, seq, policy)
        plan.duel_id = duel_id
        if plan.results is not None:
            d = Duel(id=duel_id, **duel)
            plan.outcome = DuelOutcome(duel_id, duel["status"], failed=failed == 1, error=duel.get("error"),
                                       view=svc.duel_view(d, SimpleNamespace(models=cfg.models, status=RUNNING)))
    plan.select_ms = (time.perf_counter() - t0) * 1000.0
    return plan


def record_vote(svc: CampaignService, duel_id: int, choice: str, principal: Principal,
                inline: bool = False) -> DuelOutcome:
    """:meth:`CampaignService.record_verdict_tx` for a human vote that neither ends the campaign nor fails."""
    from .campaigns import DuelOutcome

    with svc.db.write(inline=inline) as s:
        conn = s.connection()
        crow = _lock(conn, LOCK_FOR_VOTE, {"did": duel_id}, inline)
        if crow is None or crow.status != RUNNING or not principal.can_access(crow.id):
            raise Fallback
        drow = conn.execute(DUEL_ROW, {"did": duel_id}).first()
        now = utcnow()
        if drow is None or drow.status != PENDING or drow.expires_at <= now:
            raise Fallback
        cfg = campaign_config(svc, conn, crow.id)
        if cfg.max_duels is not None and crow.duels_judged + 1 >= cfg.max_duels:
            raise Fallback
        if cfg.budget_nusd is not None and crow.spend_nusd >= cfg.budget_nusd:
            raise Fallback
        d = Duel(**drow._asdict())
        c = SimpleNamespace(id=crow.id, models=cfg.models, status=RUNNING, tie_policy=cfg.tie_policy,
                            seed=cfg.seed)
        score = svc._score(c, d, choice)
        d.status, d.choice, d.judged_by, d.judged_at = JUDGED, choice, principal.label, now
        params: dict[str, Any] = {"did": duel_id, "choice": choice, "score": None, "counted": False,
                                  "judged_by": d.judged_by, "now": now, "record_seq": None}
        seq = crow.event_seq
        policy = None
        if score is not None:
            policy = _policy(svc, conn, crow.id, seq)
            policy.record(d.model_i, d.model_j, score)
            if policy.should_stop():
                raise Fallback  # certification: the general path ends the campaign
            seq += 1
            d.score, d.counted, d.record_seq = score, True, seq
            params.update(score=score, counted=True, record_seq=seq)
        if conn.execute(JUDGED_DUEL, params).rowcount != 1:
            raise Fallback
        if policy is None:
            conn.execute(VOTED_TIE, {"cid": crow.id, "now": now})
        else:
            from .campaigns import policy_snapshot

            state, counts, stats, leader = policy_snapshot(policy)
            conn.execute(VOTED, {"cid": crow.id, "seq": seq, "policy_state": state, "counts": counts,
                                 "stats": stats, "leader": leader, "now": now})
            s.info["after_commit"] = lambda: svc._policies.put(crow.id, seq, policy)
        return DuelOutcome(duel_id, JUDGED, view=svc.duel_view(d, c))
