"""Gathering a round's calls into provider batches (:class:`Collector`, :class:`BatchedModel`).

A :class:`BatchedModel` stands in for a model client (or an LLM judge's client) during one phase
of a round: ``complete`` builds the request the client would send, parks it in the collector and
waits. When the phase's calls have all been made (no new one for ``settle_s``), :meth:`Collector.flush`
sends the parked requests as one batch per model endpoint (the batch row written first,
:class:`~service.campaigns.batch_jobs.BatchJobs`), polls each until it ends, and hands every caller
its answer, charged at the model's batch price (its list price when none is known). A request that
failed or expired is parked again and goes out in the next batch of the phase, at most
:data:`MAX_SENDS` times, then fails its duel; it is never dropped silently. A batch that has not
ended within its window is cancelled and what it finished before the cancellation is still
collected (the provider bills it): those callers get their answers, the others fail, and the phase
then ends with :class:`RoundFailed` (``failure``) once every call has returned, so the round can
store and charge what came back before it fails.

A batch whose results are fetched is ``storing`` (:meth:`~service.campaigns.batch_jobs.BatchJobs.fetched_tx`)
and is closed only once its callers have stored them (:meth:`Collector.close_fetched`): a process killed
in between leaves it open, and the process that takes over fetches its results again instead of sending it.

A request whose result a former owner's batch already holds (a run taken over mid-round) is served
from ``cache`` (keyed by :func:`~service.campaigns.batch_jobs.body_hash`) and not sent again.
"""

from __future__ import annotations

import asyncio
import contextvars
import logging
import os
import time
from dataclasses import dataclass, field
from typing import Any, Callable, NoReturn

import httpx

from ..campaigns.batch_jobs import CANCEL_GRACE_S, BatchJobs, body_hash
from ..campaigns.tasks import THREAD_WORK, WorkCount, in_thread
from ..clients import ClientError, Completion, compute_cost
from ..clients.batch import ENDED, BatchAPI, BatchRequest, BatchResult
from ..clients.batch_apis import build_batch_api
from ..clients.http import SHAPE_ERRORS, read_response
from ..redaction import redact

log = logging.getLogger("llmduel.batch")

#: With one call per coroutine, how long the parked calls wait for a straggler's call before they go out.
LONG_SETTLE_S = 2.0
#: How long the parked calls wait, at most, for calls still on their way (their database work under way).
STRAGGLER_S = 30.0
#: How many batches one request may go out in before its duel fails.
MAX_SENDS = 3
#: How many times an ended batch's results are read after an error that may pass (a kept-alive connection the
#: server closed as it was reused, a 5xx): the provider bills what the batch answered, and a read changes nothing.
RESULT_TRIES = 5
#: The longest pause between two of those reads (they start at the poll interval, at least 0.25 s, and double).
RESULT_PAUSE_MAX_S = 5.0
#: The duel a call is made for (set by the round around each duel's calls).
current_duel: contextvars.ContextVar[int | None] = contextvars.ContextVar("batch_duel", default=None)


class RoundFailed(Exception):
    """A batch of the round did not end within its window (or was refused), or the run stopped being this process's."""


@dataclass
class Parked:
    client: Any
    group: str
    url: str  # the single call's URL (the batch's endpoint follows from it: chat or images)
    body: dict[str, Any]
    duel_id: int | None
    future: asyncio.Future
    sends: int = 0
    meta: dict[str, Any] | None = None  # kept in the batch's row with the request (what a take-over needs)


