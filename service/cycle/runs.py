"""Background runs: duels with an automatic judge until the campaign ends.

Each run has one owner process at a time (:mod:`.leases`). The *keeper* task of a
process renews its leases every heartbeat and, when ``LLMDUEL_RESUME_RUNS`` is on,
takes over active runs whose lease expired (their owner died) or was released (a
graceful stop).
"""

from __future__ import annotations

import asyncio
import logging

from sqlalchemy.exc import DBAPIError

from ..campaigns.batch_jobs import BatchJobs
from ..campaigns.calls import Calls
from ..campaigns.endings import Endings
from ..campaigns.leases import Leases
from ..campaigns.lifecycle import Lifecycle
from ..campaigns.resume import resume_limits_tx
from ..campaigns.stores import Stores
from ..campaigns.tasks import Background, Keeper, in_thread
from ..campaigns.types import Conflict, DuelOutcome, NotFound
from ..campaigns.webhooks import Webhooks
from ..config import Settings
from ..db import Database
from .batch_rounds import BatchRounds
from .model_changes import ModelChanges
from .orchestration import Cycle

log = logging.getLogger("llmduel.campaigns")


class RunFailures:
    """The run's failure cap (``LLMDUEL_RUN_MAX_FAILURES``), shared by its concurrent tasks.

    Consecutive failed duels of the whole run, in the order they finish: a duel that
    succeeds resets the count. At the cap the run starts no further duel (the ones
    in flight finish) and ``error`` says why.
    """

    def __init__(self, cap: int):
        self.cap = cap
        self.consecutive = 0
        self.error: str | None = None

    def count(self, outcome: DuelOutcome) -> None:
        if not outcome.failed:
            self.consecutive = 0
            return
        self.consecutive += 1
        if self.error is None and self.consecutive >= self.cap:
            self.error = f"run paused after {self.consecutive} consecutive failed duels; last error: {outcome.error}"


