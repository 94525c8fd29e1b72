"""Service settings, read from the environment.

| variable | default | meaning |
|---|---|---|
| `DATABASE_URL` | `sqlite:///./llmduel.db` | SQLAlchemy URL (`postgresql://...` in production) |
| `LLMDUEL_API_KEY` | unset | admin key (`Authorization: Bearer <key>`); unset: one is generated at start and printed once to stderr |
| `LLMDUEL_DUEL_EXPIRY_SECONDS` | `1800` | a pending duel not judged within this time stops counting as in flight |
| `LLMDUEL_CALL_TIMEOUT_SECONDS` | `600` | a duel whose models have not both answered within this time expires (e.g. its process died) |
| `LLMDUEL_AUTO_MIGRATE` | `sqlite` | bring the schema to head at start: `sqlite` (only for SQLite), `always`, `never` |
| `LLMDUEL_RUN_MAX_FAILURES` | `20` | a background run pauses after this many consecutive failed duels (over all its concurrent tasks) |
| `LLMDUEL_WEBHOOK_TIMEOUT_SECONDS` | `10` | timeout of one webhook request |
| `LLMDUEL_WEBHOOK_MAX_ATTEMPTS` | `12` | a webhook event is given up (`failed`) after this many attempts without a 2xx answer |
| `LLMDUEL_WEBHOOK_RETRY_SECONDS` | `2` | the first retry's delay; each further retry waits twice as long (at most 1 h) |
| `LLMDUEL_RESUME_RUNS` | `1` | take over background runs whose owner is gone (at start, and polled every heartbeat while serving) |
| `LLMDUEL_RUN_LEASE_SECONDS` | `20` | a background run's owner holds a lease this long; another process takes the run over once it expires |
| `LLMDUEL_RUN_HEARTBEAT_SECONDS` | `5` | how often an owner renews its leases (and a process looks for expired ones); must be below the lease |
| `LLMDUEL_PG_SYNCHRONOUS_COMMIT` | `on` | PostgreSQL `synchronous_commit` of the service's sessions; `off` trades the durability of the last few hundred ms of commits on a *database server* crash for throughput (atomicity is unchanged) |
"""

from __future__ import annotations

import os
import secrets
import sys
from dataclasses import dataclass, replace

DEFAULT_DATABASE_URL = "sqlite:///./llmduel.db"


def _env_float(name: str, default: float, lo: float = 0.0) -> float:
    raw = os.environ.get(name)
    if raw is None or raw.strip() == "":
        return default
    try:
        value = float(raw)
    except ValueError:
        raise ValueError(f"{name} must be a number, got {raw!r}") from None
    if not value > lo:
        raise ValueError(f"{name} must be > {lo}, got {raw!r}")
    return value


def _env_int(name: str, default: int, lo: int = 1) -> int:
    raw = os.environ.get(name)
    if raw is None or raw.strip() == "":
        return default
    try:
        value = int(raw)
    except ValueError:
        raise ValueError(f"{name} must be an integer, got {raw!r}") from None
    if value < lo:
        raise ValueError(f"{name} must be >= {lo}, got {raw!r}")
    return value


def _env_bool(name: str, default: bool) -> bool:
    raw = os.environ.get(name)
    if raw is None or raw.strip() == "":
        return default
    return raw.strip().lower() in {"1", "true", "yes", "on"}


def normalise_database_url(url: str) -> str:
    """Use psycopg 3 for plain ``postgresql://`` / ``postgres://`` URLs."""
    if url.startswith("postgres://"):
        url = "postgresql://" + url[len("postgres://") :]
    if url.startswith("postgresql://"):
        url = "postgresql+psycopg://" + url[len("postgresql://") :]
    return url


