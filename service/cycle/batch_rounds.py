"""A batch campaign's background run, in rounds (:class:`BatchRounds`).

Round ``k`` (its size from ``service.schemas.batch_config.round_size``):

1. *plan*: up to the round's size of duels, each through the one plan sequence (its budget
   reservation at the worst case, its ``max_duels`` and fencing checks), from what the policy knew
   before the round: the round's earlier duels are in flight, so they count as pulled; a plan
   refused for the budget or a cap ends the planning (a budget that holds no duel ends the
   campaign before anything is sent). The duels keep their reservations for the batch window.
2. *answers*: every model call of the round goes out as one batch per model endpoint
   (:class:`~.batch_collector.Collector`); each duel's answers are stored as they come (charged at
   the batch price).
3. *verdicts*: every judge call of the round's answered duels goes out as one batch per judge
   endpoint.
4. *fold*: the verdicts are recorded in the round's plan order (the duels' numbers), never in the
   order the provider returned them; the campaign stops at the first verdict that certifies.

Crash safety: a run taken over first adopts its open batches and their duels
(:meth:`~service.campaigns.batch_jobs.BatchJobs.adopt_tx`), collects the batches (found by their
key when the crash came before their id was stored) and finishes those duels, serving every request
a collected batch answered from its results instead of sending it again. A batch is closed only after
its results are stored (answers) or folded (verdicts), so a crash between fetching and storing them
leaves it open for the take-over, which fetches them again: nothing is bought twice.
"""

from __future__ import annotations

import asyncio
import datetime as dt
import logging
import time
from typing import Any

from sqlalchemy.exc import DBAPIError

from algorithms.vocabulary import DuelStatus
from judges.llm import LLMJudge

from .. import cycle as cycle_sequences
from ..campaigns.batch_jobs import BatchJobs
from ..campaigns.calls import Calls
from ..campaigns.judge_charges import Judgement
from ..campaigns.lost_commits import store_paid
from ..campaigns.tasks import in_thread
from ..campaigns.types import Conflict, DuelOutcome, DuelPlan, NotFound
from ..clients import ClientError, parse_client_config
from ..clients.batch import BatchResult
from ..clients.batch_apis import build_batch_api
from ..images.judge import VisionJudgeClient
from ..judging import build_judge, parse_judge_config
from ..models import utcnow
from .batch_collector import Collector, RoundFailed, current_duel
from .orchestration import Cycle

log = logging.getLogger("llmduel.batch")

#: How many times a duel's transaction is tried when the database rolled it back (a deadlock, a lock timeout).
TX_TRIES = 6
#: How long a round waits for the plan of its first duel while the plan asks to retry later.
PLAN_WAIT_S = 60.0
#: The error of a round's duel that its round ended without judging (it no longer holds a reservation).
ROUND_LEFT = "its batch round ended before its verdict"


