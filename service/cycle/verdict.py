"""Step 4 of every duel: the verdict transaction, written once for votes and automatic verdicts.

:func:`decide_verdict` records a :class:`~service.campaigns.judge_charges.Judgement`
(an annotator's or the admin's vote, or an automatic judge's verdict) on either
driver, deciding with the pure functions at the end of this module. The steps, each an early
return:

1. the duel's campaign locked; a duel the caller may not see is a 404;
2. a hybrid judge's duel goes to that judge's recorder (:mod:`.hybrid_verdict`:
   its records enter in draw order);
3. an automatic judge's charges (capped at the judge's bound; a lying judge's verdict becomes
   a judge error and pauses the campaign);
4. :func:`refusal` (a duel expired meanwhile is marked so);
5. the score; it enters the policy now, or, sampling without replacement, in position
   order with the pair's held outcomes (:func:`_release`);
6. :func:`ending` (certification, ``max_duels``, budget, a fault),
   and one write of the duel, the released outcomes and the campaign.

A verdict counts exactly once: the duel moves ``pending -> judged`` by a conditional
UPDATE in the transaction that updates the policy.
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass
from types import SimpleNamespace
from typing import TYPE_CHECKING, Any

from algorithms.vocabulary import CampaignStatus, DuelStatus

from ..campaigns import policy_log
from ..campaigns.annotator_access import annotator_owns
from ..campaigns.expiry import is_stale
from ..campaigns.judge_charges import Judgement, price_judge
from ..campaigns.leases import ORPHAN_REQUESTER
from ..campaigns.limits import END_LIMIT_MAX_DUELS, END_LIMIT_PROVIDER, max_duels_reached
from ..campaigns.policy_cache import policy_snapshot
from ..campaigns.sampling import is_wor, next_in_order
from ..campaigns.scoring import score_of
from ..campaigns.types import Conflict, DuelOutcome, NotFound
from ..models import utcnow
from ..money import budget
from ..money.budget import END_LIMIT_BUDGET
from ..money.costs import vote_fee_nusd
from ..money.ledger import fault_reason, mark_late, usage_faulted
from ..plain_values import jsonable
from ..redaction import redact, redact_json
from ..stored_config import image_answers
from ..stored_text import MAX_ERROR_CHARS, clean_text
from .shared import CampaignConfig, DuelRow, config_of, not_handled, policy_at

if TYPE_CHECKING:  # pragma: no cover
    from .driver import Tx
    from .service_port import HotService


async def decide_verdict(svc: HotService, tx: Tx, duel_id: int, j: Judgement) -> DuelOutcome:
    """Record ``j`` on duel ``duel_id``; a refusal is raised (what was written before it commits)."""
    p = j.principal
    hint = p.campaign_id if p is not None else None  # an annotator's campaign (else learnt from the duel)
    crow, state, drow = await tx.vote_reads(duel_id, hint, svc.policies.seq_of(hint) if hint else None)
    if crow is None or drow is None or (p is not None and not p.can_access(crow.id)):
        raise NotFound(f"duel {duel_id} not found")  # as for a missing id: no probing of ids
    if p is not None and not p.admin and not annotator_owns(drow.requested_by, p.label):
        raise NotFound(f"duel {duel_id} not found")  # another annotator's duel
    cfg = await config_of(svc, tx, crow.id, max(int(drow.model_i), int(drow.model_j)))
    if not tx.covers(cfg, p is None):  # the caller chose the driver before the transaction
        raise not_handled(crow.id)
    if cfg.hybrid:
        return await tx.hybrid_verdict(svc, duel_id, j)
    now = utcnow()
    judge_nusd = await _charge_judge(
        tx, crow.id, cfg=cfg, drow=drow, j=j, now=now, ended=crow.status != CampaignStatus.RUNNING
    )
    refused = refusal(
        duel_id,
        status=drow.status,
        requested_by=drow.requested_by,
        error=drow.error,
        expires_at=drow.expires_at,
        campaign_id=crow.id,
        campaign_status=crow.status,
        now=now,
    )
    if refused is not None:
        if j.fault is not None and crow.status == CampaignStatus.RUNNING:  # the fault still pauses it
            await tx.finish(crow.id, paused(j.fault), now)
        if refused.expire:
            await tx.expire_duel(duel_id, crow.id, now)
        elif judge_nusd:
            await tx.touch(crow.id, now)
        raise refused.error
    return await _record(svc, tx, crow=crow, state=state, drow=drow, cfg=cfg, j=j, judge_nusd=judge_nusd, now=now)


async def _charge_judge(tx: Tx, campaign_id: int, *, cfg: CampaignConfig, drow, j: Judgement, now, ended: bool) -> int:
    """An automatic judge's charges (nothing for a vote); returns the amount charged. ``ended``: the
    campaign ended while the judge was deciding (a late charge: ledger.LATE)."""
    called = bool(j.judge_cost) or usage_faulted(j.judge_detail)  # a call with an unusable usage is charged
    if not called and j.reused_verdict is None and j.verdict_claim is None:
        return 0
    reference = await tx.reference(campaign_id, drow.prompt_index) if called else None
    stale = is_stale(drow.expires_at, now)
    amount, detail = price_judge(
        cfg.judge, drow.prompt, reference, j=j, stale=stale, duel_id=drow.id, image_answers=image_answers(cfg.models)
    )
    if amount:
        detail = mark_late(detail, ended) or {}
    await tx.judge_charges(campaign_id, drow.id, j=j, amount_nusd=amount, detail=detail, now=now)
    return amount


async def _record(
    svc: HotService, tx: Tx, *, crow, state, drow, cfg: CampaignConfig, j: Judgement, judge_nusd: int, now
):
    """The verdict counts: the duel, the policy's record, the campaign and its end, if it ends."""
    fee = vote_fee_nusd(cfg.judge) if j.principal is not None else 0  # a human judge's fee per vote
    d = DuelRow(**drow._asdict())
    d.cost_nusd = int(d.cost_nusd or 0) + judge_nusd + fee
    d.judged_by, d.judged_at = j.judged_by, now
    d.judge_detail = None
    if j.judge_detail:  # stored text never holds a configured key (service.redaction)
        d.judge_detail = redact_json(jsonable(j.judge_detail), svc.secret_keys(cfg.models, cfg.judge))
    score = None
    if j.choice is None:
        d.status = DuelStatus.FAILED
        error = redact(f"judge error: {j.judge_error or 'no verdict'}", svc.secret_keys(cfg.models, cfg.judge))
        d.error = clean_text(error, MAX_ERROR_CHARS)
    else:
        d.status, d.choice = DuelStatus.JUDGED, j.choice
        score = score_of(
            j.choice,
            model_i=d.model_i,
            model_a=d.model_a,
            model_b=d.model_b,
            tie_policy=cfg.tie_policy,
            seed=cfg.seed,
            number=d.number,
            score_a=j.judge_score,
            draw_key=cfg.draw_key,
        )
        d.score = score
    released: dict[int, int] = {}
    stopped, policy = None, None
    if score is not None:
        policy = await policy_at(
            svc, tx, crow.id, event_seq=crow.event_seq, fetched_state=state, state_seq=crow.state_seq
        )
        if is_wor(cfg.prompt_sampling) and d.position is not None:
            released = await _release(tx, crow, d, policy)
        else:
            policy.record(d.model_i, d.model_j, score)
            released = {d.id: crow.event_seq + 1}
        if released:
            stopped = policy_ending(policy, cfg.algorithm, cfg.delta, cfg.n_prompts)
    d.counted, d.record_seq = d.id in released, released.get(d.id)
    judged_n = int(j.choice is not None)
    end = ending(
        stopped,
        judged=j.choice is not None,
        max_duels=crow.max_duels,
        duels_judged=crow.duels_judged + judged_n,
        budget_nusd=crow.budget_nusd,
        spent_nusd=crow.spend_nusd + judge_nusd + fee,
        fault=j.fault,
    )
    recorded: dict[str, Any] | None = None
    if released:
        seq = max(released.values())
        recorded = {"seq": seq, "leader": policy_log.leader_of(policy), "n_counted": len(released)}
        if stopped is not None or end is not None or policy_log.checkpoint_due(len(cfg.models), seq, crow.state_seq):
            policy_state, counts, stats, leader = policy_snapshot(policy)  # a checkpoint (policy_log)
            recorded.update(policy_state=policy_state, counts=counts, stats=stats, leader=leader)
    judged = {
        "did": d.id,
        "status": d.status,
        "choice": d.choice,
        "score": d.score,
        "counted": d.counted,
        "judged_by": d.judged_by,
        "judge_detail": d.judge_detail,
        "error": d.error,
        "now": now,
        "record_seq": d.record_seq,
        "fee": fee,
    }
    campaign = {"cid": crow.id, "now": now, "fee": fee, "n_judged": judged_n, "n_failed": 1 - judged_n}
    others = [(i, s) for i, s in released.items() if i != d.id]  # outcomes held for an earlier position
    if not await tx.vote_writes(judged, campaign, recorded=recorded, end=end, others=others):
        raise Conflict(f"duel {d.id} already has a verdict")  # cannot happen under the lock; never count twice
    if policy is not None:  # recorded, or unchanged (held): the policy goes back to the cache
        at = recorded["seq"] if recorded is not None else crow.event_seq
        tx.after_commit = lambda: svc.policies.put(crow.id, at, policy)
    c = SimpleNamespace(id=crow.id, models=cfg.models, status=end.status if end is not None else CampaignStatus.RUNNING)
    c.tie_policy, c.seed = cfg.tie_policy, cfg.seed
    view = svc.deps.views.duel_view(d, c)
    return DuelOutcome(d.id, d.status, ended=end is not None, failed=j.choice is None, error=d.error, view=view)


