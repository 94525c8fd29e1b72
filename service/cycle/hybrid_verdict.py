"""A hybrid duel's verdict, inside the vote cycle's verdict transaction (decisions in
:mod:`service.campaigns.hybrid`).

The life of a hybrid duel: planned and answered like any automatic duel; the automatic
verdict arrives (:func:`record_in_session`, its judge charge as any judge's); the policy gives
``pi``; the keyed coin decides. Not selected: the duel is judged at once (its ``choice`` and
``score`` are the judge's). Selected: it stays ``pending`` in the annotators' pool
(:mod:`service.campaigns.hybrid_tx`), its budget reservation becomes the human fee, and the
vote (:func:`record_human_vote`) charges the fee. Either way the pair's resolved duels then
enter the policy in the order they were drawn (:func:`flush`), and the campaign ends as any
campaign does (:func:`service.cycle.verdict.ending`). A campaign that ends cancels its
waiting duels: their fee was only reserved, never charged.
"""

from __future__ import annotations

import datetime as dt

from sqlalchemy import select, update

from algorithms.vocabulary import IN_FLIGHT, CampaignStatus, DuelStatus

from ..auth import Principal
from ..campaigns import hybrid, judge_charges, policy_log
from ..campaigns.expiry import is_stale
from ..campaigns.hybrid_tx import HUMAN_FEE_DETAIL, POOL_HOLD
from ..campaigns.leases import ORPHAN_REQUESTER
from ..campaigns.policy_cache import policy_snapshot
from ..campaigns.scoring import score_of
from ..campaigns.skips import POOL_REQUESTER
from ..campaigns.types import Conflict, DuelOutcome, Forbidden, NotFound
from ..models import Campaign, Duel, utcnow
from ..money import charges
from ..plain_values import jsonable
from ..redaction import redact, redact_json
from ..stored_text import MAX_ERROR_CHARS, clean_text
from .verdict import ending, policy_ending


# ---------------------------------------------------------------- recording in draw order
def flush(svc, s, c: Campaign, policy) -> dict[int, int]:
    """Record every pair's resolved duels that are next in draw order; returns {duel id: record_seq}."""
    rows = s.execute(
        select(Duel.id, Duel.model_i, Duel.model_j, Duel.select_seq, Duel.status, Duel.judge_detail, Duel.score).where(
            Duel.campaign_id == c.id,
            Duel.record_seq.is_(None),
            Duel.status.in_((DuelStatus.JUDGED, *IN_FLIGHT)),
        )
    ).all()
    pairs: dict[tuple[int, int], list] = {}
    for r in rows:
        pairs.setdefault((int(r.model_i), int(r.model_j)), []).append(r)
    out: dict[int, int] = {}
    for (i, j), items in sorted(pairs.items()):
        for r in hybrid.next_records(items):
            if policy.should_stop():
                return out
            J, H, pi = hybrid.record_args(r.judge_detail, r.score)
            policy.record(i, j, J, H, pi)
            c.event_seq += 1
            c.duels_counted += 1
            out[int(r.id)] = c.event_seq
            s.execute(
                update(Duel)
                .where(Duel.id == r.id)
                .values(record_seq=c.event_seq, counted=True)
                .execution_options(synchronize_session=False)
            )
    return out


def _flush_with(svc, s, c: Campaign, d: Duel, *, policy) -> int:
    """:func:`flush`, and the duel ``d`` of this transaction shows its own record."""
    s.flush()  # d's new state is what the query reads
    out = flush(svc, s, c, policy)
    if d.id in out:
        d.counted, d.record_seq = True, out[d.id]
    return len(out)


