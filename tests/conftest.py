"""Shared fixtures: databases (SQLite file, throwaway PostgreSQL database), the app
over ASGI, and a real uvicorn process.

PostgreSQL: ``LLMDUEL_TEST_PG_URL`` (default ``postgresql://postgres@127.0.0.1:5432/test``)
is the maintenance connection; each test session creates its own uniquely named
database there and drops it afterwards. Without a reachable server the postgres
tests are skipped, unless ``CI`` is set: then they fail.
"""

from __future__ import annotations

import collections
import contextlib
import os
import socket
import subprocess
import sys
import threading
import time
import uuid
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

ADMIN_KEY = "test-admin-key-0123456789"
PG_MAINTENANCE_URL = os.environ.get("LLMDUEL_TEST_PG_URL", "postgresql://postgres@127.0.0.1:5432/test")
REPO = Path(__file__).resolve().parent.parent


def skip_unless_ci(needs: str, skip_reason: str) -> None:
    """A missing test dependency: skip with the reason, but fail when CI is set (CI must run everything)."""
    if os.environ.get("CI"):
        pytest.fail(f"{needs} and CI is set: {skip_reason}", pytrace=False)
    pytest.skip(f"{skip_reason}; set CI=1 to make this an error")


def _pg_unavailable(reason: str):
    skip_unless_ci("PostgreSQL tests need a server", f"no PostgreSQL server reachable ({reason})")


@pytest.fixture(scope="session")
def pg_url():
    """URL of a fresh PostgreSQL database for this test session (dropped at the end)."""
    try:
        import psycopg
    except ImportError as exc:  # pragma: no cover
        _pg_unavailable(f"psycopg not importable: {exc}")
    from sqlalchemy.engine import make_url

    admin = make_url(PG_MAINTENANCE_URL)
    conninfo = admin.set(drivername="postgresql").render_as_string(hide_password=False)
    name = f"llmduel_test_{os.getpid()}_{uuid.uuid4().hex[:8]}"
    try:
        with psycopg.connect(conninfo, autocommit=True, connect_timeout=3) as conn:
            conn.execute(f'CREATE DATABASE "{name}"')
    except psycopg.OperationalError as exc:
        _pg_unavailable(f"{admin.render_as_string(hide_password=True)}: {str(exc).strip().splitlines()[0]}")
    url = admin.set(drivername="postgresql+psycopg", database=name).render_as_string(hide_password=False)
    yield url
    with psycopg.connect(conninfo, autocommit=True, connect_timeout=3) as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


@pytest.fixture(scope="session")
def sqlite_url(tmp_path_factory):
    return f"sqlite:///{tmp_path_factory.mktemp('db') / 'llmduel.db'}"


_MIGRATED: set[str] = set()


