"""Service settings: one pydantic-settings model, the only place the environment is read.

:class:`Settings` reads every variable of the table in docs/service.md ("Settings")
once, validates it, and is then passed around (``app.state.settings``,
``Campaigns.settings``); no other module reads ``os.environ`` for a setting.
:meth:`Settings.from_env` turns a bad value into :class:`SettingsError`, one line
that names the variable (``llmduel serve`` prints it and exits 2).

Constructing ``Settings(...)`` directly (tests, benchmarks) also reads the
environment for the fields not given; keyword arguments win over the environment.
Fields marked ``env=False`` (``demo``, ``api_key_generated``) are set by code only.
"""

from __future__ import annotations

import math
import secrets
import sys
from typing import Any, Literal

from pydantic import Field, ValidationError, field_validator, model_validator
from pydantic.fields import FieldInfo
from pydantic_settings import BaseSettings, EnvSettingsSource, PydanticBaseSettingsSource, SettingsConfigDict

from .egress import EgressPolicy

DEFAULT_DATABASE_URL = "sqlite:///./llmduel.db"
#: The shortest idle-in-transaction limit derived from a short run lease (tests use 1 to 2 s leases):
#: a policy checkpoint at 256 models keeps a transaction idle for over a second on a loaded machine
#: (docs/reliability.md, Run ownership).
IDLE_TRANSACTION_FLOOR_SECONDS = 5.0
ENV_PREFIX = "LLMDUEL_"


class SettingsError(ValueError):
    """A setting with a bad value: one line naming the variable."""


def normalise_database_url(url: str) -> str:
    """Use psycopg 3 for plain ``postgresql://`` / ``postgres://`` URLs."""
    if url.startswith("postgres://"):
        url = "postgresql://" + url[len("postgres://") :]
    if url.startswith("postgresql://"):
        url = "postgresql+psycopg://" + url[len("postgresql://") :]
    return url


def _code_only(default: Any) -> Any:
    """A field that is never read from the environment (set by code)."""
    return Field(default=default, json_schema_extra={"env": False})


class _EnvSource(EnvSettingsSource):
    """The environment, minus the fields marked ``env=False``."""

    def get_field_value(self, field: FieldInfo, field_name: str) -> tuple[Any, str, bool]:
        extra = field.json_schema_extra
        if isinstance(extra, dict) and extra.get("env") is False:
            return None, field_name, False
        return super().get_field_value(field, field_name)