@dataclass
class Collector:
    """The parked calls of one phase of one round."""

    jobs: BatchJobs
    http: httpx.AsyncClient
    campaign_id: int
    round: int
    phase: str
    poll_s: float
    window_s: float
    still_mine: Callable[[], Any]  # async () -> bool: the run is still this process's (else cancel)
    cache: dict[str, BatchResult] = field(default_factory=dict)
    settle_s: float = 0.05
    parked: list[Parked] = field(default_factory=list)
    stopped: str | None = None  # why the phase sends nothing more (the run stopped)
    sent: int = 0  # requests sent in batches (for the round's report)
    batches: int = 0
    taken_over: bool = False  # another process owns the run's batches now
    failure: Exception | None = None  # why the phase failed (raised by :meth:`run` once its calls have returned)
    fetched: list[tuple[int, str, str | None]] = field(default_factory=list)  # (row, status, error) to close
    _seq: int = 0

    # ------------------------------------------------------------ the callers' side
    def wrap(self, client: Any, meta: dict[str, Any] | None = None) -> Any:
        """``client`` as a :class:`BatchedModel` when its kind has a batch API, else itself (simulated);
        ``meta`` goes into the batch's row with each of its requests."""
        api = build_batch_api(client.config, self.http) if hasattr(client, "build_request") else None
        return client if api is None else BatchedModel(client, self, meta)

    async def call(
        self, client: Any, prompt: str, turns: list[str] | None, meta: dict[str, Any] | None = None
    ) -> Completion | ClientError:
        url, _, body = client.build_request(prompt, None, turns) if turns else client.build_request(prompt, None)
        cfg = client.config.model_dump(mode="json")
        group = f"{cfg.get('kind')}|{cfg.get('base_url')}|{cfg.get('model')}|{cfg.get('api_key_env')}"
        h = body_hash(group, body)
        hit = self.cache.pop(h, None)
        if hit is not None and hit.error is None:  # a former owner's batch already holds it
            return self.completion(client, hit)
        fut = asyncio.get_running_loop().create_future()
        self.parked.append(
            Parked(
                client=client, group=group, url=str(url), body=body, duel_id=current_duel.get(), future=fut, meta=meta
            )
        )
        return await fut

    # ------------------------------------------------------------ the phase's side
    async def run(
        self, coros: list, keep_failure: bool = False, one_call_each: bool = False, close: bool = True
    ) -> list:
        """Run the phase's calls (``coros``), flushing what they park until every one has returned; their results.

        The parked calls are sent once none is still on its way: no new one came for ``settle_s`` and none of
        the coroutines is in a database transaction (:func:`~service.campaigns.tasks.in_thread`, counted for
        the phase's tasks in a :class:`~service.campaigns.tasks.WorkCount`), so a slow database does not split
        the phase into several batches; after :data:`STRAGGLER_S` without a new call they go out at the latest.
        With ``one_call_each`` (each coroutine makes at most one call, as a pre-generation's do) also as soon
        as every coroutine still running has parked its call, and after :data:`LONG_SETTLE_S` without a new
        call at the latest.

        A failed batch fails the phase (:class:`RoundFailed` or the batch API's error) after every call has
        returned: raised here, or with ``keep_failure`` kept in ``failure`` for the caller to raise once it has
        stored what the phase's other calls brought back (a run taken over raises at once: nothing is folded).

        Each call stores what it got before it returns, so the phase's batches are closed once every call has
        returned (with ``close``; else the caller stores the results after this and then calls
        :meth:`close_fetched`). A run cancelled or killed meanwhile leaves them open for a take-over."""
        work = WorkCount()
        token = THREAD_WORK.set(work)
        try:  # the tasks take the count with the context they are started in
            tasks = [asyncio.ensure_future(c) for c in coros]
        finally:
            THREAD_WORK.reset(token)
        try:
            while True:
                await self._settle(tasks, work, one_call_each)
                if all(t.done() for t in tasks):
                    break
                try:
                    await self.flush()
                except Exception as exc:
                    if self.taken_over:
                        raise
                    # One batch failed: the other batches of the flush were collected (and the provider bills
                    # them), so their calls go on to be stored and charged; the rest fail, nothing more is sent.
                    self.failure = self.failure or exc
                    self.stopped = self.stopped or f"a batch of the round failed: {exc}"
            results = [t.result() for t in tasks]
        except Exception:
            await self.close_fetched()
            raise
        else:
            if close:
                await self.close_fetched()
            if self.failure is not None and not keep_failure:
                raise self.failure
            return results
        finally:
            for t in tasks:
                t.cancel()

    async def _settle(self, tasks: list[asyncio.Future], work: WorkCount, one_call_each: bool) -> None:
        """Until every task is done or the parked calls are ready to go (:meth:`run`)."""
        latest = LONG_SETTLE_S if one_call_each else STRAGGLER_S
        seen, since = -1, time.monotonic()
        while not all(t.done() for t in tasks):
            quiet = time.monotonic() - since
            if len(self.parked) != seen:
                seen, since = len(self.parked), time.monotonic()
            elif self.parked and ((quiet >= self.settle_s and self._idle(work)) or quiet >= latest):
                return
            if one_call_each and self.parked and len(self.parked) >= sum(not t.done() for t in tasks):
                return
            await asyncio.sleep(self.settle_s)

    def _idle(self, work: WorkCount) -> bool:
        """No call's database work is under way, nor was for ``settle_s``: a call whose transaction has just
        ended is given the event loop's turns it needs to park (its judge's ``gather``, a task it starts)."""
        return work.running == 0 and time.monotonic() - work.idle_since >= self.settle_s

    async def flush(self) -> None:
        parked, self.parked = self.parked, []
        groups: dict[str, list[Parked]] = {}
        for p in parked:
            groups.setdefault(p.group, []).append(p)
        # every batch ends its own way (collected, or cancelled when the run stops) before a failure is raised
        done = await asyncio.gather(*(self._send(items) for items in groups.values()), return_exceptions=True)
        for out in done:
            if isinstance(out, BaseException):
                raise out

    async def _send(self, items: list[Parked]) -> None:
        if self.stopped is not None:  # the run stopped: the phase's calls fail, nothing more is sent
            for p in items:
                p.future.set_result(ClientError(self.stopped))
            return
        try:
            await self._send_batch(items)
        except BaseException as exc:  # its callers fail with the batch (else they would wait for ever)
            why = unsent(exc)
            for p in items:
                if not p.future.done():
                    p.future.set_result(why)
            raise

    async def _send_batch(self, items: list[Parked]) -> None:
        client = items[0].client
        api = build_batch_api(client.config, self.http)
        assert api is not None
        requests, rows = [], []
        for p in items:
            self._seq += 1
            cid = f"r{self.round}-{self.phase[0]}{self._seq}"
            requests.append(BatchRequest(cid, p.url, p.body))
            rows.append({"custom_id": cid, "duel_id": p.duel_id, "hash": body_hash(p.group, p.body), **(p.meta or {})})
            p.sends += 1
        cfg = client.config.model_dump(mode="json")
        job_id, key = await in_thread(
            self.jobs.record_tx, self.campaign_id, self.round, self.phase, client=cfg, requests=rows
        )
        bid = await submit_once(api, requests, key)
        if not await in_thread(self.jobs.submitted_tx, job_id, bid):
            await self._taken_over_while_sent(api, job_id, bid)
        self.sent += len(requests)
        self.batches += 1
        results = await self.collect(api, job_id, bid, [r.custom_id for r in requests])
        for p, r in zip(items, requests):
            res = results[r.custom_id]
            if res.error is None:
                p.future.set_result(self.completion(p.client, res))
            elif self.stopped is not None:  # the run stopped: nothing is sent again
                p.future.set_result(ClientError(f"{res.error} ({self.stopped})"))
            elif p.sends < MAX_SENDS:
                self.parked.append(p)  # sent again in the phase's next batch
            else:
                p.future.set_result(ClientError(f"{res.error} (after {p.sends} batches)"))

    async def _taken_over_while_sent(self, api: BatchAPI, job_id: int, bid: str) -> NoReturn:
        """The batch's row was taken over while the batch was being sent (this process stalled past the take-over
        bound): a new owner that found the batch at the provider collects it; one that did not closed the row, and
        nobody would collect the batch, so it is cancelled (what the provider finished before is billed, not charged)."""
        if not await in_thread(self.jobs.is_open_tx, job_id):
            await cancel_quietly(api, bid)
        self.taken_over = True
        raise RoundFailed("another process owns the run's batches now")

    async def collect(self, api: BatchAPI, job_id: int, bid: str, custom_ids: list[str]) -> dict[str, BatchResult]:
        """Poll until the batch ends; its results, matched on custom_id.

        When the run stops meanwhile, or the batch outlives its window, the batch is cancelled and what it
        finished before the cancellation is still collected (the provider charges it): its answers are
        stored and charged, nothing of the phase is sent again (``stopped``); past its window the phase then
        fails (``failure``)."""
        t0 = time.monotonic()
        cancelled_at: float | None = None
        late: str | None = None  # why the batch was cancelled at its window
        while True:
            try:
                state = await api.poll(bid)
            except ClientError as exc:
                if not exc.retryable:
                    raise
                state = None
            if state is not None and state.final:
                break
            if cancelled_at is None and not await self.still_mine():
                await cancel_quietly(api, bid)
                self.stopped = "the run stopped; its open batches were cancelled"
                cancelled_at = time.monotonic()
            elif cancelled_at is not None and time.monotonic() - cancelled_at > CANCEL_GRACE_S:
                await in_thread(self.jobs.close_tx, job_id, "cancelled", self.stopped)
                raise RoundFailed(f"{self.stopped}; batch {bid} did not end within {CANCEL_GRACE_S:g} s")
            if cancelled_at is None and time.monotonic() - t0 > self.window_s:
                # cancelled; what it finished before the cancellation is still collected (the provider bills it)
                await cancel_quietly(api, bid)
                late = f"batch {bid} did not end within its window of {self.window_s:g} s"
                self.stopped = self.stopped or late
                self.failure = self.failure or RoundFailed(late)
                cancelled_at = time.monotonic()
            await asyncio.sleep(self.poll_s)
        results = await read_results(api, bid, custom_ids, self.poll_s)
        error: str | None
        if late is not None:
            status, error = "failed", late
        else:
            status = "cancelled" if cancelled_at is not None else "collected" if state.status == ENDED else state.status
            error = state.error or self.stopped
        if not await in_thread(self.jobs.fetched_tx, job_id):
            self.taken_over = True  # the new owner folds the batches: this process stores nothing more
            raise RoundFailed("another process owns the run's batches now")
        self.fetched.append((job_id, status, error))  # closed once its results are stored (close_fetched)
        return results

    async def close_fetched(self) -> None:
        """Close the batches whose results were fetched, once what they brought back is stored (or failed to
        be stored while this process lives): until then they stay open, so a take-over collects them again."""
        fetched, self.fetched = self.fetched, []
        for job_id, status, error in fetched:
            if not await in_thread(self.jobs.close_tx, job_id, status, error):
                log.warning("campaign %s: batch row %s was taken over before it was closed", self.campaign_id, job_id)

    def completion(self, client: Any, res: BatchResult) -> Completion | ClientError:
        """A batch result as the client's call would have returned it, charged at the batch price."""
        try:  # billed: the images made, refused ones too; logprobs: for a judge's verdict_probabilities
            (text, tin, tout, image, more, billed), usage_fault, logprobs = read_response(client, res.data)
        except SHAPE_ERRORS as exc:
            return ClientError(f"{client.provider} batch returned an unexpected response: {exc}")
        cfg = client.config
        price = cfg.batch_price or cfg.price  # no known batch price: the list price, never an assumed discount
        cost = compute_cost(price.model_dump() if price else None, tin, tout, client.fixed_cost * billed)
        key = os.environ.get(cfg.api_key_env) if getattr(cfg, "api_key_env", None) else None
        if image is None and key:
            text = redact(text, (key,))
        return Completion(text, tin, tout, cost, 0.0, 1, usage_fault, image, more, logprobs=logprobs)