@pytest.fixture(scope="session", params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def db_url(request):
    """A migrated database URL, once per backend (tests share it; campaigns keep them apart).

    Under pytest-xdist each worker has its own session, hence its own two databases. A worker
    runs whole files (``--dist loadfile``), each file's SQLite tests then its PostgreSQL tests,
    so this fixture is set up again at every switch of backend: the migration runs once per URL.
    """
    return migrated(request.getfixturevalue("sqlite_url" if request.param == "sqlite" else "pg_url"))


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def fresh_url(request, tmp_path):
    """A new, empty database for one test, once per backend (a SQLite file, or a PostgreSQL database
    dropped afterwards): for a migration test that starts below head."""
    if request.param == "sqlite":
        yield f"sqlite:///{tmp_path / 'old.db'}"
        return
    psycopg = pytest.importorskip("psycopg")
    from sqlalchemy.engine import make_url

    admin = make_url(PG_MAINTENANCE_URL)
    conninfo = admin.set(drivername="postgresql").render_as_string(hide_password=False)
    name = f"llmduel_mig_{uuid.uuid4().hex[:8]}"
    try:
        with psycopg.connect(conninfo, autocommit=True, connect_timeout=3) as conn:
            conn.execute(f'CREATE DATABASE "{name}"')
    except psycopg.OperationalError:
        pytest.skip("no PostgreSQL server reachable")
    yield admin.set(drivername="postgresql+psycopg", database=name).render_as_string(hide_password=False)
    with psycopg.connect(conninfo, autocommit=True, connect_timeout=3) as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


def migrated(url: str) -> str:
    """``url`` with its schema at head (migrated once per URL in this worker)."""
    if url not in _MIGRATED:
        from service.db import upgrade_database

        upgrade_database(url)
        _MIGRATED.add(url)
    return url


def make_settings(url: str, **overrides):
    from service.config import Settings

    values = dict(database_url=url, api_key=ADMIN_KEY, resume_runs=False, auto_migrate="never")
    values.update(overrides)
    return Settings(**values).with_database_url(url)


@pytest.fixture
def admin_headers():
    return {"Authorization": f"Bearer {ADMIN_KEY}"}


@pytest.fixture
async def fake(api):
    """The fake provider (service/fake_provider.py) in process, behind the ``api`` app's model calls:
    every client's requests reach it whatever their ``base_url``. Yields the provider's app (its
    ``state.provider.requests`` lists what was asked). A test file may define its own ``fake``."""
    import httpx

    from service.fake_provider import create_fake_provider_app

    app = create_fake_provider_app()
    svc = api.app.state.campaigns.cycle
    svc.deps.calls._http = httpx.AsyncClient(transport=httpx.ASGITransport(app=app))
    yield app
    await svc.deps.calls._http.aclose()
    svc.deps.calls._http = None


_ADMIN = object()


@contextlib.asynccontextmanager
async def app_client(
    db_url: str,
    *,
    headers=_ADMIN,
    base_url: str = "http://testserver",
    client_addr: tuple[str, int] | None = None,
    timeout: float | None = None,
    **settings,
):
    """An httpx.AsyncClient on a new ASGI app (no network) with ``settings`` over the tests' own,
    authenticated as admin (``client.app`` is the app); the app is closed on the way out.

    ``headers=None`` sends no Authorization header (or pass the headers to send); ``client_addr``
    is the peer address the app sees; ``timeout`` overrides httpx's 5 s default."""
    import httpx

    from service.app import create_app

    app = create_app(make_settings(db_url, **settings))
    if headers is _ADMIN:
        headers = {"Authorization": f"Bearer {ADMIN_KEY}"}
    transport = (
        httpx.ASGITransport(app=app) if client_addr is None else httpx.ASGITransport(app=app, client=client_addr)
    )
    extra = {} if timeout is None else {"timeout": timeout}
    try:
        async with httpx.AsyncClient(transport=transport, base_url=base_url, headers=headers, **extra) as client:
            client.app = app
            yield client
    finally:
        await app.state.campaigns.aclose()
        app.state.db.dispose()


@contextlib.asynccontextmanager
async def started_app_client(db_url: str, *, timeout: float | None = None, **settings):
    """An :func:`app_client`-like client on a new app that went through the service's own start-up (its
    lifespan: background runs taken over when ``resume_runs`` is on, the heartbeat with its take-overs and
    pre-generation recovery), as a server (re)started on ``db_url`` does, but in this process: a test that
    needs a second, fresh service after killing a real one waits for no process start (seconds of imports).
    Its exit is the service's shutdown (runs stopped, leases released, the database closed); ``timeout``
    overrides httpx's 5 s default."""
    import gc

    import httpx

    from service.app import create_app

    app = create_app(make_settings(db_url, **settings))
    try:
        async with app.router.lifespan_context(app):
            transport = httpx.ASGITransport(app=app)
            headers = {"Authorization": f"Bearer {ADMIN_KEY}"}
            extra = {} if timeout is None else {"timeout": timeout}
            async with httpx.AsyncClient(
                transport=transport, base_url="http://testserver", headers=headers, **extra
            ) as client:
                client.app = app
                yield client
    finally:
        gc.unfreeze()  # the start-up froze the heap for a server's lifetime; this process goes on


def logged_tracebacks(caplog) -> list[str]:
    """The log records of this test that carry a traceback (what a server's log shows as ``Traceback``)."""
    return [caplog.handler.format(r) for r in caplog.records if r.exc_info or r.stack_info]


@pytest.fixture
async def api(db_url):
    """An httpx.AsyncClient on the ASGI app (no network), authenticated as admin."""
    async with app_client(db_url) as client:
        yield client


def wait_until(cond, timeout: float, what: str, every: float = 0.05):
    """Poll ``cond()`` until it returns something true (returned), for at most ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    while True:
        got = cond()
        if got:
            return got
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(every)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class LiveServer:
    def __init__(self, url: str, process: subprocess.Popen, log_path: Path):
        self.url = url
        self.process = process
        self.log_path = log_path

    def log(self) -> str:
        return self.log_path.read_text(errors="replace")


def _port_taken(log_path: Path) -> bool:
    """The server's log says its port was taken between :func:`free_port` and its bind."""
    text = log_path.read_text(errors="replace").lower()
    return "address already in use" in text or "errno 98" in text


def start_live_server(
    database_url: str,
    log_path: Path,
    extra_env: dict | None = None,
    workers: int = 1,
    timeout: float = 120.0,
    log_level: str = "warning",
    unset_env: tuple[str, ...] = (),
) -> LiveServer:
    """The service on a free 127.0.0.1 port: ``uvicorn --factory service.app:create_app``
    for one worker, ``llmduel serve --workers N`` (a SO_REUSEPORT socket per worker) for more.

    ``unset_env`` names variables of this process's environment the server must not see.
    When another process takes the free port before the server binds it (tests run in
    parallel), the server is started again on another port, up to 3 times.
    """
    env = dict(os.environ, LLMDUEL_RESUME_RUNS="0", PYTHONUNBUFFERED="1")
    for name in unset_env:
        env.pop(name, None)
    env.update(DATABASE_URL=database_url, LLMDUEL_API_KEY=ADMIN_KEY)
    env.update(extra_env or {})
    for _ in range(3):
        server = _start_server_once(env, log_path, workers, timeout, log_level)
        if server is not None:
            return server
    raise RuntimeError(f"uvicorn found no free port in 3 tries:\n{log_path.read_text(errors='replace')}")


def _start_server_once(env: dict, log_path: Path, workers: int, timeout: float, log_level: str) -> LiveServer | None:
    """Start the server and wait for ``/healthz``; None when its port was taken (try again)."""
    import httpx

    port = free_port()
    if workers > 1:
        cmd = [sys.executable, "-m", "service.cli", "serve", "--workers", str(workers)]
    else:
        cmd = [sys.executable, "-m", "uvicorn", "--factory", "service.app:create_app"]
    cmd += ["--host", "127.0.0.1", "--port", str(port), "--log-level", log_level]
    with open(log_path, "wb") as log_file:
        proc = subprocess.Popen(cmd, cwd=REPO, env=env, stdout=log_file, stderr=subprocess.STDOUT)
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            if _port_taken(log_path):
                return None
            raise RuntimeError(f"uvicorn exited with {proc.returncode}:\n{log_path.read_text(errors='replace')}")
        try:
            if httpx.get(url + "/healthz", timeout=2.0).status_code == 200:
                return LiveServer(url, proc, log_path)
        except httpx.HTTPError:
            pass
        time.sleep(0.1)
    proc.kill()
    proc.wait()
    raise RuntimeError(f"uvicorn did not come up in {timeout}s:\n{log_path.read_text(errors='replace')}")


def stop_live_server(server: LiveServer) -> None:
    server.process.terminate()
    try:
        server.process.wait(timeout=10)
    except subprocess.TimeoutExpired:
        server.process.kill()
        server.process.wait()


@pytest.fixture(scope="module")
def live_server(db_url, tmp_path_factory):
    """``llmduel serve --workers 2`` serving ``db_url``: one per test module and backend.

    Stopped at the end of its module, so that its pooled PostgreSQL connections (up to
    18 per worker process) are not held while the other files run: two pytest workers,
    each keeping such a server, come close to PostgreSQL's default ``max_connections``.
    """
    server = start_live_server(db_url, tmp_path_factory.mktemp("uvicorn") / "server.log", workers=2)
    yield server
    stop_live_server(server)


BROWSER_KEY = "web-browser-admin-key-0123456789"  # the admin key of the browser tests' server


@pytest.fixture(scope="session")
def browser_server(tmp_path_factory):
    """The browser tests' server: ``uvicorn --factory service.app:create_app`` on a fresh SQLite file
    (migrated at start), admin key :data:`BROWSER_KEY`, the dashboards behind it (``LLMDUEL_WEB_AUTH``
    unset). One per test session, i.e. per xdist worker: the ``*_browser.py`` files share it (each
    test makes its own campaigns), instead of each paying a server start (~3 s of CPU).

    (Their headless Chromium stays per module: while Playwright's sync API is open, the thread has a
    running event loop, which the asyncio tests of the files that follow would trip over.)"""
    tmp = tmp_path_factory.mktemp("webserver")
    live = start_live_server(
        f"sqlite:///{tmp / 'web.db'}",
        tmp / "server.log",
        extra_env={"LLMDUEL_API_KEY": BROWSER_KEY},
        unset_env=("LLMDUEL_WEB_AUTH",),  # default rule: dashboards need the admin key (browsers sign in)
    )
    yield live.url
    stop_live_server(live)


def start_fake_provider(log_path: Path, *args: str) -> tuple[str, subprocess.Popen]:
    """A real fake-provider server (``llmduel fake-provider``) on a free port: its base URL and process.

    ``args`` are extra command-line options (``--latency 0.02``, ``--judge-mode bradley-terry``);
    its output goes to ``log_path``. Stop it with :func:`stop_process`. Started again on
    another port when its port was taken before it could bind it (up to 3 times).
    """
    import httpx

    for _ in range(3):
        port = free_port()
        cmd = [sys.executable, "-m", "service.cli", "fake-provider", "--host", "127.0.0.1", "--port", str(port), *args]
        with open(log_path, "wb") as log:
            proc = subprocess.Popen(cmd, cwd=REPO, stdout=log, stderr=subprocess.STDOUT)
        url = f"http://127.0.0.1:{port}"
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline and proc.poll() is None:
            try:
                if httpx.get(url + "/health", timeout=2).status_code == 200:
                    return url, proc
            except httpx.HTTPError:
                time.sleep(0.1)
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        elif _port_taken(log_path):
            continue
        break
    raise RuntimeError(f"fake provider did not start; its output: {log_path.read_text(errors='replace')[-2000:]}")


def stop_process(proc: subprocess.Popen) -> None:
    proc.terminate()
    try:
        proc.wait(timeout=10)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait(timeout=10)


def stop_started(started) -> None:
    """Stop what :func:`start_live_server` (a LiveServer) or :func:`start_fake_provider` (url, process) started."""
    if isinstance(started, LiveServer):
        stop_live_server(started)
    else:
        stop_process(started[1])


def start_together(*starts):
    """Call the zero-argument ``starts`` (each a :func:`start_live_server` or :func:`start_fake_provider`
    call, e.g. a ``functools.partial``) at once, in threads, and return what each returned, in order:
    the test waits for one process start instead of one after the other. When one fails, the others
    that started are stopped and its error is raised."""
    import concurrent.futures

    with concurrent.futures.ThreadPoolExecutor(len(starts)) as pool:
        futures = [pool.submit(start) for start in starts]
        concurrent.futures.wait(futures)
    failed = [f.exception() for f in futures if f.exception() is not None]
    if failed:
        for f in futures:
            if f.exception() is None:
                stop_started(f.result())
        raise failed[0]
    return [f.result() for f in futures]


class ThreadedServer:
    """uvicorn serving ``app`` on a free 127.0.0.1 port, in a daemon thread."""

    def __init__(self, app):
        import uvicorn

        self.config = uvicorn.Config(
            app, host="127.0.0.1", port=0, log_level="warning", lifespan="off", access_log=False
        )
        self.server = uvicorn.Server(self.config)
        sock = socket.socket()
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind(("127.0.0.1", 0))
        self.port = sock.getsockname()[1]
        self.url = f"http://127.0.0.1:{self.port}"
        self.thread = threading.Thread(target=self.server.run, kwargs={"sockets": [sock]}, daemon=True)
        self.thread.start()
        deadline = time.monotonic() + 30
        while not self.server.started:
            if time.monotonic() > deadline:
                raise RuntimeError("the threaded uvicorn did not start")
            time.sleep(0.02)

    def stop(self):
        self.server.should_exit = True
        self.thread.join(timeout=10)


@pytest.fixture(scope="module")
def batch_fake():
    """The fake provider (its batch routes) served by a :class:`ThreadedServer`, one per test module:
    (its base URL, its app)."""
    from service.fake_provider import create_fake_provider_app

    app = create_fake_provider_app(marker_key="batch-tests")
    server = ThreadedServer(app)
    yield server.url + "/v1", app
    server.stop()


@pytest.fixture(scope="module")
def fake_provider(request, tmp_path_factory):
    """A real fake provider (:func:`start_fake_provider`) for the test module: its base URL. Its
    command-line options are the module's ``FAKE_PROVIDER_ARGS`` (e.g. ``("--latency", "0.02")``), if any."""
    args = getattr(request.module, "FAKE_PROVIDER_ARGS", ())
    url, proc = start_fake_provider(tmp_path_factory.mktemp("fake") / "fake.log", *args)
    yield url
    stop_process(proc)


@pytest.fixture(scope="module")
def service(db_url, tmp_path_factory):
    """The service (one uvicorn worker, :func:`start_live_server`) on ``db_url``: one per test module and backend."""
    server = start_live_server(db_url, tmp_path_factory.mktemp("svc") / "server.log", workers=1)
    yield server
    stop_live_server(server)


def llmduel_at(url: str, *args: str, env: dict | None = None, timeout: float = 600) -> subprocess.CompletedProcess:
    """``llmduel ARGS`` as a user runs it (a real process) against the server at ``url``, with the admin key;
    ``env`` adds to this process's environment."""
    full = dict(os.environ, LLMDUEL_URL=url, LLMDUEL_API_KEY=ADMIN_KEY, **(env or {}))
    return subprocess.run(
        [sys.executable, "-m", "service.cli", *args],
        cwd=REPO,
        env=full,
        capture_output=True,
        text=True,
        timeout=timeout,
    )


# Files whose tests take longest (from a `--durations` profile), run first under pytest-xdist so
# that no long file starts last while the other worker idles. Other files follow in their usual
# order. Ordering only: every file runs either way. Named by basename (unique under tests/, in
# whichever folder the file sits).
SLOW_FILES_FIRST = (
    "test_batch_campaigns.py",  # the longest file (157 s of a CI run), which started ~470 s in
    "test_resume.py",
    "test_supervisor.py",
    "test_wheel_install.py",
    "test_rate_limits.py",
    "test_claims.py",
    "test_cli_edges.py",
    "test_cli_algorithms.py",
    "test_reuse_e2e.py",
    "test_price_map.py",
    "test_condorcet_verdict.py",
    "test_run_leases.py",
    "test_faults.py",
    "test_campaign_cli_e2e.py",
    "test_e2e_stack.py",
    "test_wor_e2e.py",
    "test_web_browser.py",
    "test_annotators_browser.py",
    "test_judge_bias_browser.py",
)


@pytest.hookimpl(trylast=True)
def pytest_collection_modifyitems(config, items):
    """Under xdist, the files of ``SLOW_FILES_FIRST`` first, then the others, most tests first
    (a stable sort: each file keeps its order; with ``--no-loadscope-reorder`` xdist hands out
    files in this order).

    Runs after pytest's own reordering (its SQLite tests, then its PostgreSQL tests per file stay
    in that order); every worker sorts the same collection the same way, as xdist requires.
    """
    if not os.environ.get("PYTEST_XDIST_WORKER"):
        return
    rank = {name: n for n, name in enumerate(SLOW_FILES_FIRST)}
    per_file = collections.Counter(item.path.name for item in items)
    items.sort(key=lambda item: (rank.get(item.path.name, len(rank)), -per_file[item.path.name], item.path.name))


# ---------------------------------------------------------------- a webhook receiver (the webhook tests)
class Receiver:
    """A webhook receiver on 127.0.0.1: answers ``/hook`` with the scripted statuses, in order."""

    def __init__(self, statuses: list[int], hang_first: float = 0.0):
        self.statuses = list(statuses)
        self.hang_first = hang_first
        self.requests: list[dict] = []
        self.other_paths: list[str] = []
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self):  # noqa: N802
                body = self.rfile.read(int(self.headers["Content-Length"]))
                if self.path != "/hook":
                    receiver.other_paths.append(self.path)
                    status = 200
                else:
                    receiver.requests.append({"headers": dict(self.headers), "body": body})
                    n = len(receiver.requests)
                    if n == 1 and receiver.hang_first:
                        time.sleep(receiver.hang_first)  # the sender is gone by now
                    status = receiver.statuses[min(n, len(receiver.statuses)) - 1]
                try:
                    self.send_response(status)
                    if status in (301, 302, 307, 308):
                        self.send_header("Location", "/elsewhere")
                    self.send_header("Content-Length", "0")
                    self.end_headers()
                except OSError:
                    pass

            def log_message(self, *args):
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/hook"

    def close(self):
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def receiver_factory():
    made = []

    def make(*args, **kwargs):
        r = Receiver(*args, **kwargs)
        made.append(r)
        return r

    yield make
    for r in made:
        r.close()


def pytest_unconfigure(config):
    """Stop the AnyIO worker threads a test's event loop left idle, so that the interpreter can exit.

    AnyIO stops a worker thread when the task it counts as its root finishes (a done callback). A loop
    closed before it runs that callback (a test's loop torn down while a service's background task
    ends) leaves the thread waiting for work forever; it is not a daemon, so the process would hang at
    exit after every test passed. Each such thread gets AnyIO's own shutdown command; one still running
    a call ends after it."""
    try:
        from anyio._backends._asyncio import WorkerThread
    except ImportError:  # pragma: no cover - another AnyIO layout: nothing to stop
        return
    import queue

    for thread in threading.enumerate():
        if isinstance(thread, WorkerThread) and thread.is_alive():
            thread.stopping = True
            try:
                thread.queue.put_nowait(None)
            except queue.Full:  # two calls queued: it takes them, then exits with its loop's root task
                pass
