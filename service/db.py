"""Engine, sessions, write serialisation and migrations.

Writes that touch a campaign go through :meth:`Database.write`, which serialises
them per campaign:

* PostgreSQL: the transaction takes ``SELECT ... FOR UPDATE`` on the campaign row
  (:meth:`Database.lock_campaign`), so concurrent requests on one campaign queue
  up on the row lock, across processes.
* SQLite: one writer at a time anyway; in-process writers queue on a lock (no busy
  waiting) and every write transaction starts with ``BEGIN IMMEDIATE``, which
  serialises writers across processes too.
"""

from __future__ import annotations

import asyncio
import datetime as dt
import logging
import threading
from contextlib import asynccontextmanager, contextmanager, nullcontext
from typing import Any, Iterator, cast

import asyncpg
from alembic import command
from alembic.config import Config
from alembic.script import ScriptDirectory
from sqlalchemy import create_engine, event, inspect, select, text
from sqlalchemy.engine import CursorResult, Engine, Result, make_url
from sqlalchemy.orm import Session, sessionmaker

from .config import normalise_database_url
from .models import Campaign

log = logging.getLogger("llmduel.db")


def rowcount(result: Result[Any]) -> int:
    """The rows an UPDATE or DELETE matched. ``Session.execute`` is annotated to return a
    :class:`Result`; for a DML statement it is a :class:`CursorResult`, which has the count."""
    return cast(CursorResult[Any], result).rowcount


MIGRATIONS_PACKAGE = "migrations"  # installed with the service (pyproject: packages "migrations*")


def migrations_dir() -> str:
    """The Alembic scripts, located as the ``migrations`` package's resources (not by a path
    relative to this file): the same in a checkout, an editable install and a wheel.
    **choice**: the package must live in a directory (not a zip): Alembic reads the
    version scripts as files."""
    from importlib.resources import files

    return str(files(MIGRATIONS_PACKAGE))


def pg_session_settings(pg_synchronous_commit: str = "on", idle_transaction_seconds: float = 0) -> dict[str, str]:
    """The PostgreSQL settings every service session starts with, besides the defaults:
    ``synchronous_commit`` when not ``on``, and ``idle_in_transaction_session_timeout`` (in ms)
    when ``idle_transaction_seconds`` is set (:attr:`Settings.idle_transaction_seconds`)."""
    out = {}
    if pg_synchronous_commit != "on":
        out["synchronous_commit"] = pg_synchronous_commit
    if idle_transaction_seconds > 0:
        out["idle_in_transaction_session_timeout"] = str(max(1, round(idle_transaction_seconds * 1000)))
    return out


def make_engine(
    url: str,
    pg_synchronous_commit: str = "on",
    pool_size: int = 10,
    max_overflow: int = 20,
    *,
    idle_transaction_seconds: float = 0,
) -> Engine:
    """The engine (SQLite with WAL and BEGIN IMMEDIATE for writes; PostgreSQL through psycopg, a pool
    of ``pool_size`` connections plus ``max_overflow`` more under load: LLMDUEL_PG_POOL_SIZE and
    LLMDUEL_PG_POOL_OVERFLOW; its sessions start with :func:`pg_session_settings`)."""
    url = normalise_database_url(url)
    if url.startswith("sqlite"):
        engine = create_engine(
            url,
            connect_args={"check_same_thread": False, "timeout": 60},
            pool_pre_ping=False,
        )

        @event.listens_for(engine, "connect")
        def _sqlite_connect(dbapi_conn, _record):  # pragma: no cover - trivial
            # Let SQLAlchemy's "begin" event issue BEGIN (pysqlite's own
            # transaction handling cannot do BEGIN IMMEDIATE).
            dbapi_conn.isolation_level = None
            cur = dbapi_conn.cursor()
            cur.execute("PRAGMA foreign_keys=ON")
            cur.execute("PRAGMA busy_timeout=60000")
            if ":memory:" not in url:
                cur.execute("PRAGMA journal_mode=WAL")
                cur.execute("PRAGMA synchronous=NORMAL")
            cur.close()

        @event.listens_for(engine, "begin")
        def _sqlite_begin(conn):  # pragma: no cover - trivial
            if conn.get_execution_options().get("sqlite_immediate"):
                conn.exec_driver_sql("BEGIN IMMEDIATE")
            else:
                conn.exec_driver_sql("BEGIN")

        return engine
    connect_args: dict[str, int | str] = {}
    if url.startswith("postgresql+psycopg"):
        # tcp_user_timeout: a dead peer (network gone, no RST) errors after 10 s
        # instead of the kernel's retransmission timeout (minutes).
        connect_args = {"connect_timeout": 5, "tcp_user_timeout": 10_000}
        options = pg_session_settings(pg_synchronous_commit, idle_transaction_seconds)
        if options:
            connect_args["options"] = " ".join(f"-c {k}={v}" for k, v in options.items())
    # No pool_pre_ping: it costs a round trip per transaction. Disconnects are
    # handled optimistically instead: the statement that meets a dead connection
    # fails (the request gets 503 with Retry-After), SQLAlchemy invalidates the
    # whole pool, and the next request gets fresh connections.
    return create_engine(
        url,
        pool_pre_ping=False,
        pool_size=pool_size,
        max_overflow=max_overflow,
        pool_timeout=15,
        pool_recycle=1800,
        connect_args=connect_args,
    )