async def _release(tx: Tx, crow, d: DuelRow, policy) -> dict[int, int]:
    """Sampling without replacement: the pair's outcomes enter the policy in position order. This
    one, and the held ones after it, enter when every earlier position is recorded; each takes the
    next ``event_seq`` as its ``record_seq`` (replay sees them in the policy's order). Stops at a
    gap or when the policy stops. Returns {duel id: record_seq}."""
    recorded, rows = await tx.pair_outcomes(crow.id, d.model_i, d.model_j)
    held: dict[int, Any] = {}
    for r in sorted([*rows, SimpleNamespace(id=d.id, position=d.position, score=d.score)], key=lambda r: r.id):
        held.setdefault(int(r.position), r)
    out: dict[int, int] = {}
    seq = crow.event_seq
    for r in next_in_order(int(recorded), held):
        policy.record(d.model_i, d.model_j, float(r.score))
        seq += 1
        out[int(r.id)] = seq
        if policy.should_stop():
            break
    return out


# ---------------------------------------------------------------- the decisions (pure: plain values in, a decision out)
#: The stopping verdicts that certify no model.
NO_WINNER = (CampaignStatus.UNDECIDABLE, CampaignStatus.NO_CONDORCET_WINNER)


@dataclass(frozen=True)
class Refusal:
    """The verdict does not count: raise ``error``; ``expire``: the duel becomes expired first."""

    error: Conflict
    expire: bool = False


