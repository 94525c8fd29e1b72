"""The plain-case decisions of a vote cycle, written once for both drivers.

:func:`decide_plan` and :func:`decide_vote` are coroutines that ask a *transaction driver*
(:class:`service.hotpath.sync_driver.SyncTx` or
:class:`service.hotpath.pg_driver.PgTx`) for each database round trip. They
decide with :mod:`service.campaigns.rules` only, like the general transactions,
and raise :class:`Fallback` before writing anything when the plain case does not
apply.
"""

from __future__ import annotations

from dataclasses import dataclass
from types import SimpleNamespace
from typing import TYPE_CHECKING, Any

from algorithms.vocabulary import CampaignStatus, DuelStatus

from ..campaigns import holds, rules, stores
from ..campaigns.policy_cache import policy_snapshot, restore_policy
from ..campaigns.skips import POOL_REQUESTER
from ..campaigns.types import DuelOutcome, DuelPlan
from ..models import Duel, utcnow

if TYPE_CHECKING:  # pragma: no cover
    from ..auth import Principal
    from .service_port import HotService


class Fallback(Exception):
    """The plain case does not apply: nothing was written; use the general transaction."""


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
)


class DuelRow(SimpleNamespace):
    """A duel's columns as plain attributes (unset ones None): the hot path builds
    its views from this instead of an ORM instance."""

    _EMPTY = dict.fromkeys(Duel.__table__.c.keys())
    model_a = Duel.model_a
    model_b = Duel.model_b

    def __init__(self, **columns):
        super().__init__(**{**self._EMPTY, **columns})


def _remember_config(svc: HotService, campaign_id: int, row) -> CampaignConfig:
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
    )
    cache: dict = svc.config_cache
    if len(cache) >= 10_000:
        cache.clear()
    cache[campaign_id] = cfg
    return cfg


async def _config(svc: HotService, tx, campaign_id: int) -> CampaignConfig:
    cfg = svc.config_cache.get(campaign_id)
    return cfg if cfg is not None else _remember_config(svc, campaign_id, await tx.config(campaign_id))


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


# ---------------------------------------------------------------- the decisions
async def decide_plan(svc: HotService, tx, campaign_id: int, principal: Principal) -> DuelPlan:
    """:meth:`CampaignService.plan_duel_tx` for a running campaign with nothing to expire or end."""
    if not principal.can_access(campaign_id):
        raise Fallback
    known = svc.config_cache.get(campaign_id)
    row, state, inflight, cfg_row = await tx.plan_reads(campaign_id, svc.policies.seq_of(campaign_id), known is None)
    if row is None or row.status != CampaignStatus.RUNNING:
        raise Fallback
    cfg = known if known is not None else _remember_config(svc, campaign_id, cfg_row)
    if not principal.admin and cfg.judge.get("kind") != "human":
        raise Fallback
    if rules.is_wor(cfg.prompt_sampling):
        raise Fallback  # without replacement: positions and held outcomes are the general path's
    if cfg.judge.get("kind") == "hybrid":
        raise Fallback  # hybrid hook: its judged duels waiting in draw order count as pulled (general path)
    now = utcnow()
    if any(rules.is_stale(r.expires_at, now) for r in inflight):
        raise Fallback  # stale duels to expire
    if not principal.admin and rules.held_duel(inflight, principal.label, cfg.max_pending_per_annotator) is not None:
        raise Fallback  # the annotator's own duel is handed back: the general path does it
    if not principal.admin and any(r.requested_by == POOL_REQUESTER for r in inflight):
        raise Fallback  # a skipped duel may be handed over: the general path does it
    if rules.max_duels_reached(row.max_duels, row.duels_judged, len(inflight)):
        raise Fallback
    policy = await _policy(svc, tx, campaign_id, row.event_seq, state)
    if stores.apply_costs(policy, svc.store_costs_for(campaign_id)) is not None:
        raise Fallback  # the marginal costs changed: the general path stores the policy's new state
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
    reserved = rules.reserved_nusd(inflight, held)
    if rules.over_budget(row.budget_nusd, row.spend_nusd, reserved, expected):
        raise Fallback
    duel = rules.new_duel_columns(
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
    plan = DuelPlan(
        campaign_id=campaign_id,
        duel_id=0,
        number=number,
        i=i,
        j=j,
        a_is_i=a_is_i,
        prompt=prompt,
        models=[dict(m) for m in cfg.models],
        judge=dict(cfg.judge),
        tie_policy=cfg.tie_policy,
        seed=cfg.seed,
        prompt_index=prompt_index,
        answers=cfg.answers,
        verdicts=cfg.verdicts,
        draw_key=cfg.draw_key,
        deadline=rules.call_deadline(svc.call_expiry),
    )
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
    """:meth:`CampaignService.record_verdict_tx` for a human vote that neither ends the campaign nor fails."""
    hint = principal.campaign_id  # an annotator's campaign (the admin's is learnt from the duel)
    crow, state, drow = await tx.vote_reads(duel_id, hint, svc.policies.seq_of(hint) if hint else None)
    if crow is None or crow.status != CampaignStatus.RUNNING or not principal.can_access(crow.id):
        raise Fallback
    now = utcnow()
    if drow is None or drow.status != DuelStatus.PENDING or rules.is_stale(drow.expires_at, now):
        raise Fallback
    if not principal.admin and not rules.annotator_owns(drow.requested_by, principal.label):
        raise Fallback  # another annotator's duel: the general path refuses it
    cfg = await _config(svc, tx, crow.id)
    if cfg.judge.get("kind") == "hybrid":
        raise Fallback  # hybrid hook: its votes are recorded in draw order by the general path
    if rules.is_wor(cfg.prompt_sampling):
        raise Fallback  # without replacement: outcomes are recorded in position order by the general path
    if rules.max_duels_reached(crow.max_duels, crow.duels_judged + 1):
        raise Fallback  # this vote ends the campaign: the general path does it
    fee = rules.vote_fee_nusd(cfg.judge)  # a human judge's fee, charged with the vote
    if rules.budget_spent(crow.budget_nusd, crow.spend_nusd + fee):
        raise Fallback  # this vote spends the budget: the general path ends the campaign
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
    if not await tx.vote_writes(judged, {"cid": crow.id, "now": now, "fee": fee}, recorded):
        raise Fallback  # the duel was not pending after all: nothing was written
    if recorded is not None:
        tx.after_commit = lambda: svc.policies.put(crow.id, recorded["seq"], policy)
    return DuelOutcome(duel_id, DuelStatus.JUDGED, view=svc.duel_view(d, c))