class Settings(BaseSettings):
    model_config = SettingsConfigDict(
        env_prefix=ENV_PREFIX,
        env_ignore_empty=True,  # VAR= means "the default"
        frozen=True,
        extra="ignore",
        populate_by_name=True,
    )

    # SQLAlchemy URL (`postgresql://...` in production).
    database_url: str = Field(DEFAULT_DATABASE_URL, validation_alias="DATABASE_URL")
    # The admin key; unset: one is generated at start and printed once to stderr.
    api_key: str | None = Field(None, repr=False)
    api_key_generated: bool = _code_only(False)
    duel_expiry_seconds: float = Field(1800.0, gt=0)
    call_timeout_seconds: float = Field(600.0, gt=0)
    auto_migrate: Literal["sqlite", "always", "never"] = "sqlite"
    run_max_failures: int = Field(20, ge=1)
    webhook_timeout_seconds: float = Field(10.0, gt=0)
    # Webhook delivery (docs/reliability.md, Webhook delivery).
    webhook_max_attempts: int = Field(12, ge=1)
    webhook_retry_seconds: float = Field(2.0, gt=0)
    resume_runs: bool = True
    # Annotators (docs/service.md, Settings): skips per annotator and campaign, requests per annotator
    # token and minute in each worker process (429 beyond, with Retry-After).
    max_skips_per_annotator: int = Field(20, ge=0)
    annotator_requests_per_minute: int = Field(3000, ge=1)
    # Run ownership (docs/reliability.md, Run ownership): the lease and its heartbeat.
    run_lease_seconds: float = Field(20.0, gt=0)
    run_heartbeat_seconds: float = Field(5.0, gt=0)
    # Shutdown (SIGTERM/SIGINT): requests in progress get this long, then the workers are killed.
    shutdown_grace_seconds: float = Field(10.0, gt=0)
    # An idle keep-alive connection is closed after this many seconds (uvicorn's timeout_keep_alive).
    keep_alive_seconds: float = Field(5.0, gt=0, le=3600)
    pg_synchronous_commit: Literal["on", "off", "local", "remote_write", "remote_apply"] = "on"
    # PostgreSQL idle_in_transaction_session_timeout of the service's sessions (docs/reliability.md, Run
    # ownership): unset, the run lease but at least IDLE_TRANSACTION_FLOOR_SECONDS; 0: not set (the server's).
    pg_idle_transaction_seconds: float | None = Field(None, ge=0, le=86_400)
    # PostgreSQL: run the hot fast-path transactions on the event loop (see
    # docs/reliability.md, "Where the time goes"); off: always in worker threads.
    inline_transactions: bool = True
    hot_pool_size: int = Field(8, ge=1, validation_alias="LLMDUEL_PG_HOT_POOL_SIZE")
    # PostgreSQL: the SQLAlchemy pool of each worker process (connections kept, and more under load).
    pool_size: int = Field(10, ge=1, le=1000, validation_alias="LLMDUEL_PG_POOL_SIZE")
    pool_overflow: int = Field(20, ge=0, le=1000, validation_alias="LLMDUEL_PG_POOL_OVERFLOW")
    telemetry: bool = False  # FastAPI's OpenTelemetry instrumentation
    # Who may read the dashboards: local, key or open; unset: key (local with --demo).
    web_auth: Literal["local", "key", "open"] | None = None
    # A dashboard login (the cookie of the /login form) expires after this many hours.
    login_hours: float = Field(12.0, gt=0, le=24 * 366)
    # The address users reach the service at (absolute annotator links); unset: the request's own.
    public_base_url: str | None = None
    # A JSON price map in LiteLLM's format whose entries win over the bundled one (service.pricing).
    price_map: str | None = None
    # The hosts model clients and webhooks may reach (service.egress): names, *.domains, IPs, CIDR networks; * = all.
    allowed_hosts: str = "*"
    # `llmduel fake-provider`'s secret (its --marker-key): keys its answer texts and markers; unset: random.
    fake_secret: str | None = Field(None, repr=False)
    # The most duels one forecast may simulate in all (trials x duels per trial): a forecast request's CPU
    # is bounded whatever its trials; trials that reach their share count as not certified (the note says so).
    forecast_max_duels: int = Field(20_000_000, ge=10_000)
    # Demo campaign (llmduel serve --demo): created at start, run in the background.
    demo: bool = _code_only(False)

    @classmethod
    def settings_customise_sources(
        cls,
        settings_cls: type[BaseSettings],
        init_settings: PydanticBaseSettingsSource,
        env_settings: PydanticBaseSettingsSource,
        dotenv_settings: PydanticBaseSettingsSource,
        file_secret_settings: PydanticBaseSettingsSource,
    ) -> tuple[PydanticBaseSettingsSource, ...]:
        return (init_settings, _EnvSource(settings_cls))

    @field_validator("auto_migrate", "pg_synchronous_commit", "web_auth", mode="before")
    @classmethod
    def _lower(cls, v: Any) -> Any:
        return v.strip().lower() if isinstance(v, str) else v

    @field_validator(
        "duel_expiry_seconds",
        "call_timeout_seconds",
        "webhook_timeout_seconds",
        "webhook_retry_seconds",
        "run_lease_seconds",
        "run_heartbeat_seconds",
        "shutdown_grace_seconds",
        "keep_alive_seconds",
        "login_hours",
    )
    @classmethod
    def _finite(cls, v: float) -> float:
        if not math.isfinite(v):
            raise ValueError("must be a finite number")
        return v

    @field_validator("database_url")
    @classmethod
    def _url(cls, v: str) -> str:
        return normalise_database_url(v.strip())

    @field_validator("public_base_url")
    @classmethod
    def _base_url(cls, v: str | None) -> str | None:
        if v is None:
            return None
        v = v.strip().rstrip("/")
        if not v.startswith(("http://", "https://")):
            raise ValueError("must start with http:// or https://")
        return v

    @field_validator("allowed_hosts")
    @classmethod
    def _allowed_hosts(cls, v: str) -> str:
        EgressPolicy.parse(v)  # a bad entry: ValueError naming it
        return v.strip()

    @property
    def egress(self) -> EgressPolicy:
        """The parsed ``LLMDUEL_ALLOWED_HOSTS``."""
        return EgressPolicy.parse(self.allowed_hosts)

    @model_validator(mode="after")
    def _heartbeat_below_lease(self) -> Settings:
        if self.run_heartbeat_seconds >= self.run_lease_seconds:
            raise ValueError("LLMDUEL_RUN_HEARTBEAT_SECONDS must be below LLMDUEL_RUN_LEASE_SECONDS")
        return self

    @classmethod
    def from_env(cls, **overrides: Any) -> Settings:
        """The settings from the environment (``overrides`` win); :class:`SettingsError` on a bad value."""
        try:
            return cls(**overrides)
        except ValidationError as exc:
            raise SettingsError(describe_error(exc)) from None

    def replace(self, **changes: Any) -> Settings:
        """A copy with ``changes``, validated like the original."""
        values = {name: getattr(self, name) for name in type(self).model_fields}
        values.update(changes)
        return type(self)(**values)

    def with_database_url(self, url: str) -> Settings:
        return self.model_copy(update={"database_url": normalise_database_url(url)})

    @property
    def is_sqlite(self) -> bool:
        return self.database_url.startswith("sqlite")

    @property
    def idle_transaction_seconds(self) -> float:
        """How long a service session may sit idle inside a transaction before PostgreSQL ends it
        (0: no limit set): ``LLMDUEL_PG_IDLE_TRANSACTION_SECONDS``, else the run lease, at least
        :data:`IDLE_TRANSACTION_FLOOR_SECONDS`. A process idle that long inside a transaction has
        stalled: ended, its row locks no longer hold up the other processes."""
        if self.pg_idle_transaction_seconds is not None:
            return self.pg_idle_transaction_seconds
        return max(self.run_lease_seconds, IDLE_TRANSACTION_FLOOR_SECONDS)

    @property
    def login_seconds(self) -> int:
        return int(self.login_hours * 3600)

    def ensure_api_key(self) -> Settings:
        """Return settings with an admin key: the configured one, or a new random
        key (printed once to stderr by the caller)."""
        if self.api_key:
            return self
        return self.model_copy(update={"api_key": "llmd_" + secrets.token_urlsafe(24), "api_key_generated": True})


