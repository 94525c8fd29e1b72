"""Step 1 of every duel: the plan transaction, written once for every case and both drivers.

:func:`decide_plan` is a coroutine that asks a *transaction driver*
(:class:`service.cycle.sync_driver.SyncTx` or :class:`service.cycle.pg_driver.PgTx`)
for each database round trip and decides with the pure functions at the end of this module. The steps,
in order, each an early return (a refusal is raised; what was written before it is
committed with it):

1. :func:`_gate`: access, the campaign's status, a background run's lease and slots,
   a hybrid campaign's lapsed selected duels back to the pool, stale duels expired,
   an annotator's own or pooled duel handed back;
2. the duel cap (:func:`cap_decision`);
3. :func:`_pick`: the policy's pair given the pairs in flight (and, without
   replacement, the outcomes held for an earlier position and the pair's free position);
4. the prompt and display order, the reservation given the stores, the budget
   (:func:`service.money.reserve.budget_decision`);
5. :func:`_write`: the duel inserted as ``calling`` (answered at once when both models
   are instant) and the campaign's counters.

Every request, an annotator's, the admin's or a background run's, takes this path.
The asyncpg driver covers the campaigns :func:`.shared.handles` accepts; the
others (sampling without replacement, a hybrid judge) and the background runs use
the SQLAlchemy driver, whose extra round trips (:meth:`SyncTx.wor_reads` and the
hybrid pool's) the same steps call.
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass
from types import SimpleNamespace
from typing import TYPE_CHECKING, Any, Iterable

from algorithms import NoPairAvailable
from algorithms.vocabulary import CampaignStatus, DuelStatus

from ..campaigns import store_lookup, store_settings
from ..campaigns.annotator_access import ANNOTATOR_LABEL_PREFIX, held_duel
from ..campaigns.draws import draw_prompt_and_side
from ..campaigns.expiry import call_deadline, is_stale
from ..campaigns.leases import ORPHAN_REQUESTER, RUN_REQUESTER
from ..campaigns.limits import END_LIMIT_MAX_DUELS, max_duels_reached, run_slots_full
from ..campaigns.pairs import next_pair, pending_pairs
from ..campaigns.sampling import is_wor
from ..campaigns.skips import POOL_REQUESTER
from ..campaigns.types import (
    CampaignEnded,
    Conflict,
    DomainError,
    DuelOutcome,
    DuelPlan,
    End,
    Forbidden,
    HeldDuel,
    NotFound,
)
from ..models import utcnow
from ..money import reserve
from ..plain_values import jsonable
from .answers import answer_now
from .shared import CampaignConfig, DuelRow, config_of, not_handled, policy_at, remember_config

if TYPE_CHECKING:  # pragma: no cover
    from ..auth import Principal
    from .driver import Tx
    from .service_port import HotService


@dataclass
class _Pick:
    """The policy's choice: the pair, its position (without replacement), the pairs counted as
    pulled, the stores' costs recorded, and whether the policy's state must be written."""

    policy: Any
    pair: tuple[int, int]
    position: int | None
    pending: list
    costs_record: Any
    write_state: bool


async def decide_plan(
    svc: HotService, tx: Tx, campaign_id: int, principal: Principal | None, *, run: bool = False
) -> DuelPlan:
    """Plan a duel of ``campaign_id`` for ``principal`` (None: this process's background run,
    ``run`` true): refusals, stale duels expired, the campaign ended by its cap or budget, or
    the new duel inserted as ``calling``."""
    known = svc.config_cache.get(campaign_id)
    row, state, inflight, cfg_row = await tx.plan_reads(campaign_id, svc.policies.seq_of(campaign_id), known is None)
    if row is None:
        raise NotFound(f"campaign {campaign_id} not found")
    cfg = known if known is not None else remember_config(svc, campaign_id, cfg_row)
    now = utcnow()
    inflight = await _gate(
        svc, tx, campaign_id, cfg=cfg, row=row, inflight=inflight, principal=principal, run=run, now=now
    )
    await refuse_or_end(tx, campaign_id, cap_decision(campaign_id, row.max_duels, row.duels_judged, inflight), now)
    pick = await _pick(svc, tx, campaign_id, cfg=cfg, row=row, state=state, inflight=inflight)
    cfg = await config_of(svc, tx, campaign_id, max(pick.pair))  # a model added by a replacement elsewhere
    number = row.duels_created + 1
    prompt_index, a_is_i = draw_prompt_and_side(cfg.seed, number, cfg.n_prompts, cfg.draw_key)
    if pick.position is not None:
        assert cfg.draw_key is not None  # positions: sampling without replacement, keyed by the draw key
        prompt_index = svc.permutation(campaign_id, cfg.draw_key, cfg.n_prompts)[pick.position]
    prompt = svc.deps.prompts.cached_prompt(campaign_id, prompt_index)
    if prompt is None:
        prompt = svc.deps.prompts.remember_prompt(campaign_id, prompt_index, await tx.prompt(campaign_id, prompt_index))
    stored = await _stored(
        svc, tx, campaign_id, cfg=cfg, pair=pick.pair, a_is_i=a_is_i, idx=prompt_index, prompt=prompt
    )
    held = await tx.held(campaign_id, now) if stored.pregenerated else 0
    expected, over = reserve.duel_budget(
        campaign_id,
        row,
        models=cfg.models,
        judge=cfg.judge,
        pair=pick.pair,
        prompt=prompt,
        stored_answers=stored.answers,
        stored_orders=stored.orders,
        live=inflight,
        held_nusd=held,
    )
    await refuse_or_end(tx, campaign_id, over, now)
    duel = new_duel_columns(
        campaign_id,
        number=number,
        pair=pick.pair,
        draw=(prompt_index, a_is_i),
        prompt=prompt,
        reserved_nusd=expected,
        select_seq=row.event_seq + 1,
        pending=pick.pending,
        requested_by=principal.label if principal is not None else RUN_REQUESTER,
        now=now,
        # an annotator's duel: a lease the process calling its models renews every heartbeat
        # (Runs.beat), so a duel whose process died is freed within the lease, not the call timeout
        expires_at=now + (svc.call_lease if principal is not None and not principal.admin else svc.call_expiry),
    )
    if pick.position is not None:
        duel["position"] = pick.position
    return await _write(svc, tx, campaign_id, cfg=cfg, duel=duel, pick=pick, run=run, now=now)


async def refuse_or_end(tx: Tx, campaign_id: int, decision, now) -> None:
    """Raise a refusal (a decision below); an ending is written first (committed with the refusal)."""
    if isinstance(decision, End):
        await tx.finish(campaign_id, decision, now)
        raise decision.error
    if decision is not None:
        raise decision


async def _gate(
    svc: HotService, tx: Tx, campaign_id: int, *, cfg: CampaignConfig, row, inflight: list, principal, run: bool, now
) -> list:
    """Steps before any choice; returns the live in-flight duels. Raises a refusal, or
    :class:`HeldDuel` with the duel an annotator gets back instead of a new one."""
    refusal = access_refusal(campaign_id, row.status, cfg.judge.get("kind"), principal)
    if refusal is not None:
        raise refusal
    if not tx.covers(cfg, run):  # the caller chose the driver before the transaction
        raise not_handled(campaign_id)
    if run:
        refusal = run_refusal(row, svc.owner_id, inflight, now)
        if refusal is not None:
            raise refusal
    if cfg.hybrid:  # selected duels whose annotator's lease lapsed go back to the pool
        inflight = await tx.renew_selected(campaign_id, inflight, now)
    stale, inflight = split_stale(inflight, now)
    if stale:
        await tx.expire_stale(campaign_id, now)
    if principal is None or principal.admin:
        return inflight
    held = held_duel(inflight, principal.label, cfg.max_pending_per_annotator)
    if held is None and any(r.requested_by == POOL_REQUESTER for r in inflight):
        # a duel another annotator skipped (a hybrid campaign's: its own too, when nobody else can take it)
        held = await tx.claim_pooled(campaign_id, principal.label, now, cfg.hybrid)
    if cfg.hybrid:  # annotators vote only on the duels selected for a human
        held = await tx.claim_selected(held, now, svc.pending_expiry)
    if held is not None:
        raise HeldDuel(held)
    return inflight


async def _pick(svc: HotService, tx: Tx, campaign_id: int, *, cfg: CampaignConfig, row, state, inflight: list) -> _Pick:
    """The policy's pair; without replacement also its free position (a retryable Conflict when
    every useful pair waits for duels in flight or held)."""
    wor = is_wor(cfg.prompt_sampling)
    policy = await policy_at(
        svc, tx, campaign_id, event_seq=row.event_seq, fetched_state=state, state_seq=row.state_seq
    )
    # without replacement the policy computes its own marginal costs from the shared permutation
    costs_record = None if wor else store_settings.apply_costs(policy, svc.deps.stores.store_costs_for(campaign_id))
    pending = pending_pairs(inflight)
    if cfg.hybrid:  # judged duels waiting to be recorded in draw order count as pulled
        pending += await tx.unrecorded_pairs(campaign_id)
    # the selection is logged with the duel (costs_at_select, pending_at_select): only a hybrid
    # campaign, whose records the log does not replay, writes its state with every call (write_state)
    if not wor:
        pair = next_pair(policy, pending)  # the stored state is unchanged
        return _Pick(
            policy=policy,
            pair=pair,
            position=None,
            pending=pending,
            costs_record=costs_record,
            write_state=cfg.hybrid,
        )
    held = await tx.held_outcomes(campaign_id)  # judged, waiting for an earlier position of their pair
    pending += pending_pairs(held)
    try:
        pair = next_pair(policy, pending)
    except NoPairAvailable as exc:
        tx.after_commit = lambda: svc.policies.put(campaign_id, row.event_seq, policy)  # unchanged: back to the cache
        raise no_pair_error(len(inflight), len(held), str(exc)) from None
    position = await tx.free_position(campaign_id, pair, cfg.n_prompts)
    return _Pick(
        policy=policy, pair=pair, position=position, pending=pending, costs_record=None, write_state=cfg.hybrid
    )


async def _stored(
    svc: HotService, tx: Tx, campaign_id: int, *, cfg: CampaignConfig, pair, a_is_i: bool, idx: int, prompt: str
) -> store_lookup.DuelStores:
    """What the duel takes from the stores (it reserves nothing for that), and whether its campaign has holds."""

    async def reference() -> str | None:
        extras = svc.deps.prompts.cached_prompt_extras(campaign_id, idx)
        return extras[1] if extras is not None else await tx.reference(campaign_id, idx)

    i, j = pair
    return await store_lookup.stored_for_duel(
        svc.stored_keys,
        tx,
        answers=cfg.answers,
        verdicts=cfg.verdicts,
        models=cfg.models,
        judge=cfg.judge,
        i=i,
        j=j,
        a_is_i=a_is_i,
        prompt=prompt,
        reference=reference,
    )


async def _write(
    svc: HotService,
    tx: Tx,
    campaign_id: int,
    *,
    cfg: CampaignConfig,
    duel: dict,
    pick: _Pick,
    run: bool,
    now: dt.datetime,
) -> DuelPlan:
    """Insert the duel (answered at once when both models are instant) and update the campaign."""
    plan = new_plan(svc, campaign_id, cfg, duel)
    charges, columns = answer_now(svc, plan, now)
    duel.update(columns)
    failed = int(duel["status"] == DuelStatus.FAILED)
    seq = duel["select_seq"]
    campaign: dict[str, Any] = {
        "cid": campaign_id,
        "seq": seq,
        "created": duel["number"],
        "failed": failed,
        "spent": duel["cost_nusd"],
        "now": now,
        "run": run,  # a background run's duel takes one of its max_duels
    }
    if pick.costs_record is not None:  # the costs changed: the duel records them
        duel["costs_at_select"] = pick.costs_record
    if pick.write_state:  # the campaign keeps the policy's new state (at this seq)
        campaign["policy_state"] = jsonable(pick.policy.to_state())
    duel_id = await tx.plan_writes(duel, charges, campaign)
    policy = pick.policy
    tx.after_commit = lambda: svc.policies.put(campaign_id, seq, policy)
    plan.duel_id = duel_id
    if plan.results is not None:
        d = DuelRow(id=duel_id, **duel)
        plan.outcome = DuelOutcome(
            duel_id,
            duel["status"],
            failed=failed == 1,
            error=duel.get("error"),
            view=svc.deps.views.duel_view(d, SimpleNamespace(models=cfg.models, status=CampaignStatus.RUNNING)),
        )
    return plan


def new_plan(svc: HotService, campaign_id: int, cfg: CampaignConfig, duel: dict) -> DuelPlan:
    """The plan of a just planned duel (its columns ``duel``); ``duel_id`` is set once it is inserted."""
    return DuelPlan(
        campaign_id=campaign_id,
        duel_id=0,
        number=duel["number"],
        i=duel["model_i"],
        j=duel["model_j"],
        a_is_i=duel["a_is_i"],
        prompt=duel["prompt"],
        models=cfg.models,  # read only: shared with the cached configuration (no copy per duel)
        judge=dict(cfg.judge),
        tie_policy=cfg.tie_policy,
        seed=cfg.seed,
        prompt_index=duel["prompt_index"],
        answers=cfg.answers,
        verdicts=cfg.verdicts,
        draw_key=cfg.draw_key,
        deadline=call_deadline(svc.call_expiry),
        # an annotator's duel is leased while its models are called (renewed up to this hard expiry)
        hard_expiry=duel["created_at"] + svc.call_expiry
        if str(duel.get("requested_by") or "").startswith(ANNOTATOR_LABEL_PREFIX)
        else None,
    )


# ---------------------------------------------------------------- the decisions (pure: plain values in, a decision out)
def access_refusal(campaign_id: int, status: str, judge_kind: str | None, principal: Any) -> DomainError | None:
    """Why ``principal`` (None: a background run) may not plan a duel of this campaign, or None."""
    if principal is not None and not principal.can_access(campaign_id):
        return Forbidden("this token does not give access to this campaign")
    if status != CampaignStatus.RUNNING:
        return Conflict(f"campaign {campaign_id} has ended (status {status})")
    if (
        principal is not None and not principal.admin and judge_kind not in ("human", "hybrid")
    ):  # hybrid: annotators take its pool
        return Forbidden("annotators can only request duels of human-judged campaigns")
    return None


def run_refusal(c: Any, owner_id: str, inflight: Iterable[Any], now: dt.datetime) -> DomainError | None:
    """Why a background run may not start a duel now (``c``: the campaign's ``run_*`` fields), or None.

    The run's live duels in ``inflight`` fill its ``run_concurrency`` slots.
    """
    if not c.run_active:
        return Conflict("the run was stopped")
    if c.run_owner != owner_id:  # fencing: the lease went to another process
        return Conflict("the run is owned by another process")
    if c.run_remaining is not None and c.run_remaining <= 0:
        return Conflict("the run reached its max_duels")  # the loop ends; run_active drops later
    running = sum(1 for r in inflight if r.requested_by == RUN_REQUESTER and not is_stale(r.expires_at, now))
    if run_slots_full(running, c.run_concurrency):
        return Conflict(f"{running} duels of the run are in flight", retry_later=True)
    return None


def split_stale(inflight: Iterable[Any], now: dt.datetime) -> tuple[list[int], list[Any]]:
    """(ids of the in-flight duels past their expiry, to expire; the live ones)."""
    stale: list[Any] = []
    live: list[Any] = []
    for r in inflight:
        (stale if is_stale(r.expires_at, now) else live).append(r)
    return [int(r.id) for r in stale], live


def cap_decision(campaign_id: int, max_duels: int | None, duels_judged: int, live: list[Any]) -> End | Conflict | None:
    """``max_duels`` against the judged duels and the live in-flight ones (orphans never count).

    Reached with nothing in flight: the campaign ends (:class:`End`); reached counting duels in
    flight: wait for them (a retryable :class:`Conflict`); else None.
    """
    counting = [r for r in live if r.requested_by != ORPHAN_REQUESTER]
    if not max_duels_reached(max_duels, duels_judged, len(counting)):
        return None
    if counting:
        return Conflict(
            f"max_duels ({max_duels}) is reached counting the {len(counting)} duels in flight", retry_later=True
        )
    return End(
        CampaignStatus.STOPPED,
        f"max_duels ({max_duels}) reached",
        END_LIMIT_MAX_DUELS,
        CampaignEnded(f"campaign {campaign_id} has ended: max_duels ({max_duels}) reached"),
    )


def no_pair_error(in_flight: int, held: int, why: str) -> Conflict:
    """Without replacement, when the policy has no pair left: wait for the ``in_flight`` duels and
    the ``held`` judged ones (outcomes waiting for an earlier position), or nothing is left at all."""
    if in_flight or held:
        return Conflict(
            f"every useful pair is exhausted counting the {in_flight + held} "
            "duels in flight or waiting for an earlier position; retry once they settle",
            retry_later=True,
        )
    return Conflict(f"no pair is available and nothing is in flight ({why})")


def new_duel_columns(
    campaign_id: int,
    *,
    number: int,
    pair: tuple[int, int],
    draw: tuple[int, bool],
    prompt: str,
    reserved_nusd: int,
    select_seq: int,
    pending: list,
    requested_by: str,
    now: dt.datetime,
    expires_at: dt.datetime,
) -> dict[str, Any]:
    """The columns of a newly planned duel (status ``calling``), for every path that inserts one.

    Columns left out are NULL until the answers and the verdict arrive.
    """
    (i, j), (prompt_index, a_is_i) = pair, draw
    return dict(
        campaign_id=campaign_id,
        number=number,
        model_i=i,
        model_j=j,
        a_is_i=a_is_i,
        prompt_index=prompt_index,
        prompt=prompt,
        status=DuelStatus.CALLING,
        counted=False,
        cost_nusd=0,
        expected_cost_nusd=reserved_nusd,
        select_seq=select_seq,
        pending_at_select=pending,
        requested_by=requested_by,
        created_at=now,
        expires_at=expires_at,
    )
