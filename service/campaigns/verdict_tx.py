"""Step 4 of a duel on the ORM session: the locked verdict transaction.

A vote or an automatic verdict is counted exactly once: the duel moves pending ->
judged by a conditional UPDATE (``WHERE status = 'pending'``) in the transaction
that updates the policy. The decisions (may it count, does the campaign end) are
:mod:`service.decide.verdict`'s; this module reads and writes.
"""

from __future__ import annotations

import logging
from typing import Any

from sqlalchemy import select, update

from algorithms.vocabulary import DuelStatus

from ..auth import Principal
from ..decide import verdict as deciding
from ..models import Campaign, Duel, utcnow
from ..redaction import redact, redact_json
from . import hybrid, hybrid_tx, judge_charges, rules
from .judge_charges import Judgement
from .policy_cache import policy_snapshot
from .rules import MAX_ERROR_CHARS, clean_text, jsonable
from .types import Conflict, DuelOutcome, NotFound

log = logging.getLogger("llmduel.campaigns")


def record_verdict_tx(svc: Any, duel_id: int, j: Judgement) -> DuelOutcome:
    """Record ``j`` on duel ``duel_id`` (one locked transaction); a refusal is raised after the commit."""
    with svc.db.write() as s:
        c, d = _lock(s, duel_id, j.principal)
        if hybrid.is_hybrid(c.judge):  # hybrid hook: a human vote on a selected duel
            return hybrid_tx.record_human_vote(svc, s, c, d, j.choice, j.principal or Principal(admin=True))
        s.expunge(d)  # changed below by explicit UPDATEs
        now = utcnow()
        judge_nusd = judge_charges.charge_judge(svc, s, c, d, j, now)
        refused = deciding.refusal(d.id, d.status, d.requested_by, d.error, d.expires_at, c.id, c.status, now)
        if refused is None:
            return _record(svc, s, c, d, j, now)
        if j.fault is not None:  # a stale duel or an ended campaign: the fault still pauses it
            svc.pause_for_fault(s, c, j.fault, now)
        if refused.expire:
            d.status = DuelStatus.EXPIRED
        if refused.expire or judge_nusd:
            s.execute(
                update(Duel)
                .where(Duel.id == d.id)
                .values(status=d.status, cost_nusd=d.cost_nusd)
                .execution_options(synchronize_session=False)
            )
            c.version += 1
            c.updated_at = now
    raise refused.error


def _lock(s, duel_id: int, principal: Any) -> tuple[Campaign, Duel]:
    """The duel's campaign locked in one statement, and the duel; NotFound for one the principal may not see."""
    c = s.execute(
        select(Campaign)
        .where(Campaign.id == select(Duel.campaign_id).where(Duel.id == duel_id).scalar_subquery())
        .with_for_update()
    ).scalar_one_or_none()
    if c is None:
        raise NotFound(f"duel {duel_id} not found")
    if principal is not None and not principal.can_access(c.id):
        raise NotFound(f"duel {duel_id} not found")  # as for a missing id: no probing of ids
    d = s.get(Duel, duel_id)
    if principal is not None and not principal.admin and not rules.annotator_owns(d.requested_by, principal.label):
        raise NotFound(f"duel {duel_id} not found")  # another annotator's duel
    return c, d


def _record(svc: Any, s, c: Campaign, d: Duel, j: Judgement, now) -> DuelOutcome:
    """The verdict counts: write the duel, the policy's record and the campaign's end, if it ends."""
    if j.principal is not None:
        judge_charges.charge_fee(s, c, d, rules.vote_fee_nusd(c.judge), None, now)
    d.judged_at, d.judged_by = now, j.judged_by
    wor = rules.is_wor(c.prompt_sampling) and d.position is not None
    keys = svc.secret_keys(c.models, c.judge)
    d.judge_detail = redact_json(jsonable(j.judge_detail), keys) if j.judge_detail else None
    score = None
    if j.choice is None:
        d.status = DuelStatus.FAILED
        d.error = clean_text(redact(f"judge error: {j.judge_error or 'no verdict'}", keys), MAX_ERROR_CHARS)
    else:
        d.status, d.choice = DuelStatus.JUDGED, j.choice
        score = rules.score_of(
            j.choice,
            d.model_i,
            d.model_a,
            d.model_b,
            c.tie_policy,
            c.seed,
            d.number,
            j.judge_score,
            draw_key=c.draw_key,
        )
        if score is not None:
            d.score = score
            if not wor:  # without replacement: recorded below, in position order
                d.counted, d.record_seq = True, c.event_seq + 1
    _write_judged(s, d, now)
    stopped = None
    if j.choice is None:
        c.duels_failed += 1
    else:
        c.duels_judged += 1
        if score is not None:
            stopped = _count(svc, s, c, d, score, wor)
    end = deciding.ending(
        stopped, j.choice is not None, c.max_duels, c.duels_judged, c.budget_nusd, c.spend_nusd, j.fault
    )
    if end is not None:
        if end.winner is not None:
            c.winner = c.leader = end.winner
        svc.finish(s, c, end.status, end.reason, now, keep_duel=d.id, limit=end.limit)
    c.version += 1
    c.updated_at = now
    view = svc.duel_view(d, c)
    return DuelOutcome(d.id, d.status, ended=end is not None, failed=j.choice is None, error=d.error, view=view)


def _write_judged(s, d: Duel, now) -> None:
    """pending -> judged (or failed), once: a second verdict finds no pending row."""
    claimed = s.execute(
        update(Duel)
        .where(Duel.id == d.id, Duel.status == DuelStatus.PENDING)
        .values(
            status=d.status,
            choice=d.choice,
            score=d.score,
            counted=d.counted,
            judged_by=d.judged_by,
            judge_detail=d.judge_detail,
            judged_at=now,
            record_seq=d.record_seq,
            error=d.error,
            cost_nusd=d.cost_nusd,
        )
        .execution_options(synchronize_session=False)
    ).rowcount
    if claimed != 1:  # cannot happen under the campaign lock; never count twice anyway
        raise Conflict(f"duel {d.id} already has a verdict")


def _count(svc: Any, s, c: Campaign, d: Duel, score: float, wor: bool) -> deciding.Ending | None:
    """The score enters the policy (without replacement: in position order, maybe later); the
    ending of a policy whose stopping rule fired, else None."""
    policy = svc.policies.take(c.id, c.event_seq, c.policy_state)
    recorded = 0
    if wor:
        # The pair's outcomes enter the policy in position order: this one waits
        # (held in its row) while an earlier position is in flight (docs/reuse.md).
        released = svc.release_in_order(s, c, policy, d.model_i, d.model_j)
        recorded = len(released)
        if d.id in released:
            d.counted, d.record_seq = True, released[d.id]
    else:
        policy.record(d.model_i, d.model_j, score)
        c.event_seq += 1
        c.duels_counted += 1
        recorded = 1
    s.info["after_commit"] = lambda p=policy, seq=c.event_seq, cid=c.id: svc.policies.put(cid, seq, p)
    if not recorded:  # held: the policy is unchanged, back in the cache
        return None
    c.policy_state, c.counts, c.stats, c.leader = policy_snapshot(policy)
    if not policy.should_stop():
        return None
    verdict = getattr(policy, "verdict", None)
    winner = None if verdict in deciding.NO_WINNER else int(policy.recommendation())
    return deciding.stop_ending(verdict, winner, c.algorithm, c.delta, c.n_prompts)
