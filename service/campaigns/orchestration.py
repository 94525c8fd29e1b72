"""One duel from end to end: plan, model calls, judge, record; the hot path or the general transactions."""

from __future__ import annotations

import asyncio
import datetime as dt
import functools
import logging
import random
import time
from typing import Any, Callable

import httpx

from algorithms.vocabulary import DuelStatus
from service.judging import build_judge, parse_judge_config

from .. import egress, hotpath
from ..auth import Principal
from ..clients import ClientError, build_client, parse_client_config
from ..config import Settings
from ..db import Database
from ..ratelimits import DatabaseRateLimiter
from . import rules, skips, stores
from .judge_charges import Judgement
from .tasks import in_thread
from .types import CampaignEnded, Conflict, DomainError, DuelOutcome, DuelPlan, HeldDuel
from .views import duel_view_for

log = logging.getLogger("llmduel.campaigns")

#: The key of a graded verdict's score (of the answer shown first) in the judge detail a verdict store keeps.
STORED_SCORE = "score_first_shown"
#: The errors of a call or a judgement abandoned because its duel's reservation lapsed (rules.call_deadline).
CALL_OUTLIVED_EXPIRY = "the call did not return before the duel's reservation expired (LLMDUEL_CALL_TIMEOUT_SECONDS)"
JUDGE_OUTLIVED_EXPIRY = "the judge did not decide before the duel expired (LLMDUEL_DUEL_EXPIRY_SECONDS)"