class BatchedModel:
    """A model client whose calls go into the round's batch (the ``JudgeModel`` protocol too)."""

    def __init__(self, inner: Any, collector: Collector, meta: dict[str, Any] | None = None):
        self.inner = inner
        self.collector = collector
        self.meta = meta
        self.config = inner.config
        self.model_name = inner.model_name

    async def complete(self, prompt: str, turns: list[str] | None = None) -> Completion:
        out = await self.collector.call(self.inner, prompt, turns, self.meta)
        if isinstance(out, ClientError):
            raise out
        return out

    async def aclose(self) -> None:
        """The inner client is its owner's to close."""


def pregen_batches(jobs: BatchJobs, http: Callable[[], httpx.AsyncClient]) -> Callable[..., Any]:
    """The start of a human campaign's pre-generation round in batches (service/campaigns/pregeneration.py):
    ``await start(campaign_id, batch_setting)`` counts the round and returns its :class:`Collector` (phase
    ``pregen``), or None when the campaign no longer runs. Its batches are cancelled once it stops running."""

    async def start(campaign_id: int, cfg: dict[str, Any]) -> Collector | None:
        k = await in_thread(jobs.start_pregen_round_tx, campaign_id)
        if k is None:
            return None

        async def still_running() -> bool:
            return await in_thread(jobs.campaign_running_tx, campaign_id)

        poll, window = float(cfg["poll_seconds"]), float(cfg["window_seconds"])
        return Collector(
            jobs=jobs,
            http=http(),
            campaign_id=campaign_id,
            round=k,
            phase="pregen",
            poll_s=poll,
            window_s=window,
            still_mine=still_running,
        )

    return start


