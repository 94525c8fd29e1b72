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
   ``pending`` (waiting for a verdict) or ``failed`` (its pair is free again); on the
   driver that planned the duel.
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
import datetime as dt
import logging
from typing import Any

from algorithms.vocabulary import DuelStatus

from .. import cycle
from ..auth import Principal
from ..campaigns import skips, store_settings
from ..campaigns.calls import call_expiry
from ..campaigns.credentials import secret_keys
from ..campaigns.expiry import call_deadline
from ..campaigns.judge_charges import Judgement
from ..campaigns.lost_commits import store_paid
from ..campaigns.policy_cache import PolicyCache
from ..campaigns.sampling import prompt_permutation
from ..campaigns.store_lookup import StoredKeys
from ..campaigns.tasks import in_thread
from ..campaigns.types import CampaignEnded, Conflict, DomainError, DuelOutcome, DuelPlan, HeldDuel
from ..campaigns.views import duel_view_for
from .service_port import CycleDeps

log = logging.getLogger("llmduel.campaigns")


class Cycle:
    """The vote cycle: plan a duel, call the models, store the answers, judge, record the verdict.

    Owns the policies and the config cache, the answers transaction (``store_answers_tx``) and the
    orchestration of one duel (here). The model and judge calls and the store claims of the
    calls under way are ``calls``' (:class:`.calls.Calls`); answers made ahead for annotators
    are ``pregen``'s; campaigns end through ``endings``; prompts are read through ``prompts``.
    Everything else comes from the collaborators handed in, by name (``deps``: a
    :class:`.service_port.CycleDeps`)."""

    in_thread = staticmethod(in_thread)

    def __init__(self, *, deps: CycleDeps):
        self.deps = deps  # the collaborators, each reached by name (deps.views.duel_view, ...)
        self.owner_id = deps.leases.owner_id  # the fencing token of this process's runs
        self.db = deps.db  # the database its transactions run on (tests and the web pages read it too)
        settings, db = deps.settings, deps.db
        self.pending_expiry = dt.timedelta(seconds=settings.duel_expiry_seconds)  # a duel waiting for its verdict
        self.call_expiry = call_expiry(settings)
        # an annotator's duel while its models are called: renewed by this process every heartbeat
        self.call_lease = min(self.call_expiry, dt.timedelta(seconds=settings.run_lease_seconds))
        self.policies = PolicyCache()
        self.config_cache: dict[int, Any] = {}  # campaign id -> cycle.CampaignConfig (never changes)
        self._permutations: dict[tuple[int, str, int], list[int]] = {}
        self.stored_keys = StoredKeys()  # store keys seen ready (they stay ready)
        # PostgreSQL: hot fast-path transactions on the event loop (asyncpg, service.db.HotPool).
        self._on_loop = settings.inline_transactions and db.hot_pool is not None
        self.hot_counts = {"loop": 0, "thread": 0}  # plan and vote transactions by where they ran

    # ------------------------------------------------------------ one duel
    async def _answers(self, plan: DuelPlan, run: bool):
        """Step 2-3: both answers (stored or called, through ``calls``), then the answers transaction on
        the driver that planned the duel (:meth:`_on_loop_for`: an annotator's or the admin's duel of a
        campaign the asyncpg driver covers, on PostgreSQL; else :meth:`store_answers_tx` in a worker
        thread); the store claims are settled after it, stored or not."""
        turns, _ = await self.deps.calls.extras(plan)
        leased = plan.hard_expiry is not None and plan.duel_id and plan.deadline is not None
        if leased:  # the keeper renews the duel's lease while this process calls its models
            self.deps.calls.live_duels[plan.duel_id] = plan.hard_expiry
            self.deps.calls.ensure_keeper()
        try:
            res_i, res_j = await asyncio.gather(
                self.deps.calls.answer(plan, plan.i, turns), self.deps.calls.answer(plan, plan.j, turns)
            )
            results = {plan.i: res_i, plan.j: res_j}
            if not run and await self._on_loop_for(plan.campaign_id):
                outcome = await store_paid(
                    self, plan.duel_id, "answers", lambda: cycle.store_answers_async(self, plan, results)
                )
            else:
                outcome = await store_paid(
                    self, plan.duel_id, "answers", lambda: self.in_thread(self.store_answers_tx, plan, results)
                )
        finally:
            self.deps.calls.live_duels.pop(plan.duel_id, None)
            await self.deps.calls.settle_claims(plan, [plan.i, plan.j])
        return res_i, res_j, outcome

    async def execute(self, plan: DuelPlan, *, run: bool = False) -> DuelOutcome:
        """Steps 2-4 of a duel: answers (stored or called), store, judge automatically (``run``: a
        background run's duel, whose transactions all run on the SQLAlchemy driver)."""
        if plan.outcome is not None:  # answered inside the plan transaction
            assert plan.results is not None  # with its results
            res_i, res_j, outcome = plan.results[plan.i], plan.results[plan.j], plan.outcome
        else:
            res_i, res_j, outcome = await self._answers(plan, run)
        if outcome.ended:
            self.deps.webhooks.schedule_webhook(plan.campaign_id)
        if outcome.status != DuelStatus.PENDING or plan.judge.get("kind") == "human":
            return outcome
        judge = self.deps.calls.judge(plan)
        deadline = call_deadline(self.pending_expiry)  # the pending duel expires then
        try:
            verdict = await self.deps.calls.verdict(
                plan,
                judge,
                res_i.text if plan.a_is_i else res_j.text,
                res_j.text if plan.a_is_i else res_i.text,
                deadline=deadline,
            )
            j = Judgement(verdict.pop("choice"), f"judge:{plan.judge.get('kind')}", **verdict)
            outcome = await store_paid(
                self, plan.duel_id, "verdict", lambda: self.in_thread(cycle.record_verdict, self, plan.duel_id, j)
            )
        except Conflict as exc:  # the campaign ended or the duel expired meanwhile
            return DuelOutcome(plan.duel_id, "conflict", error=exc.detail)
        finally:
            await self.deps.calls.settle_claims(plan, ["judge"])
        if outcome.ended:
            self.deps.webhooks.schedule_webhook(plan.campaign_id)
        return outcome

    def plan_duel(self, campaign_id: int, principal: Principal | None, run: bool = False) -> DuelPlan:
        """Plan a duel in the calling thread (:func:`service.cycle.plan.decide_plan`, SQLAlchemy driver)."""
        return cycle.plan_duel(self, campaign_id, principal, run)

    def record_vote(self, duel_id: int, choice: str, principal: Principal) -> DuelOutcome:
        """Record a human vote in the calling thread (:func:`service.cycle.verdict.decide_verdict`)."""
        return cycle.record_vote(self, duel_id, choice, principal)

    async def _on_loop_for(self, campaign_id: int) -> bool:
        """Whether an annotator's or the admin's plan (and its answers) run on the asyncpg driver (on the event loop):
        on PostgreSQL, when :func:`service.cycle.handles` accepts the campaign (the choice of
        :mod:`service.cycle.routing`: from the config cache, else one small read in a worker thread)."""
        if not (cycle.ENABLED and self._on_loop):
            return False
        cached = cycle.cached_choice(self, campaign_id)
        return cached if cached is not None else await self.in_thread(cycle.plan_on_hot_path, self, campaign_id)

    async def _vote_on_loop(self, duel_id: int, principal: Principal) -> bool:
        """Whether a vote runs on the asyncpg driver: as :meth:`_on_loop_for`, for the duel's campaign."""
        if not (cycle.ENABLED and self._on_loop):
            return False
        cached = cycle.cached_choice(self, cycle.vote_campaign_hint(principal))
        if cached is not None:
            return cached
        return await self.in_thread(cycle.vote_on_hot_path, self, duel_id, principal)

    async def plan(self, campaign_id: int, principal: Principal | None, run: bool = False) -> DuelPlan:
        try:
            await self.deps.stores.update_store_costs(campaign_id, wait=principal is None)
            # one transaction: on the asyncpg driver when it covers the campaign, else the SQLAlchemy
            # driver in a worker thread (a background run's always); both run the same sequence
            if principal is not None and not run and await self._on_loop_for(campaign_id):
                plan = await cycle.plan_duel_async(self, campaign_id, principal)
                self.hot_counts["loop"] += 1
                return plan
            self.hot_counts["thread"] += 1
            return await self.in_thread(self.plan_duel, campaign_id, principal, run)
        except DomainError as exc:
            if isinstance(exc, CampaignEnded):
                self.deps.webhooks.schedule_webhook(campaign_id)
            raise

    async def next_duel(self, campaign_id: int, principal: Principal) -> tuple[dict, float | None]:
        """A new duel and its selection time in ms; for an annotator at its limit of duels in
        flight (``max_pending_per_annotator``), its oldest such duel again and ``None``."""
        try:
            plan = await self.plan(campaign_id, principal)
        except HeldDuel as held:
            return await self.in_thread(self.deps.views.get_duel, held.duel_id, principal), None
        outcome = await self.execute(plan)
        if not principal.admin and (
            store_settings.stores_answers(plan.answers, plan.models[plan.i])
            or store_settings.stores_answers(plan.answers, plan.models[plan.j])
        ):
            self.deps.pregen.schedule(campaign_id)  # the next duels' answers, in the background
        if outcome.view is None:
            return await self.in_thread(self.deps.views.get_duel, plan.duel_id, principal), plan.select_ms
        return duel_view_for(outcome.view, principal.admin), plan.select_ms

    async def vote(self, duel_id: int, choice: str, principal: Principal, comment: str | None = None) -> dict:
        """Count a vote; ``comment`` (optional, service/campaigns/skips.py) is stored with it."""
        note = skips.clean_comment(comment)  # ValueError before anything is written
        if await self._vote_on_loop(duel_id, principal):  # one transaction, on one driver (as in plan)
            outcome = await cycle.record_vote_async(self, duel_id, choice, principal)
            self.hot_counts["loop"] += 1
        else:
            self.hot_counts["thread"] += 1
            outcome = await self.in_thread(self.record_vote, duel_id, choice, principal)
        assert outcome.view is not None  # a recorded vote has its duel's view
        if note is not None:
            await self.in_thread(skips.save_comment, self.deps.db, duel_id, principal, note)
            outcome.view["comment"] = note
        if outcome.ended:
            self.deps.webhooks.schedule_webhook(outcome.view["campaign_id"])
        return duel_view_for(outcome.view, principal.admin)

    async def skip(self, duel_id: int, principal: Principal) -> None:
        """An annotator hands its pending duel back to the pool (not counted, not charged again)."""
        await self.in_thread(
            skips.skip_duel, self.deps.db, duel_id, principal, self.deps.settings.max_skips_per_annotator
        )

    # ------------------------------------------------------------ sampling without replacement
    def permutation(self, campaign_id: int, draw_key: str, n_prompts: int) -> list[int]:
        """The campaign's secret prompt permutation (:func:`sampling.prompt_permutation`), cached per process."""
        cache = self._permutations
        key = (campaign_id, draw_key, n_prompts)
        perm = cache.get(key)
        if perm is None:
            perm = prompt_permutation(draw_key, n_prompts)
            if len(cache) >= 1000:
                cache.clear()
            cache[key] = perm
        return perm

    # ------------------------------------------------------------ the answers and the verdict
    def secret_keys(self, models: list, judge: dict) -> tuple[str, ...]:
        """The keys a campaign's stored text must not contain (service.redaction)."""
        return secret_keys(self.deps.settings, models, judge)

    def store_answers_tx(self, plan: DuelPlan, results: dict[int, Any]) -> DuelOutcome:
        """Step 3 (locked): charges for what the calls really cost, answers or failure
        (:func:`service.cycle.answers.decide_answers` on the SQLAlchemy driver, in the calling thread;
        a background run's and a batch round's duels, and every duel on SQLite)."""
        return cycle.store_answers(self, plan, results)