class Runs:
    """This process's background runs: start, resume, take over, and the keeper's beat.

    Owns the run tasks; plans and executes duels through ``cycle``, takes and renews
    leases through ``leases``, and keeps the store claims of the calls under way
    (``calls.live_claims``) alive through ``stores``. :meth:`beat` is the keeper's one heartbeat (:class:`~.tasks.Keeper`)."""

    def __init__(
        self,
        settings: Settings,
        db: Database,
        *,
        cycle: Cycle,
        lifecycle: Lifecycle,
        calls: Calls,
        leases: Leases,
        stores: Stores,
        webhooks: Webhooks,
        keeper: Keeper,
        background: Background,
    ):
        self.settings = settings
        self.db = db
        self.cycle = cycle
        self.lifecycle = lifecycle
        self.calls = calls
        self.leases = leases
        self.stores = stores
        self.webhooks = webhooks
        self.keeper = keeper
        self.background = background
        self.batch_jobs = BatchJobs(db, leases.owner_id)
        self.batch_rounds = BatchRounds(cycle, calls, self.batch_jobs)
        self._runs: dict[int, asyncio.Task] = {}
        self._starting: set[int] = set()  # runs being started here (not yet in _runs)
        self._failures: dict[int, RunFailures] = {}  # the failure count of each run driven here
        self.model_changes = ModelChanges(settings, db, lifecycle.views, Endings())

    async def cancel_runs(self) -> None:
        """Stop this process's runs and give their leases up (another process takes them over)."""
        self.keeper.stop()
        ids = list(self._runs)
        for task in list(self._runs.values()):
            task.cancel()
        for task in list(self._runs.values()):
            try:
                await task
            except BaseException:
                pass
        self._runs.clear()
        try:
            await in_thread(self.leases.release_leases_tx, ids)
        except Exception as exc:  # the database is away: the leases expire instead
            log.warning("could not release the run leases (%s)", type(exc).__name__)

    async def beat(self) -> None:
        """One heartbeat: renew this process's leases and store claims, take over runs whose owner is gone,
        and send the webhook events that are due (retries, and claims a dead process left)."""
        mine = [cid for cid in self._runs if self.run_active_here(cid)]
        if mine:
            kept = await in_thread(self.leases.renew_leases_tx, mine)
            for cid in set(mine) - kept:  # taken over meanwhile: the plan's fencing ends the loop
                log.info("campaign %s: this process no longer owns its run", cid)
        live = list(self.calls.live_claims)
        if live:  # store claims of calls under way here: still alive
            await in_thread(self.stores.renew_claims_tx, live)
        duels = dict(self.calls.live_duels)
        if duels:  # annotators' duels whose models are called here: their leases too
            await in_thread(self.leases.renew_calling_duels_tx, duels)
        if self.settings.resume_runs:
            await self.resume_runs()
        self.webhooks.send_due()  # in its own task, never holding up the heartbeat

    async def start_run(self, campaign_id: int, max_duels: int | None, concurrency: int) -> dict:
        if campaign_id in self._runs and not self._runs[campaign_id].done():
            raise Conflict(f"a run is already active for campaign {campaign_id}")
        self._starting.add(campaign_id)
        try:
            run = await in_thread(self.lifecycle.start_run_tx, campaign_id, max_duels, concurrency)  # 409 if owned
            self._runs[campaign_id] = self.background.spawn(self._run_loop(campaign_id, concurrency))
        finally:
            self._starting.discard(campaign_id)
        self.keeper.ensure()
        return run

    def run_active_here(self, campaign_id: int) -> bool:
        task = self._runs.get(campaign_id)
        return task is not None and not task.done()

    async def _run_loop(self, campaign_id: int, concurrency: int) -> None:
        try:
            batch = await in_thread(self.batch_jobs.batch_config_tx, campaign_id)
            if batch is not None:  # a batch campaign: rounds on the providers' batch APIs
                error = await self.batch_rounds.run(campaign_id, batch)
            else:
                failures = self._failures[campaign_id] = RunFailures(self.settings.run_max_failures)
                await asyncio.gather(*(self._run_worker(campaign_id, failures) for _ in range(concurrency)))
                error = failures.error
            # Every duel this run started is finished now.
            await in_thread(self.lifecycle.end_run_tx, campaign_id, error)
            self.webhooks.send_due()  # its campaign.settled, if the spend is now final
        except asyncio.CancelledError:
            raise
        except Exception as exc:  # pragma: no cover - defensive
            log.exception("campaign %s: run crashed", campaign_id)
            try:
                await in_thread(self.lifecycle.end_run_tx, campaign_id, f"run crashed: {type(exc).__name__}")
            except Exception:
                pass
        finally:
            if self._runs.get(campaign_id) is asyncio.current_task():
                self._runs.pop(campaign_id, None)
                self._failures.pop(campaign_id, None)

    async def _give_up_duel(self, campaign_id: int, duel_id: int) -> None:
        """A run duel whose execution met a database error: expire it once the database answers again,
        so it does not hold one of the run's slots until the call timeout."""
        backoff = 0.5
        while True:
            try:
                await in_thread(self.leases.release_run_duel_tx, campaign_id, duel_id)
                return
            except DBAPIError:
                log.warning(
                    "campaign %s: database error releasing duel %s, retrying in %.1fs", campaign_id, duel_id, backoff
                )
                await asyncio.sleep(backoff)
                backoff = min(backoff * 2, 10.0)

    async def _run_worker(self, campaign_id: int, failures: "RunFailures") -> None:
        """Drive duels until the campaign ends, the run ends, or the run's failure cap is reached."""
        db_backoff = 0.5
        while failures.error is None:
            try:
                plan = await self.cycle.plan(campaign_id, None, True)
            except Conflict as exc:
                if exc.retry_later:
                    await asyncio.sleep(0.05)
                    continue
                return
            except NotFound:
                return
            except Exception as exc:
                if isinstance(exc, DBAPIError):  # database away: wait and retry
                    log.warning("campaign %s: database error in run, retrying in %.1fs", campaign_id, db_backoff)
                    await asyncio.sleep(db_backoff)
                    db_backoff = min(db_backoff * 2, 10.0)
                    continue
                raise
            db_backoff = 0.5
            try:
                outcome = await self.cycle.execute(plan, run=True)
            except Exception as exc:
                if isinstance(exc, DBAPIError):
                    await self._give_up_duel(campaign_id, plan.duel_id)
                    continue
                raise
            failures.count(outcome)

    def _driven_here(self, campaign_id: int) -> bool:
        return self.run_active_here(campaign_id) or campaign_id in self._starting

    async def resume_runs(self) -> list[int]:
        """Take over the active runs whose lease is free or expired, and drive them here."""
        taken = await in_thread(self.leases.take_over_runs_tx, self._driven_here)
        for cid, concurrency in taken:
            if self.run_active_here(cid) or cid in self._starting:  # started here meanwhile
                continue
            self._runs[cid] = self.background.spawn(self._run_loop(cid, concurrency))
            log.info("campaign %s: took over its background run", cid)
        self.keeper.ensure()
        return [cid for cid, _ in taken]

    async def resume_run(self, campaign_id: int, concurrency: int | None = None) -> dict:
        """Restart the campaign's paused or failed run (:mod:`.resume`); ``concurrency`` overrides the stored one."""
        remaining, stored, error = await in_thread(resume_limits_tx, self.db, campaign_id)
        run = await self.start_run(campaign_id, remaining, concurrency or stored)
        return {"campaign_id": campaign_id, "run": run, "previous_error": error}

    async def change_model(
        self, campaign_id: int, name: str, *, reason: str | None, new_model=None, resume: bool = True
    ) -> dict:
        """Disable model ``name`` (or replace it by ``new_model``) and keep the campaign going
        (:mod:`.model_changes`): the failures counted against its run start again from zero, and with
        ``resume`` a campaign with an automatic judge whose run had stalled gets it back (a run paused
        on its failure cap, or a campaign paused on a provider fault).
        ``{"campaign_id", "change", "run"}``: ``run`` is the restarted run or None."""
        done = await in_thread(self.model_changes.change_tx, campaign_id, name, reason, new_model)
        self.cycle.config_cache.pop(campaign_id, None)  # this process; others re-read it (shared.config_of)
        failures = self._failures.get(campaign_id)
        if failures is not None and failures.error is None:
            failures.consecutive = 0
        run = None
        automatic = done["judge_kind"] != "human"
        stalled = done["revived"] or (done["run_error"] is not None and not done["run_active"])
        if resume and automatic and stalled and done["status"] == "running" and not self.run_active_here(campaign_id):
            try:
                run = (await self.resume_run(campaign_id))["run"]
            except Conflict:  # nothing to resume (its max_duels used up): the change stands
                run = None
        return {"campaign_id": campaign_id, "change": done["change"], "run": run}