def unsent(exc: BaseException) -> ClientError:
    """The error of the calls of a batch that was not sent or not collected: a provider's error keeps its
    status and attempts (once: not repeated in the message)."""
    if isinstance(exc, ClientError):
        return ClientError(f"batch not sent or not collected: {exc.message}", exc.status_code, exc.attempts)
    return ClientError(f"batch not sent or not collected: {exc}")


async def submit_once(api: BatchAPI, requests: list[BatchRequest], key: str) -> str:
    """Submit under ``key``; after an error that leaves it unknown whether the provider took the batch
    (a timeout, a connection lost, a 5xx), look it up by its key before giving up: never send it twice."""
    try:
        return await api.submit(requests, key)
    except ClientError as exc:
        if exc.status_code is not None and exc.status_code < 500:
            raise
        found = await api.find(key)
        if found is None:
            raise
        return found


async def read_results(api: BatchAPI, bid: str, custom_ids: list[str], poll_s: float) -> dict[str, BatchResult]:
    """An ended batch's results (:meth:`BatchAPI.results`), read again after an error that may pass, at most
    :data:`RESULT_TRIES` times. Given up, the round fails and what the batch answered is never charged, though
    the provider bills it: its callers fail with the error."""
    attempt, pause = 1, max(poll_s, 0.25)
    while True:
        try:
            return await api.results(bid, custom_ids)
        except ClientError as exc:
            if not exc.retryable or attempt >= RESULT_TRIES:
                raise
            log.warning("reading the results of batch %s failed (%s); reading them again", bid, exc.message)
        await asyncio.sleep(min(pause * 2 ** (attempt - 1), RESULT_PAUSE_MAX_S))
        attempt += 1


async def cancel_quietly(api: BatchAPI, bid: str) -> None:
    try:
        await api.cancel(bid)
    except Exception as exc:  # it ends by itself at the provider's window
        log.warning("cancelling batch %s failed: %s", bid, type(exc).__name__)