def _after(svc, s, c: Campaign, *, policy, recorded: int, duel_id: int, now: dt.datetime) -> bool:
    """Store the policy; end the campaign as :func:`service.cycle.verdict.ending` decides
    (certification, ``max_duels``, budget); True: ended."""
    s.info["after_commit"] = lambda p=policy, seq=c.event_seq, cid=c.id: svc.policies.put(cid, seq, p)
    stopped = None
    if recorded:
        state, counts, stats, c.leader = policy_snapshot(policy)
        policy_log.write_checkpoint(s, c.id, state=state, counts=counts, stats=stats)
        c.state_seq = c.event_seq  # a hybrid campaign's state is written with every record
        stopped = policy_ending(policy, c.algorithm, c.delta, c.n_prompts)
    end = ending(
        stopped,
        judged=True,
        max_duels=c.max_duels,
        duels_judged=c.duels_judged,
        budget_nusd=c.budget_nusd,
        spent_nusd=c.spend_nusd,
        fault=None,
    )
    if end is None:
        return False
    svc.deps.endings.finish(
        s, c, end.status, end.reason, now=now, keep_duel=duel_id, limit=end.limit, winner=end.winner
    )
    return True


def _lock_duel(s, duel_id: int) -> tuple[Campaign, Duel]:
    c = s.execute(
        select(Campaign)
        .where(Campaign.id == select(Duel.campaign_id).where(Duel.id == duel_id).scalar_subquery())
        .with_for_update()
    ).scalar_one_or_none()
    if c is None:
        raise NotFound(f"duel {duel_id} not found")
    return c, s.get(Duel, duel_id)


# ---------------------------------------------------------------- the automatic verdict and the coin
def record_in_session(svc, s, duel_id: int, j: judge_charges.Judgement) -> DuelOutcome:
    """A hybrid duel's verdict inside the vote cycle's verdict transaction (session ``s``, the
    campaign row locked): an annotator's or the admin's vote (``j.principal`` set), else the
    automatic verdict. A refusal is raised; the caller commits what was written before it."""
    c, d = _lock_duel(s, duel_id)
    if j.principal is not None:
        assert j.choice is not None  # a human vote always has its choice
        return record_human_vote(svc, s, c, d, choice=j.choice, principal=j.principal)
    return _llm_verdict(svc, s, c, d, j=j)


def _llm_verdict(svc, s, c: Campaign, d: Duel, *, j: judge_charges.Judgement) -> DuelOutcome:
    """The automatic verdict of a hybrid duel: charged as any judge call, then ``pi``, the keyed
    coin, and either judged now or handed to the annotators' pool."""
    now = utcnow()
    llm = hybrid.llm_part(c.judge)
    # charged as any judge call, capped at the LLM part's bound (service.money.charges writes it)
    judge_charges.charge_judge(svc.deps.prompts, s, c, d, j=j, now=now, judge=llm)
    refused = _llm_refusal(c, d, now)
    if refused is None:
        return _judged(svc, s, c, d, j=j, now=now)
    if j.fault is not None:
        svc.deps.endings.pause_for_fault(s, c, j.fault, now)
    c.version += 1
    c.updated_at = now
    raise refused


def _llm_refusal(c: Campaign, d: Duel, now: dt.datetime) -> Conflict | None:
    """Why the automatic verdict of hybrid duel ``d`` does not count, or None; a duel that stopped
    waiting for it (an orphan, or past its expiry) is marked expired on the way."""
    if hybrid.detail_of(d.judge_detail) is not None:  # its coin was drawn on the first verdict
        return Conflict(f"duel {d.id} already has its automatic verdict (status {d.status})")
    if d.status != DuelStatus.PENDING or d.requested_by == ORPHAN_REQUESTER:
        refusal = Conflict(f"duel {d.id} no longer waits for its verdict (status {d.status})")
        if d.status == DuelStatus.PENDING:
            d.status = DuelStatus.EXPIRED
        return refusal
    if is_stale(d.expires_at, now):
        d.status = DuelStatus.EXPIRED
        return Conflict(f"duel {d.id} expired and no longer counts")
    if c.status != CampaignStatus.RUNNING:
        return Conflict(f"campaign {c.id} has ended (status {c.status})")
    return None


