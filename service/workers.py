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
instead of being refused. Only a worker that dies before it ever served (its app
never finished starting: a broken configuration) counts toward giving up:
:data:`MAX_QUICK_FAILURES` of those in a row stop the supervisor with exit status 1;
a worker that served and then died is always restarted, and resets the count.

Shutdown is bounded. SIGINT or SIGTERM asks the workers to stop (uvicorn finishes
the requests in progress); whatever still runs after ``LLMDUEL_SHUTDOWN_GRACE_SECONDS``
(a request stuck on a slow model call, say) is killed, and the supervisor exits. A
second signal kills the workers at once. No signal sequence leaves a worker without
its supervisor: each worker asks the kernel for SIGTERM when its parent dies
(``PR_SET_PDEATHSIG``, Linux) and also watches its parent itself; a worker whose
parent is gone stops, and exits at the latest after the grace period.
"""

from __future__ import annotations

import ctypes
import logging
import multiprocessing
import os
import signal
import socket
import sys
import threading
import time

log = logging.getLogger("llmduel.workers")

MAX_QUICK_FAILURES = 3  # workers in a row that died before they ever served
DEFAULT_GRACE_SECONDS = 10.0  # without settings (Settings.shutdown_grace_seconds)
DEFAULT_KEEP_ALIVE_SECONDS = 5.0  # without settings (Settings.keep_alive_seconds, uvicorn's default)
PR_SET_PDEATHSIG = 1


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


def _die_with_parent(parent: int, grace: float) -> None:  # pragma: no cover - runs in the child
    """Stop this worker when its supervisor ``parent`` is gone: SIGTERM from the kernel (Linux),
    and a watcher thread for the rest; either way the worker is gone ``grace`` seconds later."""
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(PR_SET_PDEATHSIG, signal.SIGTERM, 0, 0, 0)
    except (OSError, AttributeError):
        pass

    def watch() -> None:
        while os.getppid() == parent:
            time.sleep(0.5)
        os.kill(os.getpid(), signal.SIGTERM)  # uvicorn's graceful stop (no-op if PDEATHSIG came first)
        time.sleep(grace)
        os._exit(1)

    threading.Thread(target=watch, name="llmduel-parent-watch", daemon=True).start()


def _worker(
    sock: socket.socket, log_level: str, settings=None, served=None, parent: int = 0
) -> None:  # pragma: no cover
    import functools

    import uvicorn

    from service.app import create_app

    grace = settings.shutdown_grace_seconds if settings is not None else DEFAULT_GRACE_SECONDS
    keep_alive = settings.keep_alive_seconds if settings is not None else DEFAULT_KEEP_ALIVE_SECONDS
    _die_with_parent(parent or os.getppid(), grace)

    class Server(uvicorn.Server):
        async def startup(self, sockets=None) -> None:
            await super().startup(sockets=sockets)
            if self.started and served is not None:
                served.set()  # the app started and accepts connections: this worker has served

    # The supervisor's settings (a generated admin key included) arrive as an argument,
    # never through the environment.
    config = uvicorn.Config(
        functools.partial(create_app, settings),
        factory=True,
        log_level=log_level,
        # uvicorn annotates both timeouts int but uses them as float seconds (asyncio timers)
        timeout_graceful_shutdown=grace,  # type: ignore[arg-type]
        timeout_keep_alive=keep_alive,  # type: ignore[arg-type]
    )
    Server(config).run(sockets=[sock])


class Supervisor:
    """Start ``n`` workers, keep them running, stop them on SIGINT/SIGTERM."""

    def __init__(self, host: str, port: int, n: int, log_level: str = "info", settings=None):
        self.settings = settings
        self.sockets = [reuseport_socket(host, port) for _ in range(n)]
        self.log_level = log_level
        self.ctx = multiprocessing.get_context("spawn")
        self.procs: list = [None] * n
        self.served: list = [None] * n  # per worker: an Event set once its app started serving
        self.started_at = [0.0] * n
        self.quick_failures = 0
        self.grace = settings.shutdown_grace_seconds if settings is not None else DEFAULT_GRACE_SECONDS
        self.stop = threading.Event()
        self.signals = 0

    def _start(self, k: int) -> None:
        self.served[k] = self.ctx.Event()
        proc = self.ctx.Process(
            target=_worker,
            args=(self.sockets[k], self.log_level, self.settings, self.served[k], os.getpid()),
            name=f"llmduel-worker-{k}",
        )
        proc.start()
        self.procs[k] = proc
        self.started_at[k] = time.monotonic()
        log.info("worker %d started (pid %d)", k, proc.pid)

    def _on_signal(self, *_: object) -> None:
        self.signals += 1
        self.stop.set()
        if self.signals > 1:  # a second signal: no more grace
            self._kill_all()

    def run(self) -> int:
        for sig in (signal.SIGINT, signal.SIGTERM):
            signal.signal(sig, self._on_signal)
        for k in range(len(self.sockets)):
            self._start(k)
        status = 0
        while not self.stop.wait(0.5):
            for k, proc in enumerate(self.procs):
                if proc.is_alive():
                    continue
                lived = time.monotonic() - self.started_at[k]
                served = self.served[k].is_set()
                self.quick_failures = 0 if served else self.quick_failures + 1
                log.warning(
                    "worker %d (pid %d) exited with %s after %.1f s (%s)",
                    k,
                    proc.pid,
                    proc.exitcode,
                    lived,
                    "it had served; restarting" if served else "before it ever served",
                )
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

    def _kill_all(self) -> None:
        for proc in self.procs:
            if proc is not None and proc.is_alive():
                proc.kill()

    def _stop_all(self) -> None:
        """SIGTERM (uvicorn's graceful shutdown, itself bounded by the grace), then SIGKILL after the grace."""
        for proc in self.procs:
            if proc is not None and proc.is_alive():
                proc.terminate()
        deadline = time.monotonic() + self.grace
        for proc in self.procs:
            if proc is not None:
                proc.join(max(0.1, deadline - time.monotonic()))
                if proc.is_alive():
                    log.warning("worker pid %d still running after the %.1f s grace: killed", proc.pid, self.grace)
                    proc.kill()
                    proc.join()