def env_name(field: str) -> str:
    """The environment variable of a :class:`Settings` field."""
    info = Settings.model_fields.get(field)
    alias = info.validation_alias if info is not None else None
    return alias if isinstance(alias, str) else ENV_PREFIX + field.upper()


def describe_error(exc: ValidationError) -> str:
    """One line for the first bad setting: its variable, what is wrong, the value (never for the key)."""
    err = exc.errors()[0]
    loc = str(err["loc"][0]) if err.get("loc") else ""
    field = loc if loc in Settings.model_fields else next((n for n in Settings.model_fields if env_name(n) == loc), loc)
    name = env_name(field) if field in Settings.model_fields else loc
    msg = err.get("msg", "invalid value")
    if field == "api_key":
        return f"{name}: {msg}"
    value = err.get("input")
    more = f" (and {len(exc.errors()) - 1} more)" if len(exc.errors()) > 1 else ""
    return f"{name}: {msg}, got {str(value)[:80]!r}{more}"


def announce_generated_key(settings: Settings) -> None:
    if settings.api_key_generated and settings.api_key:
        print(
            "llmduel: LLMDUEL_API_KEY is not set; generated an admin key for this run "
            f"(not stored anywhere):\n    {settings.api_key}\n"
            "llmduel: send it as 'Authorization: Bearer <key>'; set LLMDUEL_API_KEY to choose your own.",
            file=sys.stderr,
            flush=True,
        )
