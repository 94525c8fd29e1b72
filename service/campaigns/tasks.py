"""The background tasks of one process's campaign objects, and running blocking work in a thread.

One :class:`Background` per app: :class:`~.webhooks.Webhooks`, the runs, the stores and the
revocation watch start their tasks through it, and shutting the app down cancels them all.
"""

from __future__ import annotations

import asyncio
from typing import Any, Callable

import anyio


async def in_thread(fn: Callable, *args: Any, **kwargs: Any) -> Any:
    """``fn(*args, **kwargs)`` in a worker thread (the synchronous transactions run there)."""
    if kwargs:
        return await anyio.to_thread.run_sync(lambda: fn(*args, **kwargs))
    return await anyio.to_thread.run_sync(fn, *args)


class Background:
    """The tasks started in this process that nobody awaits; each is kept until it ends."""

    def __init__(self) -> None:
        self.tasks: set[asyncio.Task] = set()

    def spawn(self, coro: Any) -> asyncio.Task:
        task = asyncio.get_running_loop().create_task(coro)
        self.tasks.add(task)
        task.add_done_callback(self.tasks.discard)
        return task

    def cancel_all(self) -> None:
        """Cancel every task still running (claims they held expire; another process takes over)."""
        for task in list(self.tasks):
            task.cancel()
