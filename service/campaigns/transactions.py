"""The campaign's write transactions (each one locks the campaign row first).

See :mod:`service.campaigns.orchestration` for the life of a duel. Every decision goes
through :mod:`service.campaigns.rules`, as on the hot path.
"""

from __future__ import annotations

import datetime as dt
import logging
import secrets
from typing import Any

from sqlalchemy import insert, select, update

from algorithms.vocabulary import IN_FLIGHT, CampaignStatus, DuelStatus

from .. import cycle
from ..auth import Principal, hash_token, new_token
from ..clients import Completion
from ..config import Settings
from ..decide import answers as cycle_answers
from ..models import Annotator, Campaign, Charge, Duel, Prompt, to_nusd, utcnow
from ..prompts import normalize_prompt
from ..redaction import configured_keys, redact
from ..schemas import CampaignCreate
from . import holds, hybrid, hybrid_tx, rules, stores
from .credentials import require_key_envs
from .judge_charges import Judgement
from .policy_cache import PolicyCache, new_campaign_policy, policy_snapshot
from .rules import MAX_ERROR_CHARS, clean_text
from .types import (
    Conflict,
    DuelOutcome,
    DuelPlan,
    Unprocessable,
)
from .webhooks import new_webhook_secret

log = logging.getLogger("llmduel.campaigns")


def call_expiry(settings: Settings) -> dt.timedelta:
    """How long a model call may hold its reservation: the call timeout, at most the duel expiry."""
    return dt.timedelta(seconds=min(settings.call_timeout_seconds, settings.duel_expiry_seconds))


def secret_keys(settings: Settings, models: list, judge: dict) -> tuple[str, ...]:
    """The keys a campaign's stored text must not contain (service.redaction)."""
    return configured_keys(models, judge, extra=(settings.api_key,))


class CampaignTransactions:
    """The locked write transactions (synchronous: they run in worker threads)."""

    def init_transactions(self, settings: Settings) -> None:
        self.pending_expiry = dt.timedelta(seconds=settings.duel_expiry_seconds)  # a duel waiting for its verdict
        self.call_expiry = call_expiry(settings)
        self.policies = PolicyCache()
        self.config_cache: dict[int, Any] = {}  # campaign id -> cycle.CampaignConfig (never changes)
        self._permutations: dict[tuple[int, str, int], list[int]] = {}
        self.stored_keys = stores.StoredKeys()  # store keys seen ready (they stay ready)

    # ------------------------------------------------------------ sampling without replacement
    def permutation(self, c: Campaign) -> list[int]:
        """The campaign's secret prompt permutation (:func:`rules.prompt_permutation`), cached per process."""
        cache = self._permutations
        key = (int(c.id), c.draw_key, int(c.n_prompts))
        perm = cache.get(key)
        if perm is None:
            perm = rules.prompt_permutation(c.draw_key, c.n_prompts)
            if len(cache) >= 1000:
                cache.clear()
            cache[key] = perm
        return perm

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

    def secret_keys(self, models: list, judge: dict) -> tuple[str, ...]:
        """The keys a campaign's stored text must not contain (service.redaction)."""
        return secret_keys(self.settings, models, judge)

    def answer_now(self, plan: DuelPlan, now: dt.datetime) -> tuple[list[dict], dict[str, Any]]:
        """Both answers inside the plan transaction, when both models are instant.

        Sets ``plan.results`` and returns (charges, the duel's columns) as
        :meth:`store_answers_tx` would record them; ([], {}) when the models must
        be called outside the transaction.
        """
        plan.results = self.calls.instant_results(plan)
        if plan.results is None:
            return [], {}
        # instant models are simulated ones, charged their fixed cost: their bound (no provider fault)
        charges, total, columns, error, _ = cycle_answers.settle_answers(
            plan, plan.results, now, self.secret_keys(plan.models, plan.judge)
        )
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
        charges, total, fields, error, faults = cycle_answers.settle_answers(
            plan, results, now, self.secret_keys(plan.models, plan.judge)
        )
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
                error = cycle_answers.late_error(lost)
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
            status, stored_error, failed = cycle_answers.after_answers(d.status, d.requested_by, error)
            if stored_error is not None:
                d.error = stored_error
            if status == DuelStatus.PENDING and d.status == DuelStatus.CALLING:
                d.expires_at = now + self.pending_expiry  # the wait for its verdict starts
            d.status = status
            c.duels_failed += failed
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
        """Step 4 (locked): a vote or an automatic verdict, counted exactly once
        (:func:`service.cycle.verdict.decide_verdict` on the SQLAlchemy driver).

        ``verdict_claim``: the verdict store row this judgement was paid for; it is
        stored (``stored_choice``, in the stored order) with its charge when the judge
        gave a verdict. ``reused_verdict``: the verdict came from the store (a zero-cost
        ledger row names the charge that paid for it). A duplicate finds no pending row: 409.
        """
        judgement = Judgement(
            choice,
            judged_by,
            principal,
            judge_cost,
            judge_detail,
            judge_error,
            judge_score,
            verdict_claim,
            stored_choice,
            reused_verdict,
        )
        return cycle.record_verdict(self, duel_id, judgement)

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
