"""Several uvicorn workers, each with its own ``SO_REUSEPORT`` listening socket.

``uvicorn --workers N`` binds one socket that every worker accepts from. asyncio
accepts a burst of new connections on whichever worker wakes first, and
keep-alive connections then stay with it: in the load benchmark 50 annotators
ended up split 37/13, one worker saturated while the other idled
(docs/reliability.md). With one ``SO_REUSEPORT`` socket per worker, all bound to
the same address, the kernel spreads new connections over the workers by a hash
of their addresses.

The sockets are made here, in the supervisor, and each worker is handed its own.
A worker that dies (a crash, SIGKILL, the OOM killer) is started again on the same
socket, so connections that arrive meanwhile wait in that socket's backlog
instead of being refused. A worker that dies repeatedly before it has served for
:data:`STABLE_SECONDS` stops the supervisor with exit status 1 (a broken
configuration would otherwise be restarted for ever). SIGINT and SIGTERM stop the
workers gracefully (uvicorn finishes the requests in progress) and then exit.
"""

from __future__ import annotations

import logging
import multiprocessing
import signal
import socket
import sys
import threading
import time

log = logging.getLogger("llmduel.workers")

STABLE_SECONDS = 10.0  # a worker that lived this long counts as started successfully
MAX_QUICK_FAILURES = 3
STOP_GRACE_SECONDS = 20.0


def reuseport_socket(host: str, port: int, backlog: int = 2048) -> socket.socket:
    """A listening TCP socket on (host, port) with SO_REUSEPORT (Linux, BSD, macOS)."""
    if not hasattr(socket, "SO_REUSEPORT"):  # pragma: no cover - Windows
        raise OSError("SO_REUSEPORT is not available on this platform")
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
    sock.bind((host, port))
    sock.listen(backlog)
    sock.set_inheritable(True)
    return sock


def _worker(sock: socket.socket, log_level: str, settings=None) -> None:  # pragma: no cover - runs in the child
    import functools

    import uvicorn

    from service.app import create_app

    # The supervisor's settings (a generated admin key included) arrive as an argument,
    # never through the environment.
    config = uvicorn.Config(functools.partial(create_app, settings), factory=True, log_level=log_level)
    uvicorn.Server(config).run(sockets=[sock])


class Supervisor:
    """Start ``n`` workers, keep them running, stop them on SIGINT/SIGTERM."""

    def __init__(self, host: str, port: int, n: int, log_level: str = "info", settings=None):
        self.settings = settings
        self.sockets = [reuseport_socket(host, port) for _ in range(n)]
        self.log_level = log_level
        self.ctx = multiprocessing.get_context("spawn")
        self.procs: list = [None] * n
        self.started_at = [0.0] * n
        self.quick_failures = 0
        self.stop = threading.Event()

    def _start(self, k: int) -> None:
        proc = self.ctx.Process(
            target=_worker, args=(self.sockets[k], self.log_level, self.settings), name=f"llmduel-worker-{k}"
        )
        proc.start()
        self.procs[k] = proc
        self.started_at[k] = time.monotonic()
        log.info("worker %d started (pid %d)", k, proc.pid)

    def run(self) -> int:
        for sig in (signal.SIGINT, signal.SIGTERM):
            signal.signal(sig, lambda *_: self.stop.set())
        for k in range(len(self.sockets)):
            self._start(k)
        status = 0
        while not self.stop.wait(0.5):
            for k, proc in enumerate(self.procs):
                if proc.is_alive():
                    continue
                lived = time.monotonic() - self.started_at[k]
                self.quick_failures = self.quick_failures + 1 if lived < STABLE_SECONDS else 0
                log.warning("worker %d (pid %d) exited with %s after %.1f s", k, proc.pid, proc.exitcode, lived)
                if self.quick_failures >= MAX_QUICK_FAILURES:
                    print(
                        f"llmduel serve: workers keep failing at start ({self.quick_failures} in a row); "
                        "stopping (see the log above)",
                        file=sys.stderr,
                        flush=True,
                    )
                    status = 1
                    self.stop.set()
                    break
                self._start(k)
        self._stop_all()
        for sock in self.sockets:
            sock.close()
        return status

    def _stop_all(self) -> None:
        for proc in self.procs:
            if proc is not None and proc.is_alive():
                proc.terminate()  # SIGTERM: uvicorn's graceful shutdown
        deadline = time.monotonic() + STOP_GRACE_SECONDS
        for proc in self.procs:
            if proc is not None:
                proc.join(max(0.1, deadline - time.monotonic()))
                if proc.is_alive():
                    proc.kill()
                    proc.join()
