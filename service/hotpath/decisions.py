"""The hot path's plan and vote, written once for both drivers.

:func:`decide_plan` and :func:`decide_vote` are coroutines that ask a *transaction driver*
(:class:`service.hotpath.sync_driver.SyncTx` or
:class:`service.hotpath.pg_driver.PgTx`) for each database round trip. They
decide with :mod:`service.decide` and :mod:`service.campaigns.rules`, like the
general transactions, and raise the same refusals. They are called only for campaigns
that :func:`handles` accepts; the caller chooses the driver before the transaction.
"""

from __future__ import annotations

from dataclasses import dataclass
from types import SimpleNamespace
from typing import TYPE_CHECKING, Any

from algorithms.vocabulary import CampaignStatus, DuelStatus

from ..campaigns import holds, rules, stores
from ..campaigns.policy_cache import policy_snapshot, restore_policy
from ..campaigns.rules import jsonable
from ..campaigns.skips import POOL_REQUESTER
from ..campaigns.types import Conflict, DuelOutcome, DuelPlan, HeldDuel, NotFound
from ..decide import plan as planning
from ..decide import verdict as deciding
from ..models import Duel, utcnow

if TYPE_CHECKING:  # pragma: no cover
    from ..auth import Principal
    from .service_port import HotService


@dataclass(frozen=True)
class CampaignConfig:
    """What never changes once a campaign exists (cached per process).

    The budget and the duel cap can be raised (PATCH): they are read with the locked row instead.
    """

    models: list
    judge: dict
    tie_policy: str
    seed: int
    n_prompts: int
    draw_key: str | None
    max_pending_per_annotator: int
    answers: str = "fresh"
    verdicts: str = "fresh"
    prompt_sampling: str = "with_replacement"
    algorithm: str = ""
    delta: float = 0.0


_CONFIG_COLUMNS = (
    "models",
    "judge",
    "tie_policy",
    "seed",
    "n_prompts",
    "draw_key",
    "max_pending_per_annotator",
    "answers",
    "verdicts",
    "prompt_sampling",
    "algorithm",
    "delta",
)


def handles(cfg: CampaignConfig) -> bool:
    """Whether the hot path plans and records for a campaign with this configuration.

    Not for sampling without replacement (positions, outcomes held for an earlier position,
    released in position order) nor for a hybrid judge (its pool of selected duels, its
    draw order): those requests run the general ORM transaction. A campaign sampling
    without replacement has an automatic judge, so from the API only an admin's request
    for a duel, or an admin's vote on a duel still pending, concerns it; a hybrid
    campaign's annotators request and vote through the general transaction.
    """
    return not rules.is_wor(cfg.prompt_sampling) and cfg.judge.get("kind") != "hybrid"


def _not_handled(campaign_id: int) -> RuntimeError:
    return RuntimeError(f"campaign {campaign_id} is not one the hot path handles (hotpath.handles)")


class DuelRow(SimpleNamespace):
    """A duel's columns as plain attributes (unset ones None): the hot path builds
    its views from this instead of an ORM instance."""

    _EMPTY = dict.fromkeys(Duel.__table__.c.keys())
    model_a = Duel.model_a
    model_b = Duel.model_b

    def __init__(self, **columns):
        super().__init__(**{**self._EMPTY, **columns})


def remember_config(svc: HotService, campaign_id: int, row) -> CampaignConfig:
    cfg = CampaignConfig(
        models=row.models,
        judge=row.judge,
        tie_policy=row.tie_policy,
        seed=int(row.seed),
        n_prompts=int(row.n_prompts),
        draw_key=row.draw_key,
        max_pending_per_annotator=int(row.max_pending_per_annotator),
        answers=row.answers,
        verdicts=row.verdicts,
        prompt_sampling=row.prompt_sampling,
        algorithm=row.algorithm,
        delta=float(row.delta),
    )
    cache: dict = svc.config_cache
    if len(cache) >= 10_000:
        cache.clear()
    cache[campaign_id] = cfg
    return cfg


async def _config(svc: HotService, tx, campaign_id: int) -> CampaignConfig:
    cfg = svc.config_cache.get(campaign_id)
    return cfg if cfg is not None else remember_config(svc, campaign_id, await tx.config(campaign_id))


async def _policy(svc: HotService, tx, campaign_id: int, event_seq: int, fetched_state: dict | None):
    """The campaign's policy at ``event_seq``: the cached object, else rebuilt from
    its stored state (``fetched_state`` when the first round trip brought it)."""
    hit = svc.policies.take_exact(campaign_id, event_seq)
    if hit is not None:
        return hit
    state = fetched_state if fetched_state is not None else await tx.policy_state(campaign_id)
    return restore_policy(state)


async def _reference(svc: HotService, tx, campaign_id: int, idx: int) -> str | None:
    """A prompt's reference answer (part of a verdict's store key): the process's cache, else a read."""
    extras = svc.cached_prompt_extras(campaign_id, idx)
    return extras[1] if extras is not None else await tx.reference(campaign_id, idx)