@dataclass(frozen=True)
class Ending:
    """The campaign ends with this verdict: :meth:`finish` ``status``, ``reason``, ``limit``;
    ``winner``: the certified model (CERTIFIED only)."""

    status: str
    reason: str
    limit: str | None = None
    winner: int | None = None


def not_pending_message(duel_id: int, status: str) -> str:
    """Why a duel in ``status`` (not pending) takes no verdict."""
    messages: dict[str, str] = {
        DuelStatus.JUDGED: "already has a verdict",
        DuelStatus.CALLING: "is still waiting for the models' answers",
        DuelStatus.EXPIRED: "expired and no longer counts",
        DuelStatus.FAILED: "failed and cannot be judged",
        DuelStatus.CANCELLED: "was cancelled: the campaign ended before it was judged",
    }
    return f"duel {duel_id} {messages.get(status, f'cannot be judged (status {status})')}"


def refusal(
    duel_id: int,
    *,
    status: str,
    requested_by: str | None,
    error: str | None,
    expires_at: dt.datetime,
    campaign_id: int,
    campaign_status: str,
    now: dt.datetime,
) -> Refusal | None:
    """Why a verdict on this duel does not count, or None when it does.

    A pending duel of a run taken over (an orphan) and a pending duel past its expiry
    become expired; a duel not pending, or of an ended campaign, is left as it is.
    """
    if status == DuelStatus.PENDING and requested_by == ORPHAN_REQUESTER:
        return Refusal(Conflict(f"duel {duel_id}: {error}"), expire=True)  # its run has another owner
    if status != DuelStatus.PENDING:
        return Refusal(Conflict(not_pending_message(duel_id, status)))
    if is_stale(expires_at, now):
        return Refusal(Conflict(f"duel {duel_id} expired at {expires_at.isoformat()} and no longer counts"), True)
    if campaign_status != CampaignStatus.RUNNING:
        return Refusal(Conflict(f"campaign {campaign_id} has ended (status {campaign_status})"))
    return None


