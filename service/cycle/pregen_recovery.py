"""Pre-generation batches that a process gone left open (:class:`PregenRecovery`).

A human campaign's answers bought in batches (service/campaigns/pregeneration.py) are a
``batch_jobs`` row of phase ``pregen`` before they are sent, each request with the answer's store
key, model and prompt, and each call holds its answer's store claim until the answer is stored.
When the process that sent them dies, its claims stop being renewed; once they are older than the
take-over bound (the run lease), another process (or the restarted one) adopts the batch
(:meth:`~service.campaigns.batch_jobs.BatchJobs.orphaned_pregen_tx`, at its heartbeat, and before it
pre-generates for the campaign), claims the answers again (so a duel needing one waits for it
instead of calling the model), finds the batch by its key when its id was not yet stored, waits for
it and stores and charges every answer it brought back, at the batch price: no request is sent
again. The batch is closed only once its answers are stored, so a process killed in between leaves
it to the next take-over. A campaign stopped meanwhile has the batch cancelled at the next poll; what the provider had
finished is still stored and charged.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any

from ..campaigns.batch_jobs import BatchJobs
from ..campaigns.calls import Calls
from ..campaigns.pregeneration import Pregeneration
from ..campaigns.tasks import Background, in_thread
from ..campaigns.types import DuelPlan
from ..clients import Completion, parse_client_config
from ..clients.batch_apis import build_batch_api
from .batch_collector import Collector

log = logging.getLogger("llmduel.batch")


class PregenRecovery:
    """Adopts and collects the open pre-generation batches whose process is gone."""

    def __init__(self, jobs: BatchJobs, pregen: Pregeneration, calls: Calls, background: Background):
        self.jobs = jobs
        self.pregen = pregen
        self.calls = calls
        self.background = background

    async def beat(self) -> None:
        """The heartbeat's part: every orphaned pre-generation batch is adopted and collected (in the background)."""
        for job in await in_thread(self.jobs.orphaned_pregen_tx, self.calls.claim_lease):
            self.background.spawn(self._quietly(job))

    async def recover(self, campaign_id: int) -> None:
        """Before the campaign pre-generates: its orphaned batches, adopted and collected."""
        found = await in_thread(self.jobs.orphaned_pregen_tx, self.calls.claim_lease, campaign_id)
        await asyncio.gather(*(self._quietly(job) for job in found))

    async def _quietly(self, job: dict[str, Any]) -> None:
        try:
            await self.collect(job)
        except Exception as exc:  # closed, so the duels waiting for its answers make them (its claims are released)
            why = f"collecting it after a take-over failed: {type(exc).__name__}: {exc}"
            log.warning("campaign %s: pre-generation batch %s: %s", job["campaign_id"], job["id"], why)
            try:
                await in_thread(self.jobs.close_tx, job["id"], "failed", why[:500])
            except Exception as again:  # the database is away too: the batch stays open, this process's
                log.warning("campaign %s: closing batch %s failed: %s", job["campaign_id"], job["id"], again)

    async def collect(self, job: dict[str, Any]) -> None:
        cid, rows = int(job["campaign_id"]), job["requests"]
        context = await in_thread(self.pregen.context_tx, cid)
        cfg = await in_thread(self.jobs.batch_config_tx, cid)
        http = self.calls.http_client()
        api = build_batch_api(parse_client_config(job["client"]), http)
        bid = job["provider_batch_id"]
        if api is not None and bid is None:
            bid = await api.find(job["key"])
        if api is None or bid is None or context is None or cfg is None:  # it never reached the provider
            await in_thread(self.jobs.close_tx, job["id"], "failed", "not found at the provider after a take-over")
            return
        if not await in_thread(self.jobs.submitted_tx, job["id"], bid):
            return  # adopted by another process meanwhile, which collects it
        plans = list(await asyncio.gather(*(self._claim(context, r) for r in rows)))
        log.info("campaign %s: collecting pre-generation batch %s of a process gone", cid, bid)

        async def still_running() -> bool:
            return await in_thread(self.jobs.campaign_running_tx, cid)

        poll, window = float(cfg["poll_seconds"]), float(cfg["window_seconds"])
        collector = Collector(
            jobs=self.jobs,
            http=http,
            campaign_id=cid,
            round=int(job["round"]),
            phase="pregen",
            poll_s=poll,
            window_s=window,
            still_mine=still_running,
        )
        try:
            results = await collector.collect(api, job["id"], bid, [r["custom_id"] for r in rows])
            for r, plan in zip(rows, plans):
                res, n = results[r["custom_id"]], int(r["model"])
                if plan is None or res.error is not None:  # stored meanwhile, or failed: released below
                    continue
                out = collector.completion(self.calls.client(plan, n), res)
                if isinstance(out, Completion):
                    out = await self.calls.keep_images(out)
                    # its charge replaces the dead process's hold of the answer's key; after a lost connection,
                    # stored again only when it did not commit
                    await self.pregen.store_recovered_answer(
                        cid, n, plan.claims[n], out, prompt=r["prompt"], hold_key=r.get("key")
                    )
            await collector.close_fetched()  # only now: killed before, the next take-over stores them
        finally:
            for r, plan in zip(rows, plans):
                if plan is not None:
                    await self.calls.settle_claims(plan, [int(r["model"])])

    async def _claim(self, context: DuelPlan, row: dict[str, Any]) -> DuelPlan | None:
        """The answer's store claim, taken again for this process (None: it is stored already)."""
        plan = DuelPlan(**{**context.__dict__, "prompt": row["prompt"], "claims": {}})
        columns = {"model_key": row["model_key"], "prompt_hash": row["prompt_hash"]}
        stored = await self.calls.acquire(plan, int(row["model"]), "answer", row["key"], columns=columns, batch=True)
        return plan if stored is None else None
