"""Step 1 of a duel on the ORM session: the locked plan transaction.

The decisions are :mod:`service.decide.plan`'s; this module reads what they need
under the campaign's row lock and writes what they decide. A refusal found after
a write (stale duels expired, a campaign ended) is returned, not raised, so the
transaction commits before :func:`plan_duel_tx` raises it.
"""

from __future__ import annotations

import time
from typing import Any

from sqlalchemy import insert, select, update

from algorithms import NoPairAvailable
from algorithms.vocabulary import IN_FLIGHT, DuelStatus

from ..decide import plan as planning
from ..models import Campaign, Charge, Duel, utcnow
from . import holds, hybrid, hybrid_tx, rules, skips, stores
from .leases import RUN_REQUESTER
from .rules import jsonable
from .types import DomainError, DuelOutcome, DuelPlan, HeldDuel


def plan_duel_tx(svc: Any, campaign_id: int, principal: Any, run: bool = False) -> DuelPlan:
    """Choose the pair and insert the duel as calling (one locked transaction)."""
    t0 = time.perf_counter()
    with svc.db.write() as s:
        out = _plan_locked(svc, s, campaign_id, principal, run)
    if isinstance(out, BaseException):  # after the commit: what was written before it stays
        raise out
    out.select_ms = (time.perf_counter() - t0) * 1000.0
    return out


def in_flight_rows(s, campaign_id: int) -> list:
    """The campaign's in-flight duels as the plan decisions read them."""
    return s.execute(
        select(Duel.id, Duel.model_i, Duel.model_j, Duel.expected_cost_nusd, Duel.expires_at, Duel.requested_by).where(
            Duel.campaign_id == campaign_id, Duel.status.in_(IN_FLIGHT)
        )
    ).all()


def expire(s, duel_ids: list[int]) -> None:
    s.execute(
        update(Duel)
        .where(Duel.id.in_(duel_ids), Duel.status.in_(IN_FLIGHT))
        .values(status=DuelStatus.EXPIRED)
        .execution_options(synchronize_session=False)
    )


def apply_end(svc: Any, s, c: Campaign, decision: Any, now) -> DomainError:
    """Write a :class:`planning.End` (or nothing for a plain refusal); the error to raise after the commit."""
    if isinstance(decision, planning.End):
        svc.finish(s, c, decision.status, decision.reason, now, limit=decision.limit)
        return decision.error
    return decision


def _plan_locked(svc: Any, s, campaign_id: int, principal: Any, run: bool) -> DuelPlan | BaseException:
    c = svc.lock_existing(s, campaign_id)
    refusal = planning.access_refusal(campaign_id, c.status, c.judge.get("kind"), principal)
    if refusal is not None:
        return refusal
    now = utcnow()
    inflight = in_flight_rows(s, campaign_id)
    if run:
        refusal = planning.run_refusal(c, svc.owner_id, inflight, now)
        if refusal is not None:
            return refusal
    inflight = hybrid_tx.renew_selected(s, c, inflight, now)  # hybrid hook: lapsed selected duels back to the pool
    stale, inflight = planning.split_stale(inflight, now)
    if stale:
        expire(s, stale)
    if principal is not None and not principal.admin:
        held = rules.held_duel(inflight, principal.label, c.max_pending_per_annotator)
        if held is None:  # a duel another annotator skipped comes before a new one
            held = skips.claim_pooled(s, campaign_id, principal.label)
        if hybrid.is_hybrid(c.judge):  # hybrid hook: annotators only vote on selected duels
            held, err = hybrid_tx.claimed(s, c, held, now, svc.pending_expiry)
            if err is not None:
                return err
        if held is not None:
            return HeldDuel(held)
    decision = planning.cap_decision(campaign_id, c.max_duels, c.duels_judged, inflight)
    if decision is not None:
        return apply_end(svc, s, c, decision, now)
    picked = _pick(svc, s, c, inflight)
    if isinstance(picked, DomainError):
        return picked
    policy, (i, j), position, pending, costs_record = picked
    number = c.duels_created + 1
    prompt_index, a_is_i = rules.draw_prompt_and_side(c.seed, number, c.n_prompts, c.draw_key)
    if position is not None:
        prompt_index = svc.permutation(c)[position]
    prompt_text = svc.prompt_text(s, campaign_id, prompt_index)
    # the reservation bounds what the duel may still pay (stored as expected_cost_nusd)
    expected = svc.duel_reservation(s, c, i, j, a_is_i, prompt_index, prompt_text)
    pregen_held = holds.held_nusd(s, campaign_id, now)  # pre-generation calls in flight
    decision = planning.budget_decision(campaign_id, c.budget_nusd, c.spend_nusd, inflight, pregen_held, expected)
    if decision is not None:
        return apply_end(svc, s, c, decision, now)
    columns = planning.new_duel_columns(
        campaign_id,
        number,
        (i, j),
        (prompt_index, a_is_i),
        prompt_text,
        expected,
        c.event_seq + 1,
        pending,
        principal.label if principal is not None else RUN_REQUESTER,
        now,
        now + svc.call_expiry,
    )
    columns.update(costs_at_select=costs_record, position=position)
    return _insert(svc, s, c, policy, columns, run, now)