def _judged(svc, s, c, d, *, j: judge_charges.Judgement, now) -> DuelOutcome:
    """:func:`_llm_verdict` once the duel is known to count."""
    choice, judge_detail, judge_error, judge_score, fault = (
        j.choice,
        j.judge_detail,
        j.judge_error,
        j.judge_score,
        j.fault,
    )
    keys = svc.secret_keys(c.models, c.judge)
    detail = redact_json(jsonable(judge_detail), keys) if judge_detail else {}
    ended = False
    if choice is None:
        d.status, d.judged_at, d.judged_by = DuelStatus.FAILED, now, hybrid.JUDGED_BY_JUDGE
        d.error = clean_text(redact(f"judge error: {judge_error or 'no verdict'}", keys), MAX_ERROR_CHARS)
        d.judge_detail = detail or None
        c.duels_failed += 1
    else:
        J = hybrid.judge_score(
            choice,
            model_i=d.model_i,
            model_a=d.model_a,
            model_b=d.model_b,
            number=d.number,
            score_a=judge_score,
            draw_key=c.draw_key,
        )
        policy = svc.policies.take(c.id, c.event_seq, lambda: policy_log.stored_state(s, c.id))
        pi = float(policy.human_probability(d.model_i, d.model_j, J))
        seen = hybrid.pair_seen(policy, d.model_i, d.model_j)
        rec = hybrid.hybrid_record(choice, J, pi, hybrid.human_coin(c.draw_key, d.number), seen=seen)
        d.judge_detail = {**detail, "hybrid": rec}
        if rec["selected"]:  # waits for an annotator; its reservation is now the human fee
            d.requested_by = POOL_REQUESTER
            d.expires_at = now + POOL_HOLD
            d.expected_cost_nusd = hybrid.fee_nusd(c.judge)
        else:
            d.status, d.choice, d.score = DuelStatus.JUDGED, choice, J
            d.judged_at, d.judged_by = now, hybrid.JUDGED_BY_JUDGE
            c.duels_judged += 1
        recorded = _flush_with(svc, s, c, d, policy=policy)
        ended = _after(svc, s, c, policy=policy, recorded=recorded, duel_id=d.id, now=now)
    if fault is not None and not ended:
        svc.deps.endings.pause_for_fault(s, c, fault, now, keep_duel=d.id)
        ended = True
    c.version += 1
    c.updated_at = now
    return DuelOutcome(
        d.id, d.status, ended=ended, failed=choice is None, error=d.error, view=svc.deps.views.duel_view(d, c)
    )


# ---------------------------------------------------------------- the human vote
def record_human_vote(svc, s, c: Campaign, d: Duel, *, choice: str, principal: Principal) -> DuelOutcome:
    """Inside the vote transaction (campaign locked): a human vote on a selected duel; its fee is
    charged now, with the vote (never for a duel no human voted on)."""
    h = hybrid.detail_of(d.judge_detail)
    if principal.admin:  # not blind: the admin's views show the models and the judge's verdict
        raise Forbidden(
            f"duel {d.id}: a hybrid campaign counts blind votes only; the admin sees the model names and the "
            "judge's verdict, so its vote is refused (hand the duel to an annotator token)"
        )
    if d.requested_by != principal.label:
        raise NotFound(f"duel {d.id} not found")  # a duel not handed to this annotator
    if d.status != DuelStatus.PENDING or h is None or not h["selected"]:
        raise Conflict(f"duel {d.id} does not wait for a human vote (status {d.status})")
    if c.status != CampaignStatus.RUNNING:
        raise Conflict(f"campaign {c.id} has ended (status {c.status})")
    now = utcnow()
    fee = hybrid.fee_nusd(c.judge)
    if fee:
        charges.charge_judgement(s, c, d, amount_nusd=fee, detail=dict(HUMAN_FEE_DETAIL), now=now)
    d.score = score_of(
        choice,
        model_i=d.model_i,
        model_a=d.model_a,
        model_b=d.model_b,
        tie_policy=c.tie_policy,
        seed=c.seed,
        number=d.number,
        draw_key=c.draw_key,
    )
    d.status, d.choice, d.judged_at, d.judged_by = DuelStatus.JUDGED, choice, now, principal.label
    d.expected_cost_nusd = 0
    c.duels_judged += 1
    policy = svc.policies.take(c.id, c.event_seq, lambda: policy_log.stored_state(s, c.id))
    recorded = _flush_with(svc, s, c, d, policy=policy)
    ended = _after(svc, s, c, policy=policy, recorded=recorded, duel_id=d.id, now=now)
    c.version += 1
    c.updated_at = now
    return DuelOutcome(d.id, d.status, ended=ended, view=svc.deps.views.duel_view(d, c))
