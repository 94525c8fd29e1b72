"""Background runs: duels with an automatic judge until the campaign ends, resumed after a restart."""

from __future__ import annotations

import asyncio
import logging

from sqlalchemy.exc import DBAPIError

from ..models import Campaign
from .types import Conflict, NotFound

log = logging.getLogger("llmduel.campaigns")


class BackgroundRuns:
    """Background runs of automatically judged campaigns."""

    def init_runs(self) -> None:
        self._runs: dict[int, asyncio.Task] = {}
        self._background: set[asyncio.Task] = set()

    async def cancel_runs(self) -> None:
        for task in list(self._runs.values()):
            task.cancel()
        for task in list(self._runs.values()):
            try:
                await task
            except BaseException:
                pass
        self._runs.clear()

    # ------------------------------------------------------------ background runs
    def spawn(self, coro) -> asyncio.Task:
        task = asyncio.get_running_loop().create_task(coro)
        self._background.add(task)
        task.add_done_callback(self._background.discard)
        return task

    async def start_run(self, campaign_id: int, max_duels: int | None, concurrency: int) -> dict:
        if campaign_id in self._runs and not self._runs[campaign_id].done():
            raise Conflict(f"a run is already active for campaign {campaign_id}")
        run = await self.in_thread(self.start_run_tx, campaign_id, max_duels, concurrency)
        self._runs[campaign_id] = self.spawn(self._run_loop(campaign_id, concurrency))
        return run

    def run_active_here(self, campaign_id: int) -> bool:
        task = self._runs.get(campaign_id)
        return task is not None and not task.done()

    async def _run_loop(self, campaign_id: int, concurrency: int) -> None:
        try:
            results = await asyncio.gather(*(self._run_worker(campaign_id) for _ in range(concurrency)))
            error = next((r for r in results if r), None)
            # Every duel this run started is finished now.
            await self.in_thread(self.end_run_tx, campaign_id, error)
        except asyncio.CancelledError:
            raise
        except Exception as exc:  # pragma: no cover - defensive
            log.exception("campaign %s: run crashed", campaign_id)
            try:
                await self.in_thread(self.end_run_tx, campaign_id, f"run crashed: {type(exc).__name__}")
            except Exception:
                pass
        finally:
            if self._runs.get(campaign_id) is asyncio.current_task():
                self._runs.pop(campaign_id, None)

    async def _run_worker(self, campaign_id: int) -> str | None:
        """Drive duels until the campaign or the run ends; returns an error or None."""
        failures = 0
        db_backoff = 0.5
        while True:
            try:
                plan = await self.plan(campaign_id, None, True)
            except Conflict as exc:
                if exc.retry_later:
                    await asyncio.sleep(0.05)
                    continue
                return None
            except NotFound:
                return None
            except Exception as exc:
                if isinstance(exc, DBAPIError):  # database away: wait and retry
                    log.warning("campaign %s: database error in run, retrying in %.1fs", campaign_id, db_backoff)
                    await asyncio.sleep(db_backoff)
                    db_backoff = min(db_backoff * 2, 10.0)
                    continue
                raise
            db_backoff = 0.5
            try:
                outcome = await self.execute(plan)
            except Exception as exc:
                if isinstance(exc, DBAPIError):
                    await asyncio.sleep(db_backoff)
                    continue
                raise
            if outcome.failed:
                failures += 1
                if failures >= self.settings.run_max_failures:
                    return f"run paused after {failures} consecutive failed duels; last error: {outcome.error}"
            else:
                failures = 0

    async def resume_runs(self) -> list[int]:
        ids = await self.in_thread(self.active_run_ids)
        for cid in ids:
            if not self.run_active_here(cid):
                with self.db.read() as s:
                    concurrency = s.get(Campaign, cid).run_concurrency or 1
                self._runs[cid] = self.spawn(self._run_loop(cid, concurrency))
                log.info("campaign %s: resumed its background run", cid)
        return ids
