"""The vote cycle: create a campaign, next duel, vote, stop (:class:`Cycle`); one duel from end to end.

Every write that touches a campaign runs in one transaction that first locks the
campaign row (:meth:`Database.lock_campaign`), so writes on one campaign are
serialised and a vote and the state update it causes commit together. Model and
judge calls happen outside any transaction:

1. *plan* (locked): expire stale duels, rebuild the policy from its stored state,
   ``next_pair(pending=in-flight pairs)``, check budget and caps, draw a prompt and
   the display order, insert the duel as ``calling``, commit.
2. both models are called concurrently, no lock held.
3. *store answers* (locked): charges for what was really spent; the duel becomes
   ``pending`` (waiting for a verdict) or ``failed`` (its pair is free again).
4. an automatic judge decides (no lock), then *record* (locked) like a vote: the
   duel moves ``pending -> judged`` with a conditional UPDATE (a second verdict or
   a duplicate vote finds no pending row: 409), the policy records the score,
   stops when it certifies, and the campaign row gets the new state.

The synchronous ``*_tx`` methods run in worker threads; the async methods
orchestrate them with the model and judge calls.

Model and judge calls go through :class:`.calls.Calls`; answers for the next duels of
annotators are made ahead by :class:`.pregeneration.Pregeneration`; both are separate
objects the cycle is handed (``service/campaigns/container.py``).
"""

from __future__ import annotations

import asyncio
import functools
import logging
from typing import Any, Callable

from algorithms.vocabulary import DuelStatus

from .. import cycle
from ..auth import Principal
from ..config import Settings
from ..db import Database
from ..egress import EgressDenied, EgressPolicy
from . import rules, skips, stores
from .calls import Calls
from .endings import Endings
from .judge_charges import Judgement
from .leases import Leases
from .pregeneration import Pregeneration
from .prompt_cache import PromptCache
from .stores import Stores
from .tasks import in_thread
from .transactions import CampaignTransactions
from .types import CampaignEnded, Conflict, DomainError, DuelOutcome, DuelPlan, HeldDuel, Unprocessable
from .views import Views, duel_view_for
from .webhooks import Webhooks

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