def stop_ending(verdict: str | None, winner: int | None, *, algorithm: str, delta: float, n_prompts: int) -> Ending:
    """The ending of a policy whose stopping rule fired: its ``verdict`` (undecidable, no Condorcet
    winner) or else certification of ``winner``."""
    if verdict == CampaignStatus.UNDECIDABLE:
        return Ending(
            CampaignStatus.UNDECIDABLE,
            f"no model can be certified on this prompt set ({n_prompts} prompts, "
            f"sampled without replacement): no pair left can decide between the models "
            f"not shown to lose (the {algorithm} certificates at delta={delta:g})",
        )
    if verdict == CampaignStatus.NO_CONDORCET_WINNER:
        return Ending(
            CampaignStatus.NO_CONDORCET_WINNER,
            f"every model was shown to lose to another (the {algorithm} "
            f"certificates at delta={delta:g}): no Condorcet winner",
        )
    return Ending(
        CampaignStatus.CERTIFIED,
        f"certified by the {algorithm} stopping rule at delta={delta:g}",
        winner=None if winner is None else int(winner),
    )


def policy_ending(policy, algorithm: str, delta: float, n_prompts: int) -> Ending | None:
    """:func:`stop_ending` of a policy whose stopping rule fired with the scores just recorded, else None."""
    if not policy.should_stop():
        return None
    verdict = getattr(policy, "verdict", None)
    rec = None if verdict in NO_WINNER else policy.recommendation()
    winner = None if rec is None else int(rec)  # a leaderboard goal certified without one best model: None
    return stop_ending(verdict, winner, algorithm=algorithm, delta=delta, n_prompts=n_prompts)


def paused(fault: str) -> Ending:
    """A running campaign paused on a provider fault (``end_limit = 'provider'``; a PATCH continues it)."""
    return Ending(CampaignStatus.STOPPED, fault_reason(fault), END_LIMIT_PROVIDER)


def ending(
    stopped: Ending | None,
    *,
    judged: bool,
    max_duels: int | None,
    duels_judged: int,
    budget_nusd: int | None,
    spent_nusd: int,
    fault: str | None,
) -> Ending | None:
    """How the campaign ends once this verdict is written, or None (it goes on).

    ``stopped``: the policy's stopping rule fired (:func:`stop_ending`); ``judged``: the verdict was
    a choice (a failed judgement does not count toward ``max_duels``); ``duels_judged``,
    ``spent_nusd``: the campaign's counters with this verdict and its charges; ``fault``: the
    judge's provider fault. The first that applies wins, in this order.
    """
    if stopped is not None:
        return stopped
    if judged and max_duels_reached(max_duels, duels_judged):
        return Ending(CampaignStatus.STOPPED, f"max_duels ({max_duels}) reached", END_LIMIT_MAX_DUELS)
    if budget.budget_spent(budget_nusd, spent_nusd):
        limit = END_LIMIT_BUDGET if budget_nusd is not None else None
        return Ending(CampaignStatus.BUDGET_EXHAUSTED, "spend reached the budget", limit)
    if fault is not None:
        return paused(fault)
    return None