class BatchRounds:
    """Drives the rounds of this process's batch runs (one call of :meth:`run` per run)."""

    def __init__(self, cycle: Cycle, calls: Calls, jobs: BatchJobs):
        self.cycle = cycle
        self.calls = calls
        self.jobs = jobs

    async def run(self, campaign_id: int, cfg: dict[str, Any]) -> str | None:
        """Rounds until the campaign ends or the run stops; the run's error, if any."""
        try:
            await self._recover(campaign_id, cfg)
            while True:
                started = await in_thread(self.jobs.start_round_tx, campaign_id)
                if started is None:
                    return None
                k, size = started
                cfg = {**cfg, "rounds": k}
                plans, stalled = await self._plan_round(campaign_id, size)
                if not plans:  # the run stopped, the campaign ended, or nothing could be planned for long
                    return None if stalled is None else f"batch round {k} planned no duel: {stalled}"
                ended = await self._round(
                    campaign_id, cfg, k=k, duels=[(p, DuelStatus.CALLING, None, None) for p in plans]
                )
                if ended:
                    return None
        except (RoundFailed, ClientError) as exc:  # ClientError: a batch API refused a call for good (a 4xx, no key)
            why = f"batch round failed: {exc.message if isinstance(exc, ClientError) else exc}"
            await in_thread(self.jobs.release_unsent_tx, campaign_id, why)
            return why

    async def _plan_round(self, campaign_id: int, size: int) -> tuple[list[DuelPlan], str | None]:
        """The round's plans, and why none could be planned when the plan kept asking to retry later
        (duels of others in flight, reservations) for :data:`PLAN_WAIT_S` (None: nothing to report)."""
        plans: list[DuelPlan] = []
        deadline = time.monotonic() + PLAN_WAIT_S
        while len(plans) < size:
            try:
                plans.append(await self.cycle.plan(campaign_id, None, True))
            except Conflict as exc:
                if exc.retry_later and not plans:  # duels of others in flight: wait for them, not for ever
                    if time.monotonic() > deadline:
                        return plans, f"{exc.detail} (for {PLAN_WAIT_S:g} s)"
                    await asyncio.sleep(0.1)
                    continue
                break
            except NotFound:
                break
        return plans, None

    def _collector(self, campaign_id: int, cfg: dict, *, k: int, phase: str, cache: dict) -> Collector:
        async def still_mine() -> bool:
            return await in_thread(self.jobs.run_is_mine_tx, campaign_id)

        return Collector(
            jobs=self.jobs,
            http=self.calls.http_client(),
            campaign_id=campaign_id,
            round=k,
            phase=phase,
            poll_s=float(cfg["poll_seconds"]),
            window_s=float(cfg["window_seconds"]),
            still_mine=still_mine,
            cache=cache,
        )

    async def _round(self, campaign_id: int, cfg: dict, *, k: int, duels: list, cache: dict | None = None) -> bool:
        """One round over ``duels`` ((plan, status, answer a, answer b), in plan order); whether it ended the campaign."""
        cache = cache if cache is not None else {}
        until = utcnow() + dt.timedelta(seconds=float(cfg["window_seconds"]) * 2 + 60)
        await in_thread(self.jobs.extend_tx, campaign_id, [p.duel_id for p, *_ in duels], until)
        ended = False
        texts: dict[int, tuple[str, str]] = {}
        calling = [p for p, status, *_ in duels if status == DuelStatus.CALLING]
        for p, status, a, b in duels:
            p.deadline = None  # a batch call ends with its window, not with the call timeout
            if status == DuelStatus.PENDING and a is not None and b is not None:
                texts[p.duel_id] = (a, b)
        if calling:
            answers = self._collector(campaign_id, cfg, k=k, phase="answers", cache=cache)
            self.calls.wrappers[campaign_id] = answers.wrap
            try:
                outcomes = await answers.run([self._answers(p) for p in calling])
            finally:
                self.calls.wrappers.pop(campaign_id, None)
            for p, (outcome, pair) in zip(calling, outcomes):
                ended = ended or outcome.ended
                if pair is not None and outcome.status == DuelStatus.PENDING:
                    texts[p.duel_id] = pair
        if ended:
            self.cycle.deps.webhooks.schedule_webhook(campaign_id)
            return True
        judged = [p for p, *_ in duels if p.duel_id in texts]
        if not judged or judged[0].judge.get("kind") == "human":
            await in_thread(self.jobs.close_round_tx, campaign_id, [p.duel_id for p, *_ in duels], ROUND_LEFT)
            return False
        await in_thread(self.jobs.extend_tx, campaign_id, [p.duel_id for p in judged], until)
        verdicts_phase = self._collector(campaign_id, cfg, k=k, phase="verdicts", cache=cache)
        judge = self._round_judge(judged[0], verdicts_phase)
        try:
            verdicts = await verdicts_phase.run(
                [self._verdict(p, judge, *texts[p.duel_id]) for p in judged], keep_failure=True, close=False
            )
        finally:
            await judge.aclose()
        # Recorded (and charged) even when a judge batch of the phase failed: what the provider answered
        # is billed; a verdict whose calls failed fails its duel, as after its last batch. The judge batches
        # are closed after the fold: killed before, a take-over folds them from the provider's results.
        try:
            for p, verdict in sorted(zip(judged, verdicts), key=lambda pv: pv[0].number):  # the plan order
                outcome = await self._record(p, verdict)
                if outcome.ended:
                    self.cycle.deps.webhooks.schedule_webhook(campaign_id)
                    ended = True
        except Exception:
            await verdicts_phase.close_fetched()
            raise
        await verdicts_phase.close_fetched()
        if verdicts_phase.failure is not None and not ended:
            raise verdicts_phase.failure
        if not ended:  # nothing of the round may stay in flight (the next round would wait for it)
            await in_thread(self.jobs.close_round_tx, campaign_id, [p.duel_id for p, *_ in duels], ROUND_LEFT)
        return ended

    async def _answers(self, plan: DuelPlan) -> tuple[DuelOutcome, tuple[str, str] | None]:
        """One duel's answers (batched through the wrapped clients), stored; (outcome, (answer a, answer b))."""
        current_duel.set(plan.duel_id)
        if plan.outcome is not None:  # both answered inside the plan (instant models)
            res = plan.results or {}
            outcome = plan.outcome
        else:
            turns, _ = await self.calls.extras(plan)
            try:
                ri, rj = await asyncio.gather(
                    self.calls.answer(plan, plan.i, turns), self.calls.answer(plan, plan.j, turns)
                )
                res = {plan.i: ri, plan.j: rj}
                outcome = await store_paid(
                    self.cycle, plan.duel_id, "answers", lambda: duel_tx(self.cycle.store_answers_tx, plan, res)
                )
            except DBAPIError as exc:  # the database stayed away (lost_commits.store_paid): the duel is given up
                return DuelOutcome(
                    plan.duel_id, "abandoned", failed=True, error=f"database error: {type(exc).__name__}"
                ), None
            finally:
                await self.calls.settle_claims(plan, [plan.i, plan.j])
        if outcome.status != DuelStatus.PENDING:
            return outcome, None
        ta, tb = getattr(res.get(plan.model_a), "text", None), getattr(res.get(plan.model_b), "text", None)
        view = outcome.view or {}
        ta = ta if ta is not None else view.get("answer_a")
        tb = tb if tb is not None else view.get("answer_b")
        return outcome, (ta, tb) if ta is not None and tb is not None else None

    def _round_judge(self, plan: DuelPlan, collector: Collector) -> Any:
        """The campaign's judge with its model calls going into the round's batch."""
        judge = build_judge(
            parse_judge_config(plan.judge),
            model_names=[m["name"] for m in plan.models],
            tie_policy=plan.tie_policy,
            http=self.calls.http_client(),
        )
        for j in getattr(judge, "jurors", None) or [judge]:
            if getattr(j, "client", None) is not None:
                # the images the judge is shown go into its batch request too (service/images/judge.py)
                wrapped = collector.wrap(j.client)
                if getattr(getattr(j.client, "config", None), "kind", "simulated") != "simulated":
                    wrapped = VisionJudgeClient(wrapped, self.calls.blind_copies)
                j.client = wrapped
        if isinstance(judge, LLMJudge) and judge.auto is not None:
            # orders: auto measures its rates across rounds: the campaign's judge of this process keeps them
            judge.auto = self.calls.judge(plan).auto
        return judge

    async def _verdict(self, plan: DuelPlan, judge: Any, text_a: str, text_b: str) -> dict:
        current_duel.set(plan.duel_id)
        # a verdict key in flight for an earlier duel of this round is recorded only at the fold, after
        # this phase: the duel pays its own call instead of waiting (later rounds reuse the stored one)
        return await self.calls.verdict(plan, judge, text_a, text_b, wait=False)

    async def _record(self, plan: DuelPlan, verdict: dict) -> DuelOutcome:
        j = Judgement(verdict.pop("choice"), f"judge:{plan.judge.get('kind')}", **verdict)
        try:
            return await store_paid(
                self.cycle,
                plan.duel_id,
                "verdict",
                lambda: duel_tx(cycle_sequences.record_verdict, self.cycle, plan.duel_id, j),
            )
        except DBAPIError as exc:  # the database stayed away (lost_commits.store_paid): the duel is given up
            return DuelOutcome(plan.duel_id, "abandoned", failed=True, error=f"database error: {type(exc).__name__}")
        except Conflict as exc:  # the campaign ended (certified by an earlier duel of the round) or the duel expired
            return DuelOutcome(plan.duel_id, "conflict", error=exc.detail)
        finally:
            await self.calls.settle_claims(plan, ["judge"])

    # ------------------------------------------------------------ a run taken over mid-round
    async def _recover(self, campaign_id: int, cfg: dict) -> None:
        jobs, duel_ids = await in_thread(self.jobs.adopt_tx, campaign_id)
        if not jobs:
            return
        cache: dict[str, BatchResult] = {}
        http = self.calls.http_client()
        collected: list[Collector] = []  # their batches closed once the round below stored their results
        for job in jobs:
            api = build_batch_api(parse_client_config(job["client"]), http)
            bid = job["provider_batch_id"]
            if api is not None and bid is None:
                bid = await api.find(job["key"])
            if api is None or bid is None:  # it never reached the provider
                await in_thread(self.jobs.close_tx, job["id"], "failed", "not found at the provider after a take-over")
                continue
            if not await in_thread(self.jobs.submitted_tx, job["id"], bid):
                continue  # adopted by another process meanwhile, which collects it
            collector = self._collector(campaign_id, cfg, k=int(job["round"]), phase=job["phase"], cache=cache)
            rows = job["requests"]
            collected.append(collector)
            results = await collector.collect(api, job["id"], bid, [r["custom_id"] for r in rows])
            for r in rows:
                cache[r["hash"]] = results[r["custom_id"]]
        log.info("campaign %s: collected %d batches of the run taken over", campaign_id, len(jobs))
        try:
            duels = await in_thread(self.jobs.duel_plans_tx, campaign_id, duel_ids)
            if duels:
                await self._round(campaign_id, cfg, k=int(cfg.get("rounds") or 1), duels=duels, cache=cache)
        except Exception:
            await asyncio.gather(*(c.close_fetched() for c in collected))
            raise
        await asyncio.gather(*(c.close_fetched() for c in collected))


async def duel_tx(fn: Any, *args: Any) -> Any:
    """A duel's transaction of a round (its answers stored, its verdict recorded), tried again after a
    database error that rolled it back (a deadlock or serialization failure between the round's many
    concurrent transactions, a lock timeout, SQLite's "database is locked"), at most :data:`TX_TRIES`
    times: what the provider billed is not dropped for a transient refusal. A lost connection (whether
    the commit happened is unknown) is raised at once, to :func:`.lost_commits.store_paid`, which looks
    whether it committed before it runs the transaction again: never stored twice."""
    delay = 0.05
    for attempt in range(1, TX_TRIES + 1):
        try:
            return await in_thread(fn, *args)
        except DBAPIError as exc:
            if exc.connection_invalidated or attempt == TX_TRIES:
                raise
            log.warning("database error in a batch round's transaction (%s), trying again", type(exc).__name__)
            await asyncio.sleep(delay)
            delay = min(2 * delay, 1.0)
