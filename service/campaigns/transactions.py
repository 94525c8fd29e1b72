"""The campaign's write transactions (each one locks the campaign row first).

See :mod:`service.campaigns.service` for the life of a duel. Every decision goes
through :mod:`service.campaigns.rules`, as on the hot path.
"""

from __future__ import annotations

import datetime as dt
import logging
import secrets
import time
from typing import Any

from sqlalchemy import func, insert, select, update

from algorithms import NoPairAvailable
from algorithms.vocabulary import IN_FLIGHT, CampaignStatus, DuelStatus

from ..auth import Principal, hash_token, new_token
from ..clients import ClientError, Completion
from ..config import Settings
from ..models import Annotator, Campaign, Charge, Duel, Prompt, from_nusd, to_nusd, utcnow
from ..prompts import normalize_prompt
from ..redaction import configured_keys, redact, redact_json
from ..schemas import CampaignCreate
from . import holds, hybrid, hybrid_tx, ledger, rules, skips, stores
from .credentials import require_key_envs
from .leases import ORPHAN_REQUESTER, RUN_REQUESTER
from .policy_cache import PolicyCache, new_campaign_policy, policy_snapshot
from .rules import MAX_ERROR_CHARS, clean_text, finite_or_none, jsonable
from .types import (
    CampaignEnded,
    Conflict,
    DomainError,
    DuelOutcome,
    DuelPlan,
    Forbidden,
    HeldDuel,
    NotFound,
    Unprocessable,
)
from .webhooks import new_webhook_secret

log = logging.getLogger("llmduel.campaigns")