class HotPool:
    """A small pool of asyncpg connections for the hot fast-path transactions (PostgreSQL).

    They run on the event loop (:mod:`service.cycle`), so while PostgreSQL
    works, or a transaction waits for a campaign's row lock, the loop serves other
    requests. At most ``size`` connections per process; a request waits for one
    for at most ``acquire_timeout`` seconds, then gets 503 like any unreachable
    database. Connections use UTC, a ``command_timeout`` (a silent network
    cannot hold a request for ever) and :func:`pg_session_settings`. A connection
    is kept only when it comes back idle (no transaction open); one that met an
    error mid-transaction is closed, so a database that went away and came back
    needs no manual step: the next request connects anew. Connections belong to
    one event loop; used from another loop (tests), the pool starts afresh.
    """

    def __init__(
        self,
        url: str,
        pg_synchronous_commit: str = "on",
        size: int = 8,
        acquire_timeout: float = 10.0,
        connect_timeout: float = 5.0,
        command_timeout: float = 60.0,
        *,
        idle_transaction_seconds: float = 0,
    ):
        self.dsn = make_url(url).set(drivername="postgresql").render_as_string(hide_password=False)
        settings = {"TimeZone": "UTC", **pg_session_settings(pg_synchronous_commit, idle_transaction_seconds)}
        self.connect_kwargs = {
            "timeout": connect_timeout,
            "command_timeout": command_timeout,
            "server_settings": settings,
        }
        self.size = size
        self.acquire_timeout = acquire_timeout
        self._loop: asyncio.AbstractEventLoop | None = None
        self._idle: list = []
        self._slots: asyncio.Semaphore | None = None
        self.connects = 0  # connections opened so far (a figure for tests and benchmarks)

    def _bind_to_running_loop(self) -> None:
        loop = asyncio.get_running_loop()
        if loop is not self._loop:
            self.discard_idle()
            self._loop = loop
            self._slots = asyncio.Semaphore(self.size)

    def discard_idle(self) -> None:
        """Close the idle connections without waiting (usable when no loop runs)."""
        idle, self._idle = self._idle, []
        for conn in idle:
            try:
                conn.terminate()
            except RuntimeError:  # its event loop is closed (asyncio.run per call): the socket goes with it
                pass

    async def _connect(self):
        conn = await asyncpg.connect(self.dsn, **self.connect_kwargs)
        self.connects += 1
        return conn

    @asynccontextmanager
    async def connection(self):
        """``(connection, reused)``: ``reused`` is False for a connection opened just now."""
        self._bind_to_running_loop()
        slots = self._slots
        try:
            await asyncio.wait_for(slots.acquire(), self.acquire_timeout)
        except asyncio.TimeoutError:
            raise HotPathUnavailable("no database connection free for the hot path") from None
        conn = None
        broken = False
        try:
            while self._idle and conn is None:
                conn = self._idle.pop()
                if conn.is_closed():
                    conn = None
            reused = conn is not None
            if conn is None:
                try:
                    conn = await self._connect()
                except (OSError, asyncio.TimeoutError) as exc:
                    raise HotPathUnavailable(f"cannot connect: {type(exc).__name__}") from None
            try:
                yield conn, reused
            except BaseException as exc:
                if is_connection_error(exc):  # the protocol state is unknown: never reuse it
                    broken = True
                raise
        finally:  # kept only if idle (committed or rolled back); an error mid-transaction closes it
            if conn is not None:
                if not broken and not conn.is_closed() and not conn.is_in_transaction() and self._slots is slots:
                    self._idle.append(conn)
                else:
                    conn.terminate()
            slots.release()


class HotPathUnavailable(Exception):
    """The hot path's database connection could not be had (the API answers 503)."""


def is_connection_error(exc: BaseException) -> bool:
    """Did ``exc`` come from a lost, refused or timed-out hot-path (asyncpg) connection?"""
    return isinstance(
        exc,
        (
            HotPathUnavailable,
            OSError,
            asyncio.TimeoutError,
            asyncpg.InterfaceError,
            asyncpg.exceptions.InternalClientError,  # a connection left mid-operation
            asyncpg.PostgresConnectionError,
            asyncpg.exceptions.AdminShutdownError,
        ),
    )