async def _refuse_or_end(tx, campaign_id: int, decision, now) -> None:
    """Raise a refusal of :mod:`service.decide.plan`; an ending is written first (committed with the refusal)."""
    if isinstance(decision, planning.End):
        await tx.finish(campaign_id, decision, now)
        raise decision.error
    if decision is not None:
        raise decision


def _new_plan(svc: HotService, campaign_id: int, cfg: CampaignConfig, duel: dict) -> DuelPlan:
    return DuelPlan(
        campaign_id=campaign_id,
        duel_id=0,
        number=duel["number"],
        i=duel["model_i"],
        j=duel["model_j"],
        a_is_i=duel["a_is_i"],
        prompt=duel["prompt"],
        models=[dict(m) for m in cfg.models],
        judge=dict(cfg.judge),
        tie_policy=cfg.tie_policy,
        seed=cfg.seed,
        prompt_index=duel["prompt_index"],
        answers=cfg.answers,
        verdicts=cfg.verdicts,
        draw_key=cfg.draw_key,
        deadline=rules.call_deadline(svc.call_expiry),
    )


# ---------------------------------------------------------------- the decisions
async def decide_plan(svc: HotService, tx, campaign_id: int, principal: Principal) -> DuelPlan:
    """:meth:`Cycle.plan_duel_tx` for an annotator or the admin.

    For a campaign :func:`handles` accepts: refusals (no access, an ended campaign, the
    annotator's own or a pooled duel handed back, a cap or a budget to wait for), stale duels
    expired, the campaign ended by its cap or budget, the stores' marginal costs recorded.
    """
    known = svc.config_cache.get(campaign_id)
    row, state, inflight, cfg_row = await tx.plan_reads(campaign_id, svc.policies.seq_of(campaign_id), known is None)
    if row is None:
        raise NotFound(f"campaign {campaign_id} not found")
    cfg = known if known is not None else remember_config(svc, campaign_id, cfg_row)
    refusal = planning.access_refusal(campaign_id, row.status, cfg.judge.get("kind"), principal)
    if refusal is not None:
        raise refusal
    if not handles(cfg):  # the caller routes such campaigns to the general transaction
        raise _not_handled(campaign_id)
    now = utcnow()
    stale, inflight = planning.split_stale(inflight, now)
    if stale:
        await tx.expire_stale(campaign_id, now)
    if not principal.admin:
        held = rules.held_duel(inflight, principal.label, cfg.max_pending_per_annotator)
        if held is None and any(r.requested_by == POOL_REQUESTER for r in inflight):
            held = await tx.claim_pooled(campaign_id, principal.label, now)  # a duel another annotator skipped
        if held is not None:
            raise HeldDuel(held)  # the annotator's own duel, or a pooled one, instead of a new one
    cap = planning.cap_decision(campaign_id, row.max_duels, row.duels_judged, inflight)
    await _refuse_or_end(tx, campaign_id, cap, now)
    policy = await _policy(svc, tx, campaign_id, row.event_seq, state)
    costs_record = stores.apply_costs(policy, svc.store_costs_for(campaign_id))  # the stores' marginal costs
    pending = rules.pending_pairs(inflight)
    i, j = rules.ordered_pair(*policy.next_pair(pending=pending))  # pure: the stored state is unchanged
    number = row.duels_created + 1
    prompt_index, a_is_i = rules.draw_prompt_and_side(cfg.seed, number, cfg.n_prompts, cfg.draw_key)
    seq = row.event_seq + 1
    prompt = svc.cached_prompt(campaign_id, prompt_index)
    if prompt is None:
        prompt = svc.remember_prompt(campaign_id, prompt_index, await tx.prompt(campaign_id, prompt_index))
    # the reservation bounds what the duel may still pay (stored as expected_cost_nusd)
    have, orders = await stores.stored_for_duel(
        svc.stored_keys,
        tx,
        cfg.answers,
        cfg.verdicts,
        cfg.models,
        cfg.judge,
        i,
        j,
        a_is_i,
        prompt,
        lambda: _reference(svc, tx, campaign_id, prompt_index),
    )
    expected = rules.reserve_duel_nusd(
        cfg.models, i, j, cfg.judge, prompt, row.judge_spend_nusd, row.duels_judged + row.duels_failed, have, orders
    )
    held = await tx.held(campaign_id, now) if holds.may_hold(cfg.answers, cfg.models, cfg.judge) else 0
    budget = planning.budget_decision(campaign_id, row.budget_nusd, row.spend_nusd, inflight, held, expected)
    await _refuse_or_end(tx, campaign_id, budget, now)
    duel = planning.new_duel_columns(
        campaign_id,
        number,
        (i, j),
        (prompt_index, a_is_i),
        prompt,
        expected,
        seq,
        pending,
        principal.label,
        now,
        now + svc.call_expiry,
    )
    plan = _new_plan(svc, campaign_id, cfg, duel)
    charges, columns = svc.answer_now(plan, now)
    duel.update(columns)
    failed = int(duel["status"] == DuelStatus.FAILED)
    campaign = {
        "cid": campaign_id,
        "seq": seq,
        "created": number,
        "failed": failed,
        "spent": duel["cost_nusd"],
        "now": now,
    }
    if costs_record is not None:  # the costs changed: the duel records them, the campaign keeps the new state
        duel["costs_at_select"] = costs_record
        campaign["policy_state"] = jsonable(policy.to_state())
    duel_id = await tx.plan_writes(duel, charges, campaign)
    tx.after_commit = lambda: svc.policies.put(campaign_id, seq, policy)
    plan.duel_id = duel_id
    if plan.results is not None:
        d = DuelRow(id=duel_id, **duel)
        plan.outcome = DuelOutcome(
            duel_id,
            duel["status"],
            failed=failed == 1,
            error=duel.get("error"),
            view=svc.duel_view(d, SimpleNamespace(models=cfg.models, status=CampaignStatus.RUNNING)),
        )
    return plan


