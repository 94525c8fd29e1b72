"""A campaign's life outside its duels: create it, stop it, raise its limits (continuing it),
start and end its background run (:class:`Lifecycle`).

Each method is one locked transaction (the campaign row first); the refusals are
pure functions (:mod:`.limits`: ``limit_below_use``, ``continue_refusal``; :mod:`service.money.bounds`:
``unbounded_cost_reason``; :mod:`.expiry`: ``lease_free``) and raised as 409/422 domain errors.
"""

from __future__ import annotations

import logging
import secrets
from typing import Any

from sqlalchemy import insert, select

from algorithms.vocabulary import IN_FLIGHT, CampaignStatus

from ..config import Settings
from ..db import Database
from ..egress import EgressDenied, EgressPolicy
from ..images.store import store_prompt_images
from ..models import Campaign, Duel, PolicyCheckpoint, Prompt, to_nusd, utcnow
from ..money import holds
from ..money.bounds import unbounded_cost_reason
from ..money.budget import reserved_nusd
from ..money.costs import judge_cost_per_duel
from ..prompts import normalize_prompt
from ..redaction import redact
from ..schemas import CampaignCreate
from ..stored_text import MAX_ERROR_CHARS, clean_text
from ..webhook_events import stored_events
from . import draws, hybrid, hybrid_tx
from .credentials import require_key_envs, secret_keys
from .endings import Endings
from .expiry import is_stale, lease_free
from .leases import Leases
from .limits import continue_refusal, limit_below_use
from .policy_cache import new_campaign_policy, policy_snapshot
from .sampling import is_wor
from .tasks import in_thread
from .types import Conflict, Unprocessable
from .views import Views
from .webhooks import Webhooks, new_webhook_secret

log = logging.getLogger("llmduel.campaigns")


def check_egress(policy: EgressPolicy, body: Any) -> None:
    """:class:`Unprocessable` naming the field and host of the first address of a campaign-create
    body (model and judge ``base_url``, ``webhook_url``) that ``policy`` does not allow."""
    if policy.allow_all:
        return
    targets = [(f"models[{n}].client.base_url", getattr(m.client, "base_url", None)) for n, m in enumerate(body.models)]
    targets.append(("judge.client.base_url", getattr(getattr(body.judge, "client", None), "base_url", None)))
    targets.append(("webhook_url", body.webhook_url))
    for field, url in targets:
        if url:
            try:
                policy.check_url(url)
            except EgressDenied as exc:
                raise Unprocessable(f"{field}: {exc.message}") from None