class DuelOrchestration:
    """Runs duels: model clients, judges, and the choice between the hot path and the general path."""

    in_thread = staticmethod(in_thread)

    def init_orchestration(self, settings: Settings, db: Database) -> None:
        self._http = None
        self._clients: dict[tuple[int, int], Any] = {}
        self._judges: dict[int, Any] = {}
        # PostgreSQL: hot fast-path transactions on the event loop (asyncpg, service.db.HotPool).
        self._on_loop = settings.inline_transactions and db.hot_pool is not None
        self.hot_counts = {"loop": 0, "thread": 0}  # plan and vote transactions by where they ran
        # Single flight in this process: store key -> future of the duel paying for it (stores.Stored,
        # or None: not stored, look again).
        self._flights: dict[str, asyncio.Future] = {}
        self.store_poll_s = 0.2  # polling a claim held by another process
        # rpm/tpm of a client config, shared by every worker through the database (service/ratelimits.py)
        self.rate_limiter = DatabaseRateLimiter(db)
        # Store claims (table, row id) this process holds: the keeper renews their ``claimed_at`` every
        # heartbeat, so another process takes one over only once this process is gone or stalled,
        # within the take-over bound (the run lease), never the call timeout.
        self.live_claims: set[tuple[str, int]] = set()
        self.claim_lease = dt.timedelta(seconds=settings.run_lease_seconds)

    async def close_clients(self) -> None:
        for obj in list(self._clients.values()) + list(self._judges.values()):
            try:
                await obj.aclose()
            except Exception:
                pass
        self._clients.clear()
        self._judges.clear()
        if self._http is not None:
            await self._http.aclose()
            self._http = None

    # ------------------------------------------------------------ async orchestration
    def http_client(self):
        if self._http is None:
            # Under LLMDUEL_ALLOWED_HOSTS: every new connection is checked (service.egress).
            self._http = egress.http_client(self.settings.egress, httpx.Timeout(120.0, connect=10.0))
        return self._http

    def instant_results(self, plan: DuelPlan) -> dict[int, Any] | None:
        """Both answers at once when both clients are instant (simulated, no latency), else None."""
        for idx in (plan.i, plan.j):
            cfg = plan.models[idx].get("client") or {}
            if cfg.get("kind") != "simulated" or float(cfg.get("latency_s", 0.0) or 0.0) > 0:
                return None
        results: dict[int, Any] = {}
        for idx in (plan.i, plan.j):  # the order of the asynchronous path (failure draws)
            client = self._client(plan, idx)
            if not getattr(client, "instant", False):
                return None
            try:
                results[idx] = client.complete_now(plan.prompt)
            except Exception as exc:  # a simulated failure: the duel fails cleanly
                results[idx] = exc
        return results

    def _client(self, plan: DuelPlan, idx: int):
        key = (plan.campaign_id, idx)
        client = self._clients.get(key)
        if client is None:
            if len(self._clients) >= 4096:  # clients share one HTTP pool: dropping them is cheap
                self._clients.clear()
            m = plan.models[idx]
            # the stored row (validated when the campaign was created) parsed into its config model
            client = build_client(
                parse_client_config(m["client"]),
                model_name=m["name"],
                fixed_cost=float(m["cost"]),
                http=self.http_client(),
                limiter=self.rate_limiter,
                secret=rules.answer_secret(plan.draw_key),
            )
            self._clients[key] = client
        return client

    def _judge(self, plan: DuelPlan):
        judge = self._judges.get(plan.campaign_id)
        if judge is None:
            if len(self._judges) >= 1024:
                self._judges.clear()
            judge = build_judge(
                parse_judge_config(plan.judge),
                model_names=[m["name"] for m in plan.models],
                tie_policy=plan.tie_policy,
                http=self.http_client(),
                limiter=self.rate_limiter,
            )
            self._judges[plan.campaign_id] = judge
        return judge

    async def _extras(self, plan: DuelPlan) -> tuple[list[str] | None, str | None]:
        """The duel's prompt turns and reference answer (cached; one read per prompt and process)."""
        if plan.prompt_index is None:
            return None, None
        cached = self.cached_prompt_extras(plan.campaign_id, plan.prompt_index)
        if cached is not None:
            return cached
        return await self.in_thread(self.prompt_extras, plan.campaign_id, plan.prompt_index)

    async def _call_model(self, plan: DuelPlan, idx: int, turns: list[str] | None = None):
        """Model ``idx``'s answer (a Completion) or the exception that ended the call; a call
        still running at ``plan.deadline`` is abandoned (ClientError): its reservation lapses then."""
        limit = None if plan.deadline is None else plan.deadline - time.monotonic()
        try:
            client = self._client(plan, idx)
            async with asyncio.timeout(limit):
                if turns:  # a multi-turn prompt: the user turns as one conversation (service/prompts.py)
                    return await client.complete(plan.prompt, turns=turns)
                return await client.complete(plan.prompt)
        except asyncio.CancelledError:
            raise
        except TimeoutError:
            return ClientError(CALL_OUTLIVED_EXPIRY)
        except Exception as exc:  # ClientError, or a bug in a client: the duel fails cleanly
            return exc

    # ------------------------------------------------------------ the stores (pay once)
    async def _acquire(self, plan: DuelPlan, slot: Any, table: str, key: str, columns: dict):
        """A stored result for ``key`` (stores.Stored), or None: this duel claimed it and pays for the call.

        One paid call per key: in this process a second duel awaits the first one's
        future; another process's claim is polled until it is ready or older than
        the take-over bound (``claim_lease``: the run lease; its owner renews it every
        heartbeat while it lives), then taken over.
        """
        loop = asyncio.get_running_loop()
        asked = plan.__dict__.setdefault("_store_keys", set())
        if key in asked:
            return None  # two models of one duel with the same generation config: the second is not stored
        asked.add(key)
        while True:
            fut = self._flights.get(key)
            if fut is not None:
                out = await asyncio.shield(fut)
                if out is not None:
                    return out
                continue
            fut = loop.create_future()
            self._flights[key] = fut
            try:
                status, info = await self.in_thread(self.claim_tx, table, key, columns, self.claim_lease)
            except BaseException:
                self._resolve(key, fut, None)
                raise
            if status == "claimed":
                plan.claims[slot] = stores.Claim(table, int(info), key, extra={"future": fut})
                self.live_claims.add((table, int(info)))
                self.ensure_keeper()  # the heartbeat that keeps the claim
                return None
            self._resolve(key, fut, info if status == "ready" else None)
            if status == "ready":
                return info
            await asyncio.sleep(self.store_poll_s)

    def _resolve(self, key: str, fut: asyncio.Future, value: Any) -> None:
        if self._flights.get(key) is fut:
            del self._flights[key]
        if not fut.done():
            fut.set_result(value)

    async def _settle_claims(self, plan: DuelPlan, slots: list) -> None:
        """After the transaction that stores results: wake the waiters; release what was not stored."""
        for slot in slots:
            claim = plan.claims.pop(slot, None)
            if claim is None:
                continue
            self.live_claims.discard((claim.table, claim.row_id))
            if claim.finalized is None:
                try:
                    await asyncio.shield(self.in_thread(self.release_tx, claim))
                except Exception as exc:  # the claim then lapses after its lease
                    log.warning("releasing store claim %s failed: %s", claim.row_id, type(exc).__name__)
            self._resolve(claim.key, claim.extra["future"], claim.finalized)

    async def _answer(self, plan: DuelPlan, idx: int, turns: list[str] | None = None):
        """Model ``idx``'s answer: from the answer store when the campaign reuses answers, else a call."""
        model = plan.models[idx]
        if not stores.stores_answers(plan.answers, model):
            return await self._call_model(plan, idx, turns)
        mkey, phash = stores.model_key(model), stores.prompt_hash(plan.prompt)
        key = stores.answer_key(mkey, phash)
        stored = await self._acquire(plan, idx, "answer", key, {"model_key": mkey, "prompt_hash": phash})
        if stored is not None:
            return stored
        return await self._call_model(plan, idx, turns)

    async def _answers(self, plan: DuelPlan):
        turns, _ = await self._extras(plan)
        try:
            res_i, res_j = await asyncio.gather(self._answer(plan, plan.i, turns), self._answer(plan, plan.j, turns))
            outcome = await self.in_thread(self.store_answers_tx, plan, {plan.i: res_i, plan.j: res_j})
        finally:
            await self._settle_claims(plan, [plan.i, plan.j])
        return res_i, res_j, outcome

    async def _verdict(self, plan: DuelPlan, judge, text_a: str, text_b: str, deadline: float | None = None) -> dict:
        """The judge's verdict on the duel (in the duel's a/b terms) and the record_verdict_tx arguments;
        a judge still deciding at ``deadline`` (time.monotonic()) is abandoned as a judge error."""
        rng = random.Random(f"{plan.seed}:{plan.number}:judge")
        _, reference = await self._extras(plan)  # the prompt's reference answer, if any
        extra: dict[str, Any] = {}
        first, second, swapped, model_first, model_second = text_a, text_b, False, plan.model_a, plan.model_b
        if stores.stores_verdicts(plan.verdicts, plan.judge):
            first, second, swapped, order = stores.verdict_order(plan.judge, text_a, text_b)
            if swapped:
                model_first, model_second = plan.model_b, plan.model_a
            # a reference answer is part of what the judge reads: it is part of the key
            jkey, phash = (
                stores.judge_key(plan.judge),
                stores.prompt_hash(stores.verdict_question(plan.prompt, reference)),
            )
            key = stores.verdict_key(jkey, phash, first, second, order)
            stored = await self._acquire(plan, "judge", "verdict", key, {"judge_key": jkey, "prompt_hash": phash})
            if stored is not None:
                choice = stores.mirror(stored.choice) if swapped else stored.choice
                first_score = (stored.detail or {}).get(STORED_SCORE)  # a graded judge's score of the first answer
                return dict(
                    choice=choice,
                    judge_score=None if first_score is None else (1.0 - first_score if swapped else first_score),
                    judge_cost=0.0,
                    # the stored judgement's own detail (in the store's order), and where it came from
                    judge_detail={
                        **(stored.detail or {}),
                        "reused_verdict": stored.id,
                        "stored_order_swapped": swapped,
                    },
                    judge_error=None,
                    reused_verdict=stored,
                )
            extra["verdict_claim"] = plan.claims["judge"]
        try:
            async with asyncio.timeout(None if deadline is None else deadline - time.monotonic()):
                verdict = await judge.judge(
                    plan.prompt, first, second, model_a=model_first, model_b=model_second, rng=rng, reference=reference
                )
            choice, cost, detail, error = verdict.choice, verdict.cost, verdict.detail, verdict.error
            first_score = verdict.score  # a graded judge's score of the answer shown first, else None
        except asyncio.CancelledError:
            raise
        except TimeoutError:  # the pending duel's reservation lapses at its expiry: never charged after it
            choice, cost, detail, error, first_score = None, 0.0, None, JUDGE_OUTLIVED_EXPIRY, None
        except Exception as exc:
            choice, cost, detail, error = None, 0.0, None, f"judge raised {type(exc).__name__}"
            first_score = None
            log.warning("campaign %s duel %s: judge raised %s", plan.campaign_id, plan.duel_id, type(exc).__name__)
        if first_score is not None:  # kept with a stored verdict, so that a reuse gives the same graded score
            detail = {**(detail or {}), STORED_SCORE: first_score}
        if extra and detail is not None:  # asked in the store's canonical order: say whether it is the duel's
            detail = {**detail, "stored_order_swapped": swapped}
        if extra:
            extra["stored_choice"] = choice
        return dict(
            choice=stores.mirror(choice) if swapped else choice,
            judge_cost=cost,
            judge_detail=detail,
            judge_error=error,
            judge_score=None if first_score is None else (1.0 - first_score if swapped else first_score),
            **extra,
        )

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
        judge = self._judge(plan)
        deadline = rules.call_deadline(self.pending_expiry)  # the pending duel expires then
        try:
            verdict = await self._verdict(
                plan,
                judge,
                res_i.text if plan.a_is_i else res_j.text,
                res_j.text if plan.a_is_i else res_i.text,
                deadline,
            )
            j = Judgement(verdict.pop("choice"), f"judge:{plan.judge.get('kind')}", **verdict)
            outcome = await self.in_thread(hotpath.record_verdict, self, plan.duel_id, j)
        except Conflict as exc:  # the campaign ended or the duel expired meanwhile
            return DuelOutcome(plan.duel_id, "conflict", error=exc.detail)
        finally:
            await self._settle_claims(plan, ["judge"])
        if outcome.ended:
            self.schedule_webhook(plan.campaign_id)
        return outcome

    def plan_duel(self, campaign_id: int, principal: Principal | None, run: bool = False) -> DuelPlan:
        """Plan a duel in the calling thread (:func:`service.hotpath.plan.decide_plan`, SQLAlchemy driver)."""
        return hotpath.plan_duel(self, campaign_id, principal, run)

    def record_vote(self, duel_id: int, choice: str, principal: Principal) -> DuelOutcome:
        """Record a human vote in the calling thread (:func:`service.hotpath.verdict.decide_verdict`)."""
        return hotpath.record_vote(self, duel_id, choice, principal)

    async def _on_hot_path(self, campaign_id: int | None, route: Callable, *args: Any) -> bool:
        """The driver choice of :mod:`service.hotpath.routing`: from the config cache on the
        loop, else ``route(self, *args)`` (a small read) in a worker thread."""
        cached = hotpath.cached_choice(self, campaign_id)
        return cached if cached is not None else await self.in_thread(route, self, *args)

    async def _hot(self, on_hot: Callable, fast_async: Callable, sync_path: Callable, *args: Any) -> Any:
        """A request's one transaction: on PostgreSQL, ``fast_async`` (the asyncpg driver) on the
        event loop when ``on_hot()`` says it covers the campaign; else ``sync_path`` (the
        SQLAlchemy driver) in a worker thread. Both run the same sequence."""
        if hotpath.ENABLED and self._on_loop and await on_hot():
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
                    functools.partial(self._on_hot_path, campaign_id, hotpath.plan_on_hot_path, campaign_id),
                    hotpath.plan_duel_async,
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
            self.schedule_pregeneration(campaign_id)  # the next duels' answers, in the background
        if outcome.view is None:
            return await self.in_thread(self.get_duel, plan.duel_id, principal), plan.select_ms
        return duel_view_for(outcome.view, principal.admin), plan.select_ms

    async def vote(self, duel_id: int, choice: str, principal: Principal, comment: str | None = None) -> dict:
        """Count a vote; ``comment`` (optional, service/campaigns/skips.py) is stored with it."""
        note = skips.clean_comment(comment)  # ValueError before anything is written
        outcome = await self._hot(
            functools.partial(
                self._on_hot_path, hotpath.vote_campaign_hint(principal), hotpath.vote_on_hot_path, duel_id, principal
            ),
            hotpath.record_vote_async,
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