async def decide_vote(svc: HotService, tx, duel_id: int, choice: str, principal: Principal) -> DuelOutcome:
    """:meth:`Cycle.record_verdict_tx` for a human vote: refusals (a duel expired meanwhile is
    marked so), the score, the policy's record, and the campaign's end (certification, max_duels, budget)."""
    hint = principal.campaign_id  # an annotator's campaign (the admin's is learnt from the duel)
    crow, state, drow = await tx.vote_reads(duel_id, hint, svc.policies.seq_of(hint) if hint else None)
    if crow is None or drow is None or not principal.can_access(crow.id):
        raise NotFound(f"duel {duel_id} not found")  # as for a missing id: no probing of ids
    if not principal.admin and not rules.annotator_owns(drow.requested_by, principal.label):
        raise NotFound(f"duel {duel_id} not found")  # another annotator's duel
    cfg = await _config(svc, tx, crow.id)
    if not handles(cfg):  # the caller routes such campaigns to the general transaction
        raise _not_handled(crow.id)
    now = utcnow()
    refused = deciding.refusal(
        duel_id, drow.status, drow.requested_by, drow.error, drow.expires_at, crow.id, crow.status, now
    )
    if refused is not None:
        if refused.expire:
            await tx.expire_duel(duel_id, crow.id, now)
        raise refused.error
    fee = rules.vote_fee_nusd(cfg.judge)  # a human judge's fee, charged with the vote
    d = DuelRow(**drow._asdict())
    d.cost_nusd = int(d.cost_nusd or 0) + fee
    c = SimpleNamespace(
        id=crow.id, models=cfg.models, status=CampaignStatus.RUNNING, tie_policy=cfg.tie_policy, seed=cfg.seed
    )
    score = rules.score_of(
        choice, d.model_i, d.model_a, d.model_b, cfg.tie_policy, cfg.seed, d.number, draw_key=cfg.draw_key
    )
    d.status, d.choice, d.judged_by, d.judged_at = DuelStatus.JUDGED, choice, principal.label, now
    judged: dict[str, Any] = {
        "did": duel_id,
        "choice": choice,
        "score": None,
        "counted": False,
        "judged_by": d.judged_by,
        "now": now,
        "record_seq": None,
        "fee": fee,
    }
    recorded, stopped = None, None
    if score is not None:
        seq = crow.event_seq + 1
        policy = await _policy(svc, tx, crow.id, crow.event_seq, state)
        policy.record(d.model_i, d.model_j, score)
        stopped = _stopped(policy, cfg)
        d.score, d.counted, d.record_seq = score, True, seq
        judged.update(score=score, counted=True, record_seq=seq)
        policy_state, counts, stats, leader = policy_snapshot(policy)
        recorded = {"seq": seq, "policy_state": policy_state, "counts": counts, "stats": stats, "leader": leader}
    end = deciding.ending(
        stopped, True, crow.max_duels, crow.duels_judged + 1, crow.budget_nusd, crow.spend_nusd + fee, None
    )
    if not await tx.vote_writes(judged, {"cid": crow.id, "now": now, "fee": fee}, recorded, end):
        raise Conflict(f"duel {duel_id} already has a verdict")  # cannot happen under the lock; never count twice
    if recorded is not None:
        tx.after_commit = lambda: svc.policies.put(crow.id, recorded["seq"], policy)
    if end is not None:
        c.status = end.status
    return DuelOutcome(duel_id, DuelStatus.JUDGED, ended=end is not None, view=svc.duel_view(d, c))


def _stopped(policy, cfg: CampaignConfig) -> deciding.Ending | None:
    """The ending of a policy whose stopping rule fired with the score just recorded, else None."""
    if not policy.should_stop():
        return None
    verdict = getattr(policy, "verdict", None)
    winner = None if verdict in deciding.NO_WINNER else int(policy.recommendation())
    return deciding.stop_ending(verdict, winner, cfg.algorithm, cfg.delta, cfg.n_prompts)