class Lifecycle:
    """Create, stop, limits and runs of a campaign; owns nothing (every call is one transaction)."""

    def __init__(
        self, settings: Settings, db: Database, views: Views, endings: Endings, leases: Leases, webhooks: Webhooks
    ):
        self.settings = settings
        self.db = db
        self.views = views
        self.lock_existing = views.lock_existing
        self.finish = endings.finish
        self.leases = leases
        self.webhooks = webhooks

    async def update_limits(self, campaign_id: int, budget: float | None, max_duels: int | None) -> dict:
        """PATCH: raise the budget or duel cap (continuing a campaign that ended on one); the campaign view."""
        await in_thread(self.update_limits_tx, campaign_id, budget, max_duels)
        return await in_thread(self.views.get_campaign, campaign_id)

    async def stop(self, campaign_id: int) -> dict:
        """Stop a running campaign (its duels in flight cancelled, its webhook sent); the campaign view."""
        await in_thread(self.stop_tx, campaign_id)
        self.webhooks.schedule_webhook(campaign_id)
        return await in_thread(self.views.get_campaign, campaign_id)

    def create_campaign(self, body: CampaignCreate) -> int:
        """Store a new campaign (its policy's initial state, its prompts); its id. 422 for an address
        ``LLMDUEL_ALLOWED_HOSTS`` does not allow or a missing ``api_key_env``, before anything is stored."""
        check_egress(self.settings.egress, body)
        require_key_envs([m.stored() for m in body.models], body.stored_judge())  # 422 before anything is stored
        costs = [m.query_cost() for m in body.models]
        judge = body.stored_judge()
        population = len(body.prompts) if is_wor(body.prompt_sampling) else None
        algorithm: str = body.algorithm
        if hybrid.is_hybrid(judge):  # hybrid hook: dctas-pc-hybrid with the human fee and rate
            policy, algorithm = hybrid.new_policy(judge, costs, body.delta), hybrid.ALGORITHM
        else:
            policy = new_campaign_policy(
                body.algorithm,
                costs,
                body.delta,
                judge_cost=judge_cost_per_duel(judge),
                population=population,
                goal=body.goal,
                k=body.k,
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
            draw_key=draws.new_draw_key(),
            max_pending_per_annotator=body.max_pending_per_annotator,
            webhook_url=body.webhook_url,
            webhook_events=stored_events(body.webhook_events),
            batch=None if (batch := body.stored_batch()) is None else {**batch, "rounds": 0},
            webhook_secret=new_webhook_secret() if body.webhook_url else None,
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
                insert(PolicyCheckpoint),
                [{"campaign_id": campaign.id, "policy_state": state, "counts": counts, "stats": stats}],
            )
            s.execute(
                insert(Prompt),
                [
                    {"campaign_id": campaign.id, "idx": n, **normalize_prompt(item)}
                    for n, item in enumerate(body.prompts)
                ],
            )
            store_prompt_images(s, body.prompts)
            return int(campaign.id)

    def stop_tx(self, campaign_id: int, reason: str = "stopped by the admin") -> bool:
        with self.db.write() as s:
            c = self.lock_existing(s, campaign_id)
            if c.status != CampaignStatus.RUNNING:
                raise Conflict(f"campaign {campaign_id} has already ended (status {c.status})")
            now = utcnow()
            if c.run_error and not c.run_active:  # the run had paused: its cause stays with the ending
                reason = f"{reason}; the run had paused before: {c.run_error}"
            self.finish(s, c, CampaignStatus.STOPPED, reason, now=now)
            c.version += 1
            c.updated_at = now
            return True

    def update_limits_tx(self, campaign_id: int, budget: float | None, max_duels: int | None) -> bool:
        """Set a campaign's budget and/or duel cap (PATCH); continue it if it had ended on one of them.

        422 (:class:`Unprocessable`) for a limit below what is already spent or
        judged, or a budget the campaign's clients cannot reserve against; 409
        (:class:`Conflict`) for an ended campaign that does not continue
        (:func:`limits.continue_refusal`). A continued campaign keeps its policy
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
                if not is_stale(r.expires_at, now) or hybrid_tx.waits_for_human(c, r)  # hybrid hook
            ]
            reason = limit_below_use(
                new_budget_nusd=new_budget,
                spent_nusd=c.spend_nusd,
                reserved_nusd=reserved_nusd(inflight, holds.held_nusd(s, campaign_id, now)),
                new_max_duels=max_duels,
                duels_judged=c.duels_judged,
                in_flight=len(inflight),
            )
            if reason is not None:
                raise Unprocessable(reason)
            if new_budget is not None and c.budget_nusd is None:
                why = unbounded_cost_reason(c.models, c.judge)
                if why is not None:
                    raise Unprocessable(why)
            budget_nusd = new_budget if new_budget is not None else c.budget_nusd
            cap = max_duels if max_duels is not None else c.max_duels
            resumed = False
            if c.status != CampaignStatus.RUNNING:
                refusal = continue_refusal(
                    c.status,
                    c.end_limit,
                    budget_raised=new_budget is not None and (c.budget_nusd is None or new_budget > c.budget_nusd),
                    max_duels_raised=max_duels is not None and (c.max_duels is None or max_duels > c.max_duels),
                    budget_nusd=budget_nusd,
                    spent_nusd=c.spend_nusd,
                    max_duels=cap,
                    duels_judged=c.duels_judged,
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
                c.webhook_settle_due = False  # and its own campaign.settled
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
            now = self.db.clock(s)  # leases on the database's clock (service/campaigns/leases.py)
            expires = c.run_lease_expires_at
            if c.run_active and expires is not None and not lease_free(c.run_owner, expires, now):
                raise Conflict(
                    f"a run is already active for campaign {campaign_id} (its owner's lease runs until "
                    f"{expires.isoformat()}); stop the campaign or wait for the run to end"
                )
            if expires is not None and not lease_free(c.run_owner, expires, now):  # ended, draining (run_under_way)
                raise Conflict(
                    f"the previous run of campaign {campaign_id} is still active: it records its last duels in "
                    f"flight (its owner's lease runs until {expires.isoformat()}); start the run once run.active "
                    "is false"
                )
            self.leases.take_lease(s, c, now)
            c.run_active = True
            c.run_remaining = max_duels
            c.run_concurrency = concurrency
            c.run_error = None
            c.version += 1  # the views kept per version (the dashboard's, the results') show the run
            c.updated_at = utcnow()
            return {"active": True, "remaining": max_duels, "concurrency": concurrency, "error": None}

    def end_run_tx(self, campaign_id: int, error: str | None = None) -> None:
        with self.db.write() as s:
            c = self.db.lock_campaign(s, campaign_id)
            if c is None or c.run_owner not in (None, self.leases.owner_id):
                return  # the run was taken over: it is no longer this process's to end
            c.run_active = False
            c.run_owner = None
            c.run_lease_expires_at = None
            if error:
                c.run_error = clean_text(redact(error, secret_keys(self.settings, c.models, c.judge)), MAX_ERROR_CHARS)
            c.version += 1  # as start_run_tx: a view kept for the version before showed the run active
            c.updated_at = utcnow()
