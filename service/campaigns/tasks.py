"""The background tasks of one process's campaign objects, and running blocking work in a thread.

One :class:`Background` per app: :class:`~.webhooks.Webhooks`, the runs, the stores and the
revocation watch start their tasks through it, and shutting the app down cancels them all.
"""

from __future__ import annotations

import asyncio
import contextvars
import logging
import time
from typing import Any, Awaitable, Callable

import anyio

log = logging.getLogger("llmduel.campaigns")


class WorkCount:
    """How many :func:`in_thread` calls of the tasks that share it are under way (queued or running), and
    since when none has been (``idle_since``, time.monotonic()): a task that has just come back from its
    database work takes a few turns of the event loop (tasks it starts, a ``gather``) to reach its next call."""

    def __init__(self) -> None:
        self.running = 0
        self.idle_since = time.monotonic()


#: The count the calls of the current task add to, if any: a batch round's phase counts its calls'
#: database work, so it sends its parked calls only once none is still on its way to being parked
#: (service/cycle/batch_collector.py).
THREAD_WORK: contextvars.ContextVar[WorkCount | None] = contextvars.ContextVar("thread_work", default=None)


async def in_thread(fn: Callable, *args: Any, **kwargs: Any) -> Any:
    """``fn(*args, **kwargs)`` in a worker thread (the synchronous transactions run there)."""
    work = THREAD_WORK.get()
    if work is not None:
        work.running += 1
    try:
        if kwargs:
            return await anyio.to_thread.run_sync(lambda: fn(*args, **kwargs))
        return await anyio.to_thread.run_sync(fn, *args)
    finally:
        if work is not None:
            work.running -= 1
            if work.running == 0:
                work.idle_since = time.monotonic()


class Background:
    """The tasks started in this process that nobody awaits; each is kept until it ends."""

    def __init__(self) -> None:
        self.tasks: set[asyncio.Task] = set()

    def spawn(self, coro: Any) -> asyncio.Task:
        ctx = contextvars.copy_context()
        ctx.run(THREAD_WORK.set, None)  # a task started from a batch phase's call is not part of the phase's work
        task = asyncio.get_running_loop().create_task(coro, context=ctx)
        self.tasks.add(task)
        task.add_done_callback(self.tasks.discard)
        return task

    def cancel_all(self) -> None:
        """Cancel every task still running (claims they held expire; another process takes over)."""
        for task in list(self.tasks):
            task.cancel()


class Keeper:
    """The process's heartbeat task: every ``LLMDUEL_RUN_HEARTBEAT_SECONDS`` it awaits each of
    ``beats`` in turn (the runs' lease renewal, take-over and webhook sends: see
    :meth:`.runner.Runs.beat`). Started once, by the first caller of :meth:`ensure`."""

    def __init__(self, heartbeat_seconds: float, background: Background):
        self.heartbeat_seconds = heartbeat_seconds
        self.background = background
        self.beats: list[Callable[[], Awaitable[None]]] = []  # set by build_campaigns
        self._task: asyncio.Task | None = None

    def ensure(self) -> None:
        """Start the heartbeat task, once (again after :meth:`stop`)."""
        if self._task is None or self._task.done():
            self._task = self.background.spawn(self._keep())

    def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            self._task = None

    async def tick(self) -> None:
        """One heartbeat: every beat, in order."""
        for beat in self.beats:
            await beat()

    async def _keep(self) -> None:
        while True:
            await asyncio.sleep(self.heartbeat_seconds)
            try:
                await self.tick()
            except asyncio.CancelledError:
                raise
            except Exception as exc:  # database away: try again at the next beat
                log.warning("keeper: %s", type(exc).__name__)