def _pick(svc: Any, s, c: Campaign, inflight: list):
    """(policy, pair, position, pending pairs, costs record), or the Conflict when no pair is left."""
    wor = rules.is_wor(c.prompt_sampling)
    policy = svc.policies.take(c.id, c.event_seq, c.policy_state)
    # without replacement the policy computes its own marginal costs from the shared permutation
    costs_record = None if wor else stores.apply_costs(policy, svc.store_costs_for(c.id))
    pending = rules.pending_pairs(inflight)
    pending += hybrid_tx.held_pairs(s, c)  # hybrid hook: judged duels waiting to be recorded in draw order
    if not wor:
        return policy, rules.ordered_pair(*policy.next_pair(pending=pending)), None, pending, costs_record
    # judged duels waiting for an earlier position of their pair count as in flight
    held_rows = svc.held_duels(s, c.id)
    pending += rules.pending_pairs(held_rows)
    try:
        i, j = rules.ordered_pair(*policy.next_pair(pending=pending))
        position = svc.wor_position(s, c, i, j)
    except NoPairAvailable as exc:
        # next_pair changed nothing: the policy goes back to the cache
        s.info["after_commit"] = lambda p=policy, seq=c.event_seq, cid=c.id: svc.policies.put(cid, seq, p)
        return planning.no_pair_error(len(inflight), len(held_rows), str(exc))
    return policy, (i, j), position, pending, costs_record


def _insert(svc: Any, s, c: Campaign, policy, columns: dict, run: bool, now) -> DuelPlan:
    """Write the planned duel (answered at once when both models are instant) and the campaign's counters."""
    c.event_seq += 1
    if run and c.run_remaining is not None:
        c.run_remaining -= 1  # only for a duel that starts (a refused plan leaves it)
    duel = Duel(**columns)
    state = jsonable(policy.to_state())
    if state != c.policy_state:  # set_costs (marginal costs given the stores) changed the state
        c.policy_state = state
    c.duels_created = duel.number
    s.info["after_commit"] = lambda p=policy, seq=c.event_seq, cid=c.id: svc.policies.put(cid, seq, p)
    c.version += 1
    c.updated_at = now
    plan = new_plan(svc, c, duel)
    charges, answered = svc.answer_now(plan, now)
    for key, value in answered.items():
        setattr(duel, key, value)
    if plan.results is not None:
        c.spend_nusd += duel.cost_nusd
        c.duels_failed += duel.status == DuelStatus.FAILED
    s.add(duel)
    s.flush()
    plan.duel_id = int(duel.id)
    if charges:
        s.execute(insert(Charge), [dict(ch, duel_id=duel.id) for ch in charges])
    if plan.results is not None:
        plan.outcome = DuelOutcome(
            duel.id, duel.status, failed=duel.error is not None, error=duel.error, view=svc.duel_view(duel, c)
        )
    return plan


def new_plan(svc: Any, c: Any, duel: Any) -> DuelPlan:
    """The plan of a just planned ``duel`` of campaign ``c`` (duel_id set once it is inserted)."""
    return DuelPlan(
        campaign_id=int(c.id),
        duel_id=0,
        number=duel.number,
        i=duel.model_i,
        j=duel.model_j,
        a_is_i=duel.a_is_i,
        prompt=duel.prompt,
        models=[dict(m) for m in c.models],
        judge=dict(c.judge),
        tie_policy=c.tie_policy,
        seed=int(c.seed),
        prompt_index=duel.prompt_index,
        answers=c.answers,
        verdicts=c.verdicts,
        draw_key=c.draw_key,
        deadline=rules.call_deadline(svc.call_expiry),
    )