class Cycle(CampaignTransactions):
    """The vote cycle: plan a duel, call the models, store the answers, judge, record the verdict.

    Owns the policies and the config cache (its transactions, :mod:`.transactions`) and the
    orchestration of one duel (here). The model and judge calls and the store claims of the
    calls under way are ``calls``' (:class:`.calls.Calls`); answers made ahead for annotators
    are ``pregen``'s; campaigns end through ``endings``; prompts are read through ``prompts``.
    Everything else comes from the collaborators handed in."""

    in_thread = staticmethod(in_thread)

    def __init__(
        self,
        settings: Settings,
        db: Database,
        views: Views,
        webhooks: Webhooks,
        leases: Leases,
        stores: Stores,
        calls: Calls,
        pregen: Pregeneration,
        endings: Endings,
        prompts: PromptCache,
    ):
        self.settings = settings
        self.db = db
        self.calls = calls  # the model and judge calls, the stores' single flight and claims
        self.pregen = pregen  # answers made ahead for annotators (next_duel schedules them)
        self.owner_id = leases.owner_id  # the fencing token of this process's runs
        # The collaborators' operations the transactions, the orchestration and the hot path
        # (service.cycle.HotService) call, by name; their state stays with their owners.
        self.lock_existing = views.lock_existing
        self.duel_view = views.duel_view
        self.get_campaign = views.get_campaign
        self.get_duel = views.get_duel
        self.schedule_webhook = webhooks.schedule_webhook
        self.take_lease = leases.take_lease
        self.store_costs_for = stores.store_costs_for
        self.update_store_costs = stores.update_store_costs
        self.finish = endings.finish
        self.pause_for_fault = endings.pause_for_fault
        self.cached_prompt = prompts.cached_prompt
        self.remember_prompt = prompts.remember_prompt
        self.prompt_text = prompts.prompt_text
        self.cached_prompt_extras = prompts.cached_prompt_extras
        self.prompt_extras = prompts.prompt_extras
        self.prompt_extras_in = prompts.prompt_extras_in
        self.init_transactions(settings)
        # PostgreSQL: hot fast-path transactions on the event loop (asyncpg, service.db.HotPool).
        self._on_loop = settings.inline_transactions and db.hot_pool is not None
        self.hot_counts = {"loop": 0, "thread": 0}  # plan and vote transactions by where they ran

    # ------------------------------------------------------------ create
    def create_campaign(self, body: Any) -> int:
        """Create a campaign whose addresses ``LLMDUEL_ALLOWED_HOSTS`` allows (else 422 naming the host)."""
        check_egress(self.settings.egress, body)
        return super().create_campaign(body)

    # ------------------------------------------------------------ one duel
    async def _answers(self, plan: DuelPlan):
        """Step 2-3: both answers (stored or called, through ``calls``), then the cycle's
        :meth:`store_answers_tx`; the store claims are settled after it, stored or not."""
        turns, _ = await self.calls.extras(plan)
        try:
            res_i, res_j = await asyncio.gather(
                self.calls.answer(plan, plan.i, turns), self.calls.answer(plan, plan.j, turns)
            )
            outcome = await self.in_thread(self.store_answers_tx, plan, {plan.i: res_i, plan.j: res_j})
        finally:
            await self.calls.settle_claims(plan, [plan.i, plan.j])
        return res_i, res_j, outcome

    async def execute(self, plan: DuelPlan) -> DuelOutcome:
        """Steps 2-4 of a duel: answers (stored or called), store, judge automatically."""
        if plan.outcome is not None:  # answered inside the plan transaction
            res_i, res_j, outcome = plan.results[plan.i], plan.results[plan.j], plan.outcome
        else:
            res_i, res_j, outcome = await self._answers(plan)
        if outcome.ended:
            self.schedule_webhook(plan.campaign_id)
        if outcome.status != DuelStatus.PENDING or plan.judge.get("kind") == "human":
            return outcome
        judge = self.calls.judge(plan)
        deadline = rules.call_deadline(self.pending_expiry)  # the pending duel expires then
        try:
            verdict = await self.calls.verdict(
                plan,
                judge,
                res_i.text if plan.a_is_i else res_j.text,
                res_j.text if plan.a_is_i else res_i.text,
                deadline,
            )
            j = Judgement(verdict.pop("choice"), f"judge:{plan.judge.get('kind')}", **verdict)
            outcome = await self.in_thread(cycle.record_verdict, self, plan.duel_id, j)
        except Conflict as exc:  # the campaign ended or the duel expired meanwhile
            return DuelOutcome(plan.duel_id, "conflict", error=exc.detail)
        finally:
            await self.calls.settle_claims(plan, ["judge"])
        if outcome.ended:
            self.schedule_webhook(plan.campaign_id)
        return outcome

    def plan_duel(self, campaign_id: int, principal: Principal | None, run: bool = False) -> DuelPlan:
        """Plan a duel in the calling thread (:func:`service.cycle.plan.decide_plan`, SQLAlchemy driver)."""
        return cycle.plan_duel(self, campaign_id, principal, run)

    def record_vote(self, duel_id: int, choice: str, principal: Principal) -> DuelOutcome:
        """Record a human vote in the calling thread (:func:`service.cycle.verdict.decide_verdict`)."""
        return cycle.record_vote(self, duel_id, choice, principal)

    async def _on_hot_path(self, campaign_id: int | None, route: Callable, *args: Any) -> bool:
        """The driver choice of :mod:`service.cycle.routing`: from the config cache on the
        loop, else ``route(self, *args)`` (a small read) in a worker thread."""
        cached = cycle.cached_choice(self, campaign_id)
        return cached if cached is not None else await self.in_thread(route, self, *args)

    async def _hot(self, on_hot: Callable, fast_async: Callable, sync_path: Callable, *args: Any) -> Any:
        """A request's one transaction: on PostgreSQL, ``fast_async`` (the asyncpg driver) on the
        event loop when ``on_hot()`` says it covers the campaign; else ``sync_path`` (the
        SQLAlchemy driver) in a worker thread. Both run the same sequence."""
        if cycle.ENABLED and self._on_loop and await on_hot():
            out = await fast_async(self, *args)
            self.hot_counts["loop"] += 1
            return out
        self.hot_counts["thread"] += 1
        return await self.in_thread(sync_path, *args)

    async def plan(self, campaign_id: int, principal: Principal | None, run: bool = False) -> DuelPlan:
        try:
            await self.update_store_costs(campaign_id, wait=principal is None)
            if principal is not None and not run:
                return await self._hot(
                    functools.partial(self._on_hot_path, campaign_id, cycle.plan_on_hot_path, campaign_id),
                    cycle.plan_duel_async,
                    self.plan_duel,
                    campaign_id,
                    principal,
                )
            self.hot_counts["thread"] += 1
            return await self.in_thread(self.plan_duel, campaign_id, principal, run)
        except DomainError as exc:
            if isinstance(exc, CampaignEnded):
                self.schedule_webhook(campaign_id)
            raise

    async def next_duel(self, campaign_id: int, principal: Principal) -> tuple[dict, float | None]:
        """A new duel and its selection time in ms; for an annotator at its limit of duels in
        flight (``max_pending_per_annotator``), its oldest such duel again and ``None``."""
        try:
            plan = await self.plan(campaign_id, principal)
        except HeldDuel as held:
            return await self.in_thread(self.get_duel, held.duel_id, principal), None
        outcome = await self.execute(plan)
        if not principal.admin and (
            stores.stores_answers(plan.answers, plan.models[plan.i])
            or stores.stores_answers(plan.answers, plan.models[plan.j])
        ):
            self.pregen.schedule(campaign_id)  # the next duels' answers, in the background
        if outcome.view is None:
            return await self.in_thread(self.get_duel, plan.duel_id, principal), plan.select_ms
        return duel_view_for(outcome.view, principal.admin), plan.select_ms

    async def vote(self, duel_id: int, choice: str, principal: Principal, comment: str | None = None) -> dict:
        """Count a vote; ``comment`` (optional, service/campaigns/skips.py) is stored with it."""
        note = skips.clean_comment(comment)  # ValueError before anything is written
        outcome = await self._hot(
            functools.partial(
                self._on_hot_path, cycle.vote_campaign_hint(principal), cycle.vote_on_hot_path, duel_id, principal
            ),
            cycle.record_vote_async,
            self.record_vote,
            duel_id,
            choice,
            principal,
        )
        if note is not None:
            await self.in_thread(skips.save_comment, self.db, duel_id, principal, note)
            if outcome.view is not None:
                outcome.view["comment"] = note
        if outcome.ended:
            self.schedule_webhook(outcome.view["campaign_id"])
        return duel_view_for(outcome.view, principal.admin)

    async def skip(self, duel_id: int, principal: Principal) -> None:
        """An annotator hands its pending duel back to the pool (not counted, not charged again)."""
        await self.in_thread(skips.skip_duel, self.db, duel_id, principal)

    async def update_limits(self, campaign_id: int, budget: float | None, max_duels: int | None) -> dict:
        """PATCH: raise the budget or duel cap (continuing a campaign that ended on one); the campaign view."""
        await self.in_thread(self.update_limits_tx, campaign_id, budget, max_duels)
        return await self.in_thread(self.get_campaign, campaign_id)

    async def stop(self, campaign_id: int) -> dict:
        await self.in_thread(self.stop_tx, campaign_id)
        self.schedule_webhook(campaign_id)
        return await self.in_thread(self.get_campaign, campaign_id)
