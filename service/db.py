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

import logging
import threading
from contextlib import contextmanager, nullcontext
from pathlib import Path
from typing import Iterator

from sqlalchemy import create_engine, event, inspect, select
from sqlalchemy.engine import Engine
from sqlalchemy.orm import Session, sessionmaker

from .config import normalise_database_url
from .models import Campaign

log = logging.getLogger("llmduel.db")

REPO_ROOT = Path(__file__).resolve().parent.parent
MIGRATIONS_DIR = REPO_ROOT / "migrations"
ALEMBIC_INI = REPO_ROOT / "alembic.ini"


INLINE_LOCK_TIMEOUT_MS = 20


def make_engine(url: str, pg_synchronous_commit: str = "on", inline: bool = False) -> Engine:
    """The engine; ``inline``: the small PostgreSQL pool of event-loop transactions
    (one connection, row-lock waits capped at :data:`INLINE_LOCK_TIMEOUT_MS`)."""
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
    connect_args = {}
    if url.startswith("postgresql+psycopg"):
        # tcp_user_timeout: a dead peer (network gone, no RST) errors after 10 s
        # instead of the kernel's retransmission timeout (minutes).
        connect_args = {"connect_timeout": 5, "tcp_user_timeout": 10_000}
        options = []
        if pg_synchronous_commit != "on":
            options.append(f"-c synchronous_commit={pg_synchronous_commit}")
        if inline:
            options.append(f"-c lock_timeout={INLINE_LOCK_TIMEOUT_MS}")
        if options:
            connect_args["options"] = " ".join(options)
    if inline:
        return create_engine(url, pool_size=1, max_overflow=1, pool_timeout=0.1, pool_recycle=1800,
                             connect_args=connect_args)
    # No pool_pre_ping: it costs a round trip per transaction. Disconnects are
    # handled optimistically instead: the statement that meets a dead connection
    # fails (the request gets 503 with Retry-After), SQLAlchemy invalidates the
    # whole pool, and the next request gets fresh connections.
    return create_engine(
        url,
        pool_pre_ping=False,
        pool_size=10,
        max_overflow=20,
        pool_timeout=15,
        pool_recycle=1800,
        connect_args=connect_args,
    )


class Database:
    """One engine plus the session helpers used by the domain logic."""

    def __init__(self, url: str, pg_synchronous_commit: str = "on"):
        self.url = normalise_database_url(url)
        self.engine = make_engine(self.url, pg_synchronous_commit)
        self.is_sqlite = self.engine.dialect.name == "sqlite"
        self._read = sessionmaker(self.engine, expire_on_commit=False, autoflush=False)
        write_bind = self.engine.execution_options(sqlite_immediate=True) if self.is_sqlite else self.engine
        self._write = sessionmaker(write_bind, expire_on_commit=False, autoflush=False)
        self._sqlite_lock = threading.RLock()
        self.inline_engine: Engine | None = None
        self._write_inline = None
        if not self.is_sqlite:
            self.inline_engine = make_engine(self.url, pg_synchronous_commit, inline=True)
            self._write_inline = sessionmaker(self.inline_engine, expire_on_commit=False, autoflush=False)

    def inline_ready(self) -> bool:
        """Is an idle connection of the inline pool at hand (no connecting on the event loop)?"""
        return self.inline_engine is not None and self.inline_engine.pool.checkedin() > 0

    def warm_inline(self) -> None:
        """Open a connection of the inline pool and return it idle (run in a thread)."""
        if self.inline_engine is not None and self.inline_engine.pool.checkedin() == 0:
            with self.inline_engine.connect():
                pass

    @contextmanager
    def read(self) -> Iterator[Session]:
        session = self._read()
        try:
            yield session
        finally:
            session.rollback()
            session.close()

    @contextmanager
    def write(self, inline: bool = False) -> Iterator[Session]:
        """A write transaction, committed on success and rolled back on error.

        On SQLite the whole transaction holds the in-process writer lock and
        starts with BEGIN IMMEDIATE. ``inline`` (PostgreSQL): on the inline pool.
        """
        with self._sqlite_lock if self.is_sqlite else nullcontext():
            session = self._write_inline() if inline and self._write_inline is not None else self._write()
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

    def lock_campaign(self, session: Session, campaign_id: int) -> Campaign | None:
        """Load a campaign row inside a write transaction, locked for update."""
        stmt = select(Campaign).where(Campaign.id == campaign_id).with_for_update()
        return session.execute(stmt).scalar_one_or_none()

    def dispose(self) -> None:
        self.engine.dispose()
        if self.inline_engine is not None:
            self.inline_engine.dispose()

    # -- schema -----------------------------------------------------------
    def current_revision(self) -> str | None:
        with self.engine.connect() as conn:
            if not inspect(conn).has_table("alembic_version"):
                return None
            return conn.exec_driver_sql("SELECT version_num FROM alembic_version").scalar()

    def upgrade(self, revision: str = "head") -> None:
        upgrade_database(self.url, revision)


def alembic_config(url: str):
    from alembic.config import Config

    cfg = Config(str(ALEMBIC_INI)) if ALEMBIC_INI.exists() else Config()
    cfg.set_main_option("script_location", str(MIGRATIONS_DIR))
    cfg.set_main_option("sqlalchemy.url", normalise_database_url(url).replace("%", "%%"))
    cfg.attributes["configure_logging"] = False
    return cfg


def upgrade_database(url: str, revision: str = "head") -> None:
    """``alembic upgrade head`` on ``url`` (a no-op when already at head)."""
    from alembic import command

    command.upgrade(alembic_config(url), revision)


def head_revision() -> str:
    from alembic.script import ScriptDirectory

    return ScriptDirectory.from_config(alembic_config("sqlite://")).get_current_head()