class CampaignTransactions:
    """The locked write transactions (synchronous: they run in worker threads)."""

    def init_transactions(self, settings: Settings) -> None:
        self.pending_expiry = dt.timedelta(seconds=settings.duel_expiry_seconds)  # a duel waiting for its verdict
        self.call_expiry = dt.timedelta(seconds=min(settings.call_timeout_seconds, settings.duel_expiry_seconds))
        self.policies = PolicyCache()
        self.config_cache: dict[int, Any] = {}  # campaign id -> hotpath.CampaignConfig (never changes)
        self._prompts: dict[tuple[int, int], str] = {}
        self._prompt_extras: dict[tuple[int, int], tuple[list[str] | None, str | None]] = {}
        self.stored_keys = stores.StoredKeys()  # store keys seen ready (they stay ready)

    def cached_prompt(self, campaign_id: int, idx: int) -> str | None:
        return self._prompts.get((campaign_id, idx))

    def remember_prompt(self, campaign_id: int, idx: int, text: str) -> str:
        """Prompts never change once a campaign exists: they are cached per process."""
        if len(self._prompts) >= 50_000:
            self._prompts.clear()
        self._prompts[(campaign_id, idx)] = text
        return text

    def cached_prompt_extras(self, campaign_id: int, idx: int) -> tuple[list[str] | None, str | None] | None:
        """:meth:`prompt_extras` from this process's cache only (None: not cached yet)."""
        return self._prompt_extras.get((campaign_id, idx))

    def prompt_extras(self, campaign_id: int, idx: int) -> tuple[list[str] | None, str | None]:
        """A prompt's user turns (None: a single turn) and reference answer; cached, they never change."""
        extras = self.cached_prompt_extras(campaign_id, idx)
        if extras is None:
            with self.db.read() as s:
                extras = self.prompt_extras_in(s, campaign_id, idx)
        return extras

    def prompt_extras_in(self, s, campaign_id: int, idx: int) -> tuple[list[str] | None, str | None]:
        """:meth:`prompt_extras` read in the caller's session ``s`` on a cache miss."""
        key = (campaign_id, idx)
        extras = self._prompt_extras.get(key)
        if extras is None:
            row = s.execute(
                select(Prompt.turns, Prompt.reference).where(Prompt.campaign_id == campaign_id, Prompt.idx == idx)
            ).first()
            extras = (row.turns, row.reference) if row is not None else (None, None)
            if len(self._prompt_extras) >= 50_000:
                self._prompt_extras.clear()
            self._prompt_extras[key] = extras
        return extras

    def prompt_text(self, s, campaign_id: int, idx: int) -> str:
        text = self.cached_prompt(campaign_id, idx)
        if text is None:
            text = self.remember_prompt(
                campaign_id,
                idx,
                s.execute(select(Prompt.text).where(Prompt.campaign_id == campaign_id, Prompt.idx == idx)).scalar_one(),
            )
        return text

    # ------------------------------------------------------------ sampling without replacement
    def permutation(self, c: Campaign) -> list[int]:
        """The campaign's secret prompt permutation (:func:`rules.prompt_permutation`), cached per process."""
        cache = self.__dict__.setdefault("_permutations", {})
        key = (int(c.id), c.draw_key, int(c.n_prompts))
        perm = cache.get(key)
        if perm is None:
            perm = rules.prompt_permutation(c.draw_key, c.n_prompts)
            if len(cache) >= 1000:
                cache.clear()
            cache[key] = perm
        return perm

    def wor_position(self, s, c: Campaign, i: int, j: int) -> int:
        """The lowest position of pair (i, j) neither judged nor in flight (stale duels are already expired)."""
        occupied = s.execute(
            select(Duel.position).where(
                Duel.campaign_id == c.id,
                Duel.model_i == i,
                Duel.model_j == j,
                Duel.position.is_not(None),
                Duel.status.in_((DuelStatus.JUDGED, *IN_FLIGHT)),
            )
        ).scalars()
        q = rules.free_position(occupied, c.n_prompts)
        if q is None:  # the policy never picks a pair whose positions are all taken (NoPairAvailable)
            raise Conflict(f"pair ({i}, {j}) has no free position", retry_later=True)
        return q

    def held_duels(self, s, campaign_id: int, pair: tuple[int, int] | None = None) -> list:
        """Judged duels whose outcome waits for an earlier position of their pair (``record_seq`` NULL)."""
        cond = [
            Duel.campaign_id == campaign_id,
            Duel.status == DuelStatus.JUDGED,
            Duel.position.is_not(None),
            Duel.score.is_not(None),
            Duel.record_seq.is_(None),
        ]
        if pair is not None:
            cond += [Duel.model_i == pair[0], Duel.model_j == pair[1]]
        return s.execute(
            select(Duel.id, Duel.model_i, Duel.model_j, Duel.position, Duel.score).where(*cond).order_by(Duel.id)
        ).all()

    def release_in_order(self, s, c: Campaign, policy, i: int, j: int) -> dict[int, int]:
        """Record pair (i, j)'s held outcomes that are next in position order; returns {duel id: record_seq}.

        Each one enters the policy with the next ``event_seq`` as its ``record_seq``, so replay (by
        sequence) sees them in the order the policy did. Stops at a gap or when the policy stops.
        """
        recorded = s.execute(
            select(func.count(Duel.id)).where(
                Duel.campaign_id == c.id, Duel.model_i == i, Duel.model_j == j, Duel.record_seq.is_not(None)
            )
        ).scalar_one()
        held: dict[int, Any] = {}
        for r in self.held_duels(s, c.id, (i, j)):
            held.setdefault(int(r.position), r)
        out: dict[int, int] = {}
        for r in rules.next_in_order(int(recorded), held):
            policy.record(i, j, float(r.score))
            c.event_seq += 1
            c.duels_counted += 1
            s.execute(
                update(Duel)
                .where(Duel.id == r.id)
                .values(record_seq=c.event_seq, counted=True)
                .execution_options(synchronize_session=False)
            )
            out[int(r.id)] = c.event_seq
            if policy.should_stop():
                break
        return out

    # ------------------------------------------------------------ create
    def create_campaign(self, body: CampaignCreate) -> int:
        require_key_envs([m.stored() for m in body.models], body.stored_judge())  # 422 before anything is stored
        costs = [m.cost for m in body.models]
        judge = body.stored_judge()
        population = len(body.prompts) if rules.is_wor(body.prompt_sampling) else None
        algorithm = body.algorithm
        if hybrid.is_hybrid(judge):  # hybrid hook: dctas-pc-hybrid with the human fee and rate
            policy, algorithm = hybrid.new_policy(judge, costs, body.delta), hybrid.ALGORITHM
        else:
            policy = new_campaign_policy(
                body.algorithm, costs, body.delta, rules.judge_cost_per_duel(judge), population
            )
        state, counts, stats, leader = policy_snapshot(policy)
        now = utcnow()
        seed = body.seed if body.seed is not None else secrets.randbelow(2**62)
        campaign = Campaign(
            name=body.name,
            algorithm=algorithm,
            delta=body.delta,
            tie_policy=body.tie_policy,
            answers=body.answers,
            verdicts=body.verdicts,
            prompt_sampling=body.prompt_sampling,
            status=CampaignStatus.RUNNING,
            models=[m.stored() for m in body.models],
            n_prompts=len(body.prompts),
            judge=judge,
            budget_nusd=to_nusd(body.budget) if body.budget is not None else None,
            max_duels=body.max_duels,
            seed=seed,
            draw_key=rules.new_draw_key(),
            max_pending_per_annotator=body.max_pending_per_annotator,
            webhook_url=body.webhook_url,
            webhook_secret=new_webhook_secret() if body.webhook_url else None,
            policy_state=state,
            counts=counts,
            stats=stats,
            leader=leader,
            winner=None,
            event_seq=0,
            spend_nusd=0,
            judge_spend_nusd=0,
            duels_created=0,
            duels_judged=0,
            duels_counted=0,
            duels_failed=0,
            run_active=False,
            run_concurrency=1,
            webhook_state="none",
            version=0,
            created_at=now,
            updated_at=now,
        )
        with self.db.write() as s:
            s.add(campaign)
            s.flush()
            s.execute(
                insert(Prompt),
                [
                    {"campaign_id": campaign.id, "idx": n, **normalize_prompt(item)}
                    for n, item in enumerate(body.prompts)
                ],
            )
            return int(campaign.id)

    def create_annotator(self, campaign_id: int, label: str | None) -> dict:
        token = new_token()
        with self.db.write() as s:
            self.lock_existing(s, campaign_id)
            row = Annotator(campaign_id=campaign_id, token_hash=hash_token(token), label=label, created_at=utcnow())
            s.add(row)
            s.flush()
            return {"id": int(row.id), "campaign_id": campaign_id, "label": label, "token": token}

    # ------------------------------------------------------------ state transitions
    def finish(
        self,
        s,
        c: Campaign,
        status: str,
        reason: str,
        now: dt.datetime,
        keep_duel: int | None = None,
        limit: str | None = None,
    ) -> None:
        """End a running campaign: in-flight duels are cancelled, the run stops.

        ``limit``: the limit that ended it (``rules.END_LIMITS``), so that raising it continues the campaign.
        """
        c.status = status
        c.end_reason = reason
        c.end_limit = limit
        c.ended_at = now
        c.run_active = False
        c.run_owner = None
        c.run_lease_expires_at = None
        self.enqueue_webhook(s, c, now)  # the outbox row commits with the end, or not at all
        cond = [Duel.campaign_id == c.id, Duel.status.in_(IN_FLIGHT)]
        if keep_duel is not None:
            cond.append(Duel.id != keep_duel)
        s.execute(
            update(Duel)
            .where(*cond)
            .values(status=DuelStatus.CANCELLED, error="the campaign ended before this duel was judged")
            .execution_options(synchronize_session=False)
        )

    def pause_for_fault(self, s, c: Campaign, fault: str, now: dt.datetime, keep_duel: int | None = None) -> None:
        """Pause a running campaign on a provider fault (:mod:`.ledger`): it ends as stopped with
        ``end_limit = 'provider'``, and a PATCH of its limits continues it (rules.continue_refusal)."""
        if c.status == CampaignStatus.RUNNING:
            reason = f"paused on a provider fault: {fault}; fix the provider, then continue with PATCH"
            self.finish(s, c, CampaignStatus.STOPPED, reason, now, keep_duel, limit=ledger.END_LIMIT_PROVIDER)

    def plan_duel_tx(self, campaign_id: int, principal: Principal | None, run: bool = False) -> DuelPlan:
        """Step 1 of a duel (locked): choose the pair and insert the duel as calling."""
        t0 = time.perf_counter()
        err: DomainError | None = None
        held: int | None = None
        with self.db.write() as s:
            c = self.lock_existing(s, campaign_id)
            if principal is not None and not principal.can_access(campaign_id):
                raise Forbidden("this token does not give access to this campaign")
            if c.status != CampaignStatus.RUNNING:
                raise Conflict(f"campaign {campaign_id} has ended (status {c.status})")
            automatic = c.judge.get("kind") not in ("human", hybrid.KIND)  # hybrid hook: annotators take its pool
            if principal is not None and not principal.admin and automatic:
                raise Forbidden("annotators can only request duels of human-judged campaigns")
            if run:
                if not c.run_active:
                    raise Conflict("the run was stopped")
                if c.run_owner != self.owner_id:  # fencing: the lease went to another process
                    raise Conflict("the run is owned by another process")
                if c.run_remaining is not None and c.run_remaining <= 0:
                    raise Conflict("the run reached its max_duels")  # the loop ends; run_active drops later
                run_in_flight = s.execute(
                    select(func.count(Duel.id)).where(
                        Duel.campaign_id == campaign_id,
                        Duel.status.in_(IN_FLIGHT),
                        Duel.requested_by == RUN_REQUESTER,
                        Duel.expires_at > utcnow(),
                    )
                ).scalar_one()
                if rules.run_slots_full(run_in_flight, c.run_concurrency):
                    raise Conflict(f"{run_in_flight} duels of the run are in flight", retry_later=True)
            if err is None:
                now = utcnow()
                inflight = s.execute(
                    select(
                        Duel.id,
                        Duel.model_i,
                        Duel.model_j,
                        Duel.expected_cost_nusd,
                        Duel.expires_at,
                        Duel.requested_by,
                    ).where(Duel.campaign_id == campaign_id, Duel.status.in_(IN_FLIGHT))
                ).all()
                inflight = hybrid_tx.renew_selected(s, c, inflight, now)  # hybrid hook
                stale = [r.id for r in inflight if rules.is_stale(r.expires_at, now)]
                if stale:
                    s.execute(
                        update(Duel)
                        .where(Duel.id.in_(stale), Duel.status.in_(IN_FLIGHT))
                        .values(status=DuelStatus.EXPIRED)
                        .execution_options(synchronize_session=False)
                    )
                    inflight = [r for r in inflight if not rules.is_stale(r.expires_at, now)]
                if principal is not None and not principal.admin:
                    held = rules.held_duel(inflight, principal.label, c.max_pending_per_annotator)
                    if held is None:  # a duel another annotator skipped comes before a new one
                        held = skips.claim_pooled(s, campaign_id, principal.label)
                    if hybrid.is_hybrid(c.judge):  # hybrid hook: annotators only vote on selected duels
                        held, err = hybrid_tx.claimed(s, c, held, now, self.pending_expiry)
            if err is None and held is None:
                counting = [r for r in inflight if r.requested_by != ORPHAN_REQUESTER]  # orphans never count
                if rules.max_duels_reached(c.max_duels, c.duels_judged, len(counting)):
                    if not counting:
                        self.finish(
                            s,
                            c,
                            CampaignStatus.STOPPED,
                            f"max_duels ({c.max_duels}) reached",
                            now,
                            limit=rules.END_LIMIT_MAX_DUELS,
                        )
                        err = CampaignEnded(f"campaign {campaign_id} has ended: max_duels ({c.max_duels}) reached")
                    else:
                        err = Conflict(
                            f"max_duels ({c.max_duels}) is reached counting the {len(counting)} duels in flight",
                            retry_later=True,
                        )
            if err is None and held is None:
                wor = rules.is_wor(c.prompt_sampling)
                policy = self.policies.take(c.id, c.event_seq, c.policy_state)
                # without replacement the policy computes its own marginal costs from the shared permutation
                costs_record = None if wor else stores.apply_costs(policy, self.store_costs_for(c.id))
                pending = rules.pending_pairs(inflight)
                pending += hybrid_tx.held_pairs(s, c)  # hybrid hook: judged duels waiting to be recorded
                position = None
                if wor:
                    # judged duels waiting for an earlier position of their pair count as in flight
                    held_rows = self.held_duels(s, campaign_id)
                    pending += rules.pending_pairs(held_rows)
                    try:
                        i, j = rules.ordered_pair(*policy.next_pair(pending=pending))
                        position = self.wor_position(s, c, i, j)
                    except NoPairAvailable as exc:  # err, not raise: the stale duels above stay expired
                        if inflight or held_rows:
                            err = Conflict(
                                f"every useful pair is exhausted counting the {len(inflight) + len(held_rows)} "
                                "duels in flight or waiting for an earlier position; retry once they settle",
                                retry_later=True,
                            )
                        else:
                            err = Conflict(f"no pair is available and nothing is in flight ({exc})")
                        # next_pair changed nothing: the policy goes back to the cache
                        s.info["after_commit"] = lambda p=policy, seq=c.event_seq: self.policies.put(
                            campaign_id, seq, p
                        )
                else:
                    i, j = rules.ordered_pair(*policy.next_pair(pending=pending))
            if err is None and held is None:
                number = c.duels_created + 1
                prompt_index, a_is_i = rules.draw_prompt_and_side(c.seed, number, c.n_prompts, c.draw_key)
                if position is not None:
                    prompt_index = self.permutation(c)[position]
                prompt_text = self.prompt_text(s, campaign_id, prompt_index)
                # the reservation bounds what the duel may still pay (stored as expected_cost_nusd)
                expected = self.duel_reservation(s, c, i, j, a_is_i, prompt_index, prompt_text)
                pregen_held = holds.held_nusd(s, campaign_id, now)  # pre-generation calls in flight
                reserved = rules.reserved_nusd(inflight, pregen_held)
                if rules.over_budget(c.budget_nusd, c.spend_nusd, reserved, expected):
                    if not inflight and not pregen_held:
                        self.finish(
                            s,
                            c,
                            CampaignStatus.BUDGET_EXHAUSTED,
                            f"the next duel's cost bound ({expected / 1e9:.6g} USD) exceeds the "
                            f"remaining budget ({(rules.effective_budget(c.budget_nusd) - c.spend_nusd) / 1e9:.6g} USD)",
                            now,
                            limit=rules.END_LIMIT_BUDGET if c.budget_nusd is not None else None,
                        )
                        err = CampaignEnded(f"campaign {campaign_id} has ended: budget exhausted")
                    else:
                        err = Conflict(
                            f"the remaining budget is reserved by {len(inflight)} duels in flight"
                            + (" and answers being pre-generated" if pregen_held else ""),
                            retry_later=True,
                        )
            if err is None and held is None:
                c.event_seq += 1
                if run and c.run_remaining is not None:
                    c.run_remaining -= 1  # only for a duel that starts (a refused plan leaves it)
                duel = Duel(
                    **rules.new_duel_columns(
                        campaign_id,
                        number,
                        (i, j),
                        (prompt_index, a_is_i),
                        prompt_text,
                        expected,
                        c.event_seq,
                        pending,
                        principal.label if principal is not None else RUN_REQUESTER,
                        now,
                        now + self.call_expiry,
                    )
                )
                duel.costs_at_select = costs_record
                duel.position = position
                state = jsonable(policy.to_state())
                if state != c.policy_state:  # set_costs (marginal costs given the stores) changed the state
                    c.policy_state = state
                c.duels_created = number
                s.info["after_commit"] = lambda p=policy, seq=c.event_seq: self.policies.put(campaign_id, seq, p)
                c.version += 1
                c.updated_at = now
                plan = DuelPlan(
                    campaign_id=campaign_id,
                    duel_id=0,
                    number=number,
                    i=i,
                    j=j,
                    a_is_i=a_is_i,
                    prompt=duel.prompt,
                    models=[dict(m) for m in c.models],
                    judge=dict(c.judge),
                    tie_policy=c.tie_policy,
                    seed=int(c.seed),
                    prompt_index=prompt_index,
                    answers=c.answers,
                    verdicts=c.verdicts,
                    draw_key=c.draw_key,
                    deadline=rules.call_deadline(self.call_expiry),
                )
                charges, columns = self.answer_now(plan, now)
                for key, value in columns.items():
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
                        duel.id,
                        duel.status,
                        failed=duel.error is not None,
                        error=duel.error,
                        view=self.duel_view(duel, c),
                    )
        if err is not None:
            raise err
        if held is not None:
            raise HeldDuel(held)
        plan.select_ms = (time.perf_counter() - t0) * 1000.0
        return plan

    def duel_reservation(self, s, c: Campaign, i: int, j: int, a_is_i: bool, prompt_index: int, prompt: str) -> int:
        """:func:`rules.reserve_duel_nusd` given what the stores already hold (read in session ``s``)."""

        async def reference() -> str | None:
            return self.prompt_extras_in(s, c.id, prompt_index)[1]

        have, orders = stores.run_now(
            stores.stored_for_duel(
                self.stored_keys,
                stores.SessionLookup(s),
                c.answers,
                c.verdicts,
                c.models,
                c.judge,
                i,
                j,
                a_is_i,
                prompt,
                reference,
            )
        )
        return rules.reserve_duel_nusd(
            c.models, i, j, c.judge, prompt, c.judge_spend_nusd, c.duels_judged + c.duels_failed, have, orders
        )

    def secret_keys(self, models: list, judge: dict) -> tuple[str, ...]:
        """The keys a campaign's stored text must not contain (service.redaction)."""
        return configured_keys(models, judge, extra=(self.settings.api_key,))

    def _settle_answers(self, plan: DuelPlan, results: dict[int, Any], now: dt.datetime):
        """What both calls' results mean for the duel.

        Returns (charges, total, fields, error, faults): the charge rows (without
        ``duel_id``) for what the answers cost (:func:`ledger.model_charge`: at most
        each call's bound), their sum in nano-USD, the duel's answer columns, the
        failure message (None when both answered) and the provider faults (the
        models whose reported usage exceeded their bound: the duel fails).
        """
        errors: list[str] = []
        faults: dict[int, str] = {}
        charges: list[dict] = []
        info: dict[int, dict] = {}
        keys = self.secret_keys(plan.models, plan.judge)
        for idx in (plan.i, plan.j):
            res = results[idx]
            name = plan.models[idx]["name"]
            if isinstance(res, stores.Stored):  # reused: a zero-cost ledger row naming the charge that paid
                info[idx] = {
                    "model": name,
                    "input_tokens": res.input_tokens,
                    "output_tokens": res.output_tokens,
                    "cost": 0.0,
                    "reused_answer": res.id,
                }
                charges.append(stores.reuse_charge(plan.campaign_id, "model", idx, res, now))
            elif isinstance(res, Completion):
                charge = ledger.model_charge(plan.models[idx], plan.prompt, res)
                amount = charge.amount_nusd
                info[idx] = {
                    "model": name,
                    "input_tokens": res.input_tokens,
                    "output_tokens": res.output_tokens,
                    "cost": from_nusd(amount),
                    "latency_s": finite_or_none(res.latency_s),
                    "attempts": res.attempts,
                    **charge.detail(),
                }
                if charge.fault is not None:
                    faults[idx] = charge.fault
                    errors.append(f"provider fault: {charge.fault}")
                if amount:
                    charges.append(
                        {
                            "campaign_id": plan.campaign_id,
                            "kind": "model",
                            "model_index": idx,
                            "amount_nusd": amount,
                            "created_at": now,
                            "detail": {
                                "input_tokens": res.input_tokens,
                                "output_tokens": res.output_tokens,
                                **charge.detail(),
                            },
                        }
                    )
            else:
                message = redact(_error_text(res), keys)
                info[idx] = {"model": name, "error": message}
                errors.append(f"model {name!r}: {message}")
        total = sum(ch["amount_nusd"] for ch in charges)
        fields: dict[str, Any] = {"completion_a": info.get(plan.model_a), "completion_b": info.get(plan.model_b)}
        error = None
        if errors:
            error = clean_text("; ".join(errors), MAX_ERROR_CHARS)
        else:
            fields.update(
                answer_a=redact(clean_text(results[plan.model_a].text), keys),
                answer_b=redact(clean_text(results[plan.model_b].text), keys),
                answered_at=now,
            )
        return charges, total, fields, error, faults

    def answer_now(self, plan: DuelPlan, now: dt.datetime) -> tuple[list[dict], dict[str, Any]]:
        """Both answers inside the plan transaction, when both models are instant.

        Sets ``plan.results`` and returns (charges, the duel's columns) as
        :meth:`store_answers_tx` would record them; ([], {}) when the models must
        be called outside the transaction.
        """
        plan.results = self.instant_results(plan)
        if plan.results is None:
            return [], {}
        # instant models are simulated ones, charged their fixed cost: their bound (no provider fault)
        charges, total, columns, error, _ = self._settle_answers(plan, plan.results, now)
        columns["cost_nusd"] = total
        if error is not None:
            columns.update(status=DuelStatus.FAILED, error=error)
        else:
            columns.update(status=DuelStatus.PENDING, expires_at=now + self.pending_expiry)
        return charges, columns

    def store_answers_tx(self, plan: DuelPlan, results: dict[int, Any]) -> DuelOutcome:
        """Step 3 (locked): charges for what the calls really cost, answers or failure."""
        now = utcnow()
        # Before the lock: cleaning and masking (service.redaction) a long answer takes a while.
        charges, total, fields, error, faults = self._settle_answers(plan, results, now)
        with self.db.write() as s:
            c = self.db.lock_campaign(s, plan.campaign_id)
            d = s.get(Duel, plan.duel_id)
            if c is None or d is None:  # deleted meanwhile
                return DuelOutcome(plan.duel_id, "missing", failed=True, error="campaign or duel deleted")
            s.expunge(d)  # changed below by one explicit UPDATE
            late = rules.is_stale(d.expires_at, now) and bool(charges or faults)
            if late:
                # Its calls returned after the duel's hard deadline (the process stalled past it): the
                # budget stopped holding the reservation then, so the ledger cannot take the charge
                # (docs/reliability.md, Ledger: the assumption left). Nothing of it is kept.
                lost = sum(ch["amount_nusd"] for ch in charges)
                log.warning("duel %s: calls returned after its hard deadline; %d nUSD not charged", d.id, lost)
                charges, total, faults, fields = [], 0, {}, {}
                error = f"its calls returned after the duel's hard deadline; {lost / 1e9:.9g} USD not charged"
            charge_ids: dict[int, int] = {}
            for ch in charges:
                charge_ids[ch["model_index"]] = s.execute(
                    insert(Charge).values(**ch, duel_id=d.id).returning(Charge.id)
                ).scalar_one()
            for idx, claim in plan.claims.items():  # answers paid by this duel join the store with their charge
                res = results.get(idx) if isinstance(idx, int) else None
                if isinstance(res, Completion) and idx not in faults and not late:  # nor a faulty or late one
                    stores.finalize_answer(
                        s,
                        claim,
                        res,
                        redact(clean_text(res.text), self.secret_keys(c.models, c.judge)),
                        next((ch["amount_nusd"] for ch in charges if ch["model_index"] == idx), 0),
                        charge_ids.get(idx),
                    )
            d.cost_nusd += total
            c.spend_nusd += total
            for key, value in fields.items():
                setattr(d, key, value)
            if d.requested_by == ORPHAN_REQUESTER and d.status in IN_FLIGHT:
                d.status = DuelStatus.EXPIRED  # paid for, never counted: its run has another owner
            elif error is not None:
                d.error = error
                if d.status in IN_FLIGHT:
                    d.status = DuelStatus.FAILED
                    c.duels_failed += 1
            elif d.status == DuelStatus.CALLING:
                d.status = DuelStatus.PENDING
                d.expires_at = now + self.pending_expiry
            s.execute(
                update(Duel)
                .where(Duel.id == d.id)
                .values(
                    status=d.status,
                    error=d.error,
                    cost_nusd=d.cost_nusd,
                    completion_a=d.completion_a,
                    completion_b=d.completion_b,
                    answer_a=d.answer_a,
                    answer_b=d.answer_b,
                    answered_at=d.answered_at,
                    expires_at=d.expires_at,
                )
                .execution_options(synchronize_session=False)
            )
            if faults:
                self.pause_for_fault(s, c, next(iter(faults.values())), now, d.id)
            # A spent budget ends the campaign when this duel's verdict is recorded
            # (or at the next plan), so the answers just paid for can still count.
            c.version += 1
            c.updated_at = now
            return DuelOutcome(d.id, d.status, failed=error is not None, error=d.error, view=self.duel_view(d, c))

    def record_verdict_tx(
        self,
        duel_id: int,
        choice: str | None,
        *,
        judged_by: str,
        principal: Principal | None = None,
        judge_cost: float = 0.0,
        judge_detail: dict | None = None,
        judge_error: str | None = None,
        judge_score: float | None = None,
        verdict_claim: stores.Claim | None = None,
        stored_choice: str | None = None,
        reused_verdict: stores.Stored | None = None,
    ) -> DuelOutcome:
        """Step 4 (locked): a vote or an automatic verdict, counted exactly once.

        ``verdict_claim``: the verdict store row this judgement was paid for; it is
        stored (``stored_choice``, in the stored order) with its charge when the judge
        gave a verdict. ``reused_verdict``: the verdict came from the store (a zero-cost
        ledger row names the charge that paid for it).

        The duel moves pending -> judged by a conditional UPDATE (``WHERE status =
        'pending'``) in the same transaction as the policy update; a duplicate
        finds no pending row and gets 409.
        """
        err: DomainError | None = None
        outcome: DuelOutcome | None = None
        with self.db.write() as s:
            # Lock the duel's campaign in one statement.
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
            if (
                principal is not None
                and not principal.admin
                and not rules.annotator_owns(d.requested_by, principal.label)
            ):
                raise NotFound(f"duel {duel_id} not found")  # another annotator's duel
            if hybrid.is_hybrid(c.judge):  # hybrid hook: a human vote on a selected duel
                return hybrid_tx.record_human_vote(self, s, c, d, choice, principal or Principal(admin=True))
            s.expunge(d)  # changed below by one conditional UPDATE
            now = utcnow()
            judge_nusd, judge_fault, fault_detail = 0, None, {}
            if judge_cost and rules.is_stale(d.expires_at, now):  # past the hard deadline (see store_answers_tx)
                log.warning("duel %s: the judge returned after its hard deadline; not charged", d.id)
            elif judge_cost:  # what a judge call is charged: at most its bound (ledger)
                reference = self.prompt_extras_in(s, c.id, d.prompt_index)[1]
                charge = ledger.judge_charge(c.judge, d.prompt, reference, judge_cost, judge_detail)
                judge_nusd, judge_fault, fault_detail = charge.amount_nusd, charge.fault, charge.detail()
                if judge_fault is not None:  # the verdict of a lying judge is not counted
                    choice, judge_error = None, f"provider fault: {judge_fault}"
                    judge_detail = {**(judge_detail or {}), **fault_detail}
            judge_charge_id = None
            if reused_verdict is not None:
                s.execute(
                    insert(Charge).values(**stores.reuse_charge(c.id, "judge", None, reused_verdict, now), duel_id=d.id)
                )
            if judge_nusd:
                # A judge call is charged whatever happens to its verdict.
                judge_charge_id = s.execute(
                    insert(Charge)
                    .values(
                        campaign_id=c.id,
                        duel_id=d.id,
                        kind="judge",
                        model_index=None,
                        amount_nusd=judge_nusd,
                        detail=fault_detail or None,
                        created_at=now,
                    )
                    .returning(Charge.id)
                ).scalar_one()
            if verdict_claim is not None and choice is not None and stored_choice is not None:
                stores.finalize_verdict(
                    s,
                    verdict_claim,
                    stored_choice,
                    jsonable(judge_detail) if judge_detail else None,
                    judge_nusd,
                    judge_charge_id,
                )
            if judge_nusd:
                d.cost_nusd += judge_nusd
                c.spend_nusd += judge_nusd
                c.judge_spend_nusd += judge_nusd
            if d.status == DuelStatus.PENDING and d.requested_by == ORPHAN_REQUESTER:
                d.status = DuelStatus.EXPIRED  # its run has another owner: never counted
                err = Conflict(f"duel {duel_id}: {d.error}")
            elif d.status != DuelStatus.PENDING:
                err = Conflict(_not_pending_message(d))
            elif rules.is_stale(d.expires_at, now):
                d.status = DuelStatus.EXPIRED
                err = Conflict(f"duel {duel_id} expired at {d.expires_at.isoformat()} and no longer counts")
            elif c.status != CampaignStatus.RUNNING:
                err = Conflict(f"campaign {c.id} has ended (status {c.status})")
            if err is not None:
                if judge_fault is not None:  # a stale duel or an ended campaign: the fault still pauses it
                    self.pause_for_fault(s, c, judge_fault, now)
                if d.status == DuelStatus.EXPIRED or judge_nusd:
                    s.execute(
                        update(Duel)
                        .where(Duel.id == d.id)
                        .values(status=d.status, cost_nusd=d.cost_nusd)
                        .execution_options(synchronize_session=False)
                    )
                    c.version += 1
                    c.updated_at = now
            else:
                fee_nusd = rules.vote_fee_nusd(c.judge) if principal is not None else 0
                if fee_nusd:  # a human judge's fee: charged once per recorded vote
                    s.execute(
                        insert(Charge),
                        [
                            {
                                "campaign_id": c.id,
                                "duel_id": d.id,
                                "kind": "judge",
                                "model_index": None,
                                "amount_nusd": fee_nusd,
                                "created_at": now,
                            }
                        ],
                    )
                    d.cost_nusd += fee_nusd
                    c.spend_nusd += fee_nusd
                    c.judge_spend_nusd += fee_nusd
                d.judged_at = now
                d.judged_by = judged_by
                wor = rules.is_wor(c.prompt_sampling) and d.position is not None
                keys = self.secret_keys(c.models, c.judge)
                d.judge_detail = redact_json(jsonable(judge_detail), keys) if judge_detail else None
                score = None
                if choice is None:
                    d.status = DuelStatus.FAILED
                    d.error = clean_text(redact(f"judge error: {judge_error or 'no verdict'}", keys), MAX_ERROR_CHARS)
                else:
                    d.status = DuelStatus.JUDGED
                    d.choice = choice
                    score = rules.score_of(
                        choice,
                        d.model_i,
                        d.model_a,
                        d.model_b,
                        c.tie_policy,
                        c.seed,
                        d.number,
                        judge_score,
                        draw_key=c.draw_key,
                    )
                    if score is not None:
                        d.score = score
                        if not wor:  # without replacement: recorded below, in position order
                            d.counted = True
                            d.record_seq = c.event_seq + 1
                claimed = s.execute(
                    update(Duel)
                    .where(Duel.id == duel_id, Duel.status == DuelStatus.PENDING)
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
                    raise Conflict(f"duel {duel_id} already has a verdict")
                ended = False
                if choice is None:
                    c.duels_failed += 1
                else:
                    c.duels_judged += 1
                    recorded = 0
                    if score is not None:
                        policy = self.policies.take(c.id, c.event_seq, c.policy_state)
                        if wor:
                            # The pair's outcomes enter the policy in position order: this one waits
                            # (held in its row) while an earlier position is in flight (docs/reuse.md).
                            released = self.release_in_order(s, c, policy, d.model_i, d.model_j)
                            recorded = len(released)
                            if d.id in released:
                                d.counted, d.record_seq = True, released[d.id]
                            else:  # held: the policy is unchanged, back in the cache
                                s.info["after_commit"] = lambda p=policy, seq=c.event_seq, cid=c.id: self.policies.put(
                                    cid, seq, p
                                )
                        else:
                            policy.record(d.model_i, d.model_j, score)
                            c.event_seq += 1
                            c.duels_counted += 1
                            recorded = 1
                    if recorded:
                        c.policy_state, c.counts, c.stats, c.leader = policy_snapshot(policy)
                        s.info["after_commit"] = lambda p=policy, seq=c.event_seq, cid=c.id: self.policies.put(
                            cid, seq, p
                        )
                        if policy.should_stop():
                            if getattr(policy, "verdict", None) == CampaignStatus.UNDECIDABLE:
                                self.finish(
                                    s,
                                    c,
                                    CampaignStatus.UNDECIDABLE,
                                    f"no model can be certified on this prompt set ({c.n_prompts} prompts, "
                                    f"sampled without replacement): no pair left can decide between the models "
                                    f"not shown to lose (the {c.algorithm} certificates at delta={c.delta:g})",
                                    now,
                                    keep_duel=d.id,
                                )
                            elif getattr(policy, "verdict", None) == CampaignStatus.NO_CONDORCET_WINNER:
                                self.finish(
                                    s,
                                    c,
                                    CampaignStatus.NO_CONDORCET_WINNER,
                                    f"every model was shown to lose to another (the {c.algorithm} "
                                    f"certificates at delta={c.delta:g}): no Condorcet winner",
                                    now,
                                    keep_duel=d.id,
                                )
                            else:
                                c.winner = int(policy.recommendation())
                                c.leader = c.winner
                                self.finish(
                                    s,
                                    c,
                                    CampaignStatus.CERTIFIED,
                                    f"certified by the {c.algorithm} stopping rule at delta={c.delta:g}",
                                    now,
                                    keep_duel=d.id,
                                )
                            ended = True
                    if not ended and rules.max_duels_reached(c.max_duels, c.duels_judged):
                        self.finish(
                            s,
                            c,
                            CampaignStatus.STOPPED,
                            f"max_duels ({c.max_duels}) reached",
                            now,
                            keep_duel=d.id,
                            limit=rules.END_LIMIT_MAX_DUELS,
                        )
                        ended = True
                if not ended and rules.budget_spent(c.budget_nusd, c.spend_nusd):
                    self.finish(
                        s,
                        c,
                        CampaignStatus.BUDGET_EXHAUSTED,
                        "spend reached the budget",
                        now,
                        keep_duel=d.id,
                        limit=rules.END_LIMIT_BUDGET if c.budget_nusd is not None else None,
                    )
                    ended = True
                if judge_fault is not None and not ended:
                    self.pause_for_fault(s, c, judge_fault, now, d.id)
                    ended = True
                c.version += 1
                c.updated_at = now
                outcome = DuelOutcome(
                    d.id, d.status, ended=ended, failed=choice is None, error=d.error, view=self.duel_view(d, c)
                )
        if err is not None:
            raise err
        return outcome

    def stop_tx(self, campaign_id: int, reason: str = "stopped by the admin") -> bool:
        with self.db.write() as s:
            c = self.lock_existing(s, campaign_id)
            if c.status != CampaignStatus.RUNNING:
                raise Conflict(f"campaign {campaign_id} has already ended (status {c.status})")
            now = utcnow()
            self.finish(s, c, CampaignStatus.STOPPED, reason, now)
            c.version += 1
            c.updated_at = now
            return True

    def update_limits_tx(self, campaign_id: int, budget: float | None, max_duels: int | None) -> bool:
        """Set a campaign's budget and/or duel cap (PATCH); continue it if it had ended on one of them.

        422 (:class:`Unprocessable`) for a limit below what is already spent or
        judged, or a budget the campaign's clients cannot reserve against; 409
        (:class:`Conflict`) for an ended campaign that does not continue
        (:func:`rules.continue_refusal`). A continued campaign keeps its policy
        state, counters and ledger; its run stays off (POST /run starts one) and
        its ``campaign.ended`` webhook fires again at the next ending. Returns
        True when the campaign went back to running.
        """
        new_budget = to_nusd(budget) if budget is not None else None
        with self.db.write() as s:
            c = self.lock_existing(s, campaign_id)
            now = utcnow()
            inflight = [
                r
                for r in s.execute(
                    select(Duel.expected_cost_nusd, Duel.expires_at, Duel.requested_by).where(
                        Duel.campaign_id == campaign_id, Duel.status.in_(IN_FLIGHT)
                    )
                ).all()
                if not rules.is_stale(r.expires_at, now) or hybrid_tx.waits_for_human(c, r)  # hybrid hook
            ]
            reason = rules.limit_below_use(
                new_budget,
                c.spend_nusd,
                rules.reserved_nusd(inflight, holds.held_nusd(s, campaign_id, now)),
                max_duels,
                c.duels_judged,
                len(inflight),
            )
            if reason is not None:
                raise Unprocessable(reason)
            if new_budget is not None and c.budget_nusd is None:
                why = rules.unbounded_cost_reason(c.models, c.judge)
                if why is not None:
                    raise Unprocessable(why)
            budget_nusd = new_budget if new_budget is not None else c.budget_nusd
            cap = max_duels if max_duels is not None else c.max_duels
            resumed = False
            if c.status != CampaignStatus.RUNNING:
                refusal = rules.continue_refusal(
                    c.status,
                    c.end_limit,
                    new_budget is not None and (c.budget_nusd is None or new_budget > c.budget_nusd),
                    max_duels is not None and (c.max_duels is None or max_duels > c.max_duels),
                    budget_nusd,
                    c.spend_nusd,
                    cap,
                    c.duels_judged,
                )
                if refusal is not None:
                    raise Conflict(f"campaign {campaign_id}: {refusal}")
                hybrid_tx.revive_selected(s, c, budget_nusd, now)  # hybrid hook: its pool as it was
                c.status = CampaignStatus.RUNNING
                c.end_reason = None
                c.end_limit = None
                c.ended_at = None
                if c.webhook_state != "sending":  # the next ending sends its own campaign.ended
                    c.webhook_state = "none"
                    c.webhook_error = None
                resumed = True
            c.budget_nusd = budget_nusd
            c.max_duels = cap
            c.version += 1
            c.updated_at = now
        return resumed

    def start_run_tx(self, campaign_id: int, max_duels: int | None, concurrency: int) -> dict:
        with self.db.write() as s:
            c = self.lock_existing(s, campaign_id)
            if c.status != CampaignStatus.RUNNING:
                raise Conflict(f"campaign {campaign_id} has ended (status {c.status})")
            if c.judge.get("kind") == "human":
                raise Conflict("a run needs an automatic judge; this campaign's judge is human")
            require_key_envs(c.models, c.judge)
            now = utcnow()
            if c.run_active and not rules.lease_free(c.run_owner, c.run_lease_expires_at, now):
                raise Conflict(
                    f"a run is already active for campaign {campaign_id} (its owner's lease runs until "
                    f"{c.run_lease_expires_at.isoformat()}); stop the campaign or wait for the run to end"
                )
            self.take_lease(s, c, now)
            c.run_active = True
            c.run_remaining = max_duels
            c.run_concurrency = concurrency
            c.run_error = None
            c.updated_at = utcnow()
            return {"active": True, "remaining": max_duels, "concurrency": concurrency, "error": None}

    def end_run_tx(self, campaign_id: int, error: str | None = None) -> None:
        with self.db.write() as s:
            c = self.db.lock_campaign(s, campaign_id)
            if c is None or c.run_owner not in (None, self.owner_id):
                return  # the run was taken over: it is no longer this process's to end
            c.run_active = False
            c.run_owner = None
            c.run_lease_expires_at = None
            if error:
                c.run_error = clean_text(redact(error, self.secret_keys(c.models, c.judge)), MAX_ERROR_CHARS)
            c.updated_at = utcnow()


def _error_text(exc: BaseException) -> str:
    if isinstance(exc, ClientError):
        return str(exc)
    # Unexpected exceptions: the type only (their text might carry request details).
    return f"unexpected {type(exc).__name__} in the model client"


def _not_pending_message(d: Duel) -> str:
    if d.status == DuelStatus.JUDGED:
        return f"duel {d.id} already has a verdict"
    if d.status == DuelStatus.CALLING:
        return f"duel {d.id} is still waiting for the models' answers"
    if d.status == DuelStatus.EXPIRED:
        return f"duel {d.id} expired and no longer counts"
    if d.status == DuelStatus.FAILED:
        return f"duel {d.id} failed and cannot be judged"
    if d.status == DuelStatus.CANCELLED:
        return f"duel {d.id} was cancelled: the campaign ended before it was judged"
    return f"duel {d.id} cannot be judged (status {d.status})"