@dataclass(frozen=True)
class Settings:
    database_url: str = DEFAULT_DATABASE_URL
    api_key: str | None = None
    api_key_generated: bool = False
    duel_expiry_seconds: float = 1800.0
    call_timeout_seconds: float = 600.0
    auto_migrate: str = "sqlite"
    run_max_failures: int = 20
    webhook_timeout_seconds: float = 10.0
    webhook_max_attempts: int = 12  # LLMDUEL_WEBHOOK_MAX_ATTEMPTS (docs/reliability.md, Webhook delivery)
    webhook_retry_seconds: float = 2.0  # LLMDUEL_WEBHOOK_RETRY_SECONDS
    resume_runs: bool = True
    run_lease_seconds: float = 20.0  # LLMDUEL_RUN_LEASE_SECONDS (docs/reliability.md, Run ownership)
    run_heartbeat_seconds: float = 5.0  # LLMDUEL_RUN_HEARTBEAT_SECONDS
    pg_synchronous_commit: str = "on"
    # PostgreSQL: run the hot fast-path transactions on the event loop (see
    # docs/reliability.md, "Where the time goes"); off: always in worker threads.
    inline_transactions: bool = True
    hot_pool_size: int = 8  # PostgreSQL connections per process for those (LLMDUEL_PG_HOT_POOL_SIZE)
    telemetry: bool = False  # FastAPI's OpenTelemetry instrumentation (LLMDUEL_TELEMETRY)
    # Demo campaign (llmduel serve --demo): created at start, run in the background.
    demo: bool = False
    public_base_url: str | None = None

    @classmethod
    def from_env(cls, **overrides) -> "Settings":
        auto = os.environ.get("LLMDUEL_AUTO_MIGRATE", "sqlite").strip().lower() or "sqlite"
        if auto not in {"sqlite", "always", "never"}:
            raise ValueError(f"LLMDUEL_AUTO_MIGRATE must be sqlite, always or never, got {auto!r}")
        key = os.environ.get("LLMDUEL_API_KEY") or None
        values = dict(
            database_url=normalise_database_url(os.environ.get("DATABASE_URL") or DEFAULT_DATABASE_URL),
            api_key=key,
            duel_expiry_seconds=_env_float("LLMDUEL_DUEL_EXPIRY_SECONDS", 1800.0),
            call_timeout_seconds=_env_float("LLMDUEL_CALL_TIMEOUT_SECONDS", 600.0),
            auto_migrate=auto,
            run_max_failures=_env_int("LLMDUEL_RUN_MAX_FAILURES", 20),
            webhook_timeout_seconds=_env_float("LLMDUEL_WEBHOOK_TIMEOUT_SECONDS", 10.0),
            webhook_max_attempts=_env_int("LLMDUEL_WEBHOOK_MAX_ATTEMPTS", 12),
            webhook_retry_seconds=_env_float("LLMDUEL_WEBHOOK_RETRY_SECONDS", 2.0),
            resume_runs=_env_bool("LLMDUEL_RESUME_RUNS", True),
            run_lease_seconds=_env_float("LLMDUEL_RUN_LEASE_SECONDS", 20.0),
            run_heartbeat_seconds=_env_float("LLMDUEL_RUN_HEARTBEAT_SECONDS", 5.0),
            inline_transactions=_env_bool("LLMDUEL_INLINE_TRANSACTIONS", True),
            hot_pool_size=_env_int("LLMDUEL_PG_HOT_POOL_SIZE", 8),
            telemetry=_env_bool("LLMDUEL_TELEMETRY", False),
            pg_synchronous_commit=os.environ.get("LLMDUEL_PG_SYNCHRONOUS_COMMIT", "on").strip().lower() or "on",
        )
        values.update(overrides)
        if values["pg_synchronous_commit"] not in {"on", "off", "local", "remote_write", "remote_apply"}:
            raise ValueError("LLMDUEL_PG_SYNCHRONOUS_COMMIT must be on, off, local, remote_write or remote_apply")
        if values["run_heartbeat_seconds"] >= values["run_lease_seconds"]:
            raise ValueError("LLMDUEL_RUN_HEARTBEAT_SECONDS must be below LLMDUEL_RUN_LEASE_SECONDS")
        settings = cls(**values)
        return settings.with_database_url(settings.database_url)

    def with_database_url(self, url: str) -> "Settings":
        return replace(self, database_url=normalise_database_url(url))

    @property
    def is_sqlite(self) -> bool:
        return self.database_url.startswith("sqlite")

    def ensure_api_key(self) -> "Settings":
        """Return settings with an admin key: the configured one, or a new random
        key (printed once to stderr by the caller)."""
        if self.api_key:
            return self
        return replace(self, api_key="llmd_" + secrets.token_urlsafe(24), api_key_generated=True)


def announce_generated_key(settings: Settings) -> None:
    if settings.api_key_generated and settings.api_key:
        print(
            "llmduel: LLMDUEL_API_KEY is not set; generated an admin key for this run "
            f"(not stored anywhere):\n    {settings.api_key}\n"
            "llmduel: send it as 'Authorization: Bearer <key>'; set LLMDUEL_API_KEY to choose your own.",
            file=sys.stderr,
            flush=True,
        )