class Database:
    """One engine plus the session helpers used by the domain logic."""

    def __init__(
        self,
        url: str,
        pg_synchronous_commit: str = "on",
        hot_pool_size: int = 8,
        pool_size: int = 10,
        max_overflow: int = 20,
        *,
        idle_transaction_seconds: float = 0,
    ):
        self.url = normalise_database_url(url)
        self.engine = make_engine(
            self.url, pg_synchronous_commit, pool_size, max_overflow, idle_transaction_seconds=idle_transaction_seconds
        )
        self.is_sqlite = self.engine.dialect.name == "sqlite"
        self._read = sessionmaker(self.engine, expire_on_commit=False, autoflush=False)
        write_bind = self.engine.execution_options(sqlite_immediate=True) if self.is_sqlite else self.engine
        self._write = sessionmaker(write_bind, expire_on_commit=False, autoflush=False)
        self._sqlite_lock = threading.RLock()
        self.hot_pool: HotPool | None = None
        if not self.is_sqlite:
            self.hot_pool = HotPool(
                self.url, pg_synchronous_commit, size=hot_pool_size, idle_transaction_seconds=idle_transaction_seconds
            )

    @contextmanager
    def read(self) -> Iterator[Session]:
        session = self._read()
        try:
            yield session
        finally:
            session.rollback()
            session.close()

    @contextmanager
    def write(self) -> Iterator[Session]:
        """A write transaction, committed on success and rolled back on error.

        On SQLite the whole transaction holds the in-process writer lock and
        starts with BEGIN IMMEDIATE.
        """
        with self._sqlite_lock if self.is_sqlite else nullcontext():
            session = self._write()
            try:
                yield session
                session.commit()
                hook = session.info.pop("after_commit", None)
                if hook is not None:
                    hook()
            except BaseException:
                session.rollback()
                raise
            finally:
                session.close()

    def lock_campaign(self, session: Session, campaign_id: int, skip_locked: bool = False) -> Campaign | None:
        """Load a campaign row inside a write transaction, locked for update.

        ``skip_locked`` (PostgreSQL ``FOR UPDATE SKIP LOCKED``): None at once when another
        transaction holds the row's lock, instead of waiting for it (the run take-over, which
        tries again at the next heartbeat). SQLite has no row locks: its writers queue."""
        stmt = select(Campaign).where(Campaign.id == campaign_id).with_for_update(skip_locked=skip_locked)
        return session.execute(stmt).scalar_one_or_none()

    def client_paced(self, session: Session) -> None:
        """Lift the idle-in-transaction limit for ``session``'s transaction (PostgreSQL, ``SET LOCAL``):
        a read whose pages go out as an HTTP client takes them (the export) sits idle in its
        transaction while the client is slow, and holds no row lock that anyone waits for."""
        if not self.is_sqlite:
            session.execute(text("SET LOCAL idle_in_transaction_session_timeout = 0"))

    def clock(self, session: Session) -> dt.datetime:
        """The database's clock (aware UTC), in ``session``'s transaction: PostgreSQL's
        ``clock_timestamp()`` (the server's time now, not the transaction's start), SQLite's
        ``'now'`` (the clock of the one host its file lives on). Run leases and store claims are
        timed by it, never by a worker's own clock, so a worker whose clock is off cannot take a
        healthy owner's lease early nor keep its own too long."""
        if self.is_sqlite:
            raw = session.execute(text("SELECT strftime('%Y-%m-%d %H:%M:%f', 'now')")).scalar_one()
            return dt.datetime.fromisoformat(raw).replace(tzinfo=dt.timezone.utc)
        return session.execute(text("SELECT clock_timestamp()")).scalar_one().astimezone(dt.timezone.utc)

    def dispose(self) -> None:
        self.engine.dispose()
        if self.hot_pool is not None:
            self.hot_pool.discard_idle()

    # -- schema -----------------------------------------------------------
    def current_revision(self) -> str | None:
        with self.engine.connect() as conn:
            if not inspect(conn).has_table("alembic_version"):
                return None
            return conn.exec_driver_sql("SELECT version_num FROM alembic_version").scalar()

    def upgrade(self, revision: str = "head") -> None:
        upgrade_database(self.url, revision)


def alembic_config(url: str):
    cfg = Config()  # no alembic.ini: everything the service needs is set here
    cfg.set_main_option("script_location", migrations_dir())
    cfg.set_main_option("path_separator", "os")
    cfg.set_main_option("sqlalchemy.url", normalise_database_url(url).replace("%", "%%"))
    cfg.attributes["configure_logging"] = False
    return cfg


def upgrade_database(url: str, revision: str = "head") -> None:
    """``alembic upgrade head`` on ``url`` (a no-op when already at head)."""
    command.upgrade(alembic_config(url), revision)


def head_revision() -> str | None:
    """The newest migration's revision (None only without any migration)."""
    return ScriptDirectory.from_config(alembic_config("sqlite://")).get_current_head()
