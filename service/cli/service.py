"""``llmduel serve``, ``llmduel replay`` and ``llmduel db``: the service commands.

Registered by ``service.cli`` through :func:`add_parsers`; heavy modules are
imported inside the handlers.
"""

from __future__ import annotations

import argparse
import json
import sys
from contextlib import contextmanager

from service.cli.args import CLIError, record_id


def add_parsers(subparsers) -> None:
    add_serve_parser(subparsers)
    add_replay_parser(subparsers)
    add_db_parser(subparsers)


# ---------------------------------------------------------------- serve
def add_serve_parser(subparsers) -> None:
    p = subparsers.add_parser(
        "serve",
        help="run the REST API (uvicorn)",
        description="Run the llmduel service. DATABASE_URL selects the database "
        "(default sqlite:///./llmduel.db); LLMDUEL_API_KEY is the admin key "
        "(generated and printed once when unset).",
    )
    p.add_argument("--host", default="127.0.0.1", help="bind address (default 127.0.0.1)")
    p.add_argument("--port", type=int, default=8000, help="port (default 8000)")
    p.add_argument(
        "--demo",
        action=argparse.BooleanOptionalAction,
        default=False,
        help="create and run an offline demo campaign (simulated models and judge, "
        "the paper's synthetic instance with costs (4,1,1)); progress on stderr",
    )
    p.add_argument(
        "--workers",
        type=int,
        default=1,
        help="worker processes (default 1); each has its own SO_REUSEPORT socket, so the kernel "
        "spreads connections evenly (see docs/service.md)",
    )
    p.add_argument("--log-level", default="info", choices=["critical", "error", "warning", "info", "debug"])
    p.set_defaults(handler=cmd_serve)


#: What OpenBLAS, OpenMP and MKL read for their thread counts, once, when numpy loads.
BLAS_THREADS = ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS")


def one_blas_thread() -> None:
    """One BLAS thread per ``llmduel serve`` process, to be set before numpy loads: the server's
    matrices are small (a 132 x 132 solve took 0.3 s with OpenBLAS's threads on a loaded 2-core
    machine, 0.3 ms with one) and its concurrency is its requests and workers. This writes the
    variables, it reads no setting; an operator's own value stands."""
    import os

    for var in BLAS_THREADS:
        os.environ.setdefault(var, "1")


def cmd_serve(args) -> int:
    import logging

    one_blas_thread()  # set by service.cli.main before its parser loads numpy; again for a caller of this

    import uvicorn

    from service.config import Settings, SettingsError, announce_generated_key
    from service.db import Database, head_revision

    if args.workers < 1:
        raise CLIError("serve: --workers must be >= 1")
    if args.demo and args.workers > 1:
        raise CLIError("serve: --demo runs in a single worker; drop --workers")
    logging.basicConfig(level=getattr(logging, args.log_level.upper()), format="%(levelname)s %(name)s: %(message)s")
    if args.log_level != "debug":
        logging.getLogger("alembic").setLevel(logging.WARNING)
    shown_host = "127.0.0.1" if args.host in ("0.0.0.0", "::") else args.host
    try:
        settings = Settings.from_env(demo=args.demo)
    except SettingsError as exc:
        raise CLIError(str(exc)) from None
    if settings.public_base_url is None:
        settings = settings.model_copy(update={"public_base_url": f"http://{shown_host}:{args.port}"})
    # A generated key is printed once here; the workers get these settings (key included) as an argument.
    settings = settings.ensure_api_key()
    announce_generated_key(settings)
    # Migrate once here, before any worker starts (no race between workers).
    if settings.auto_migrate == "always" or (settings.auto_migrate == "sqlite" and settings.is_sqlite):
        db = Database(settings.database_url)
        try:
            if db.current_revision() != head_revision():
                db.upgrade()
        finally:
            db.dispose()
    print(
        f"llmduel: serving on http://{shown_host}:{args.port} (API docs at /docs), "
        f"database {_redact_url(settings.database_url)}",
        file=sys.stderr,
        flush=True,
    )
    if args.workers > 1:
        from service.workers import Supervisor

        try:
            supervisor = Supervisor(
                host=args.host, port=args.port, n=args.workers, log_level=args.log_level, settings=settings
            )
        except OSError as exc:
            print(f"llmduel serve: cannot listen on {args.host}:{args.port}: {exc.strerror or exc}", file=sys.stderr)
            return 2
        return supervisor.run()
    else:
        from service.app import create_app

        uvicorn.run(
            create_app(settings),
            host=args.host,
            port=args.port,
            log_level=args.log_level,
            # uvicorn annotates both timeouts int but uses them as float seconds (asyncio timers)
            timeout_graceful_shutdown=settings.shutdown_grace_seconds,  # type: ignore[arg-type]
            timeout_keep_alive=settings.keep_alive_seconds,  # type: ignore[arg-type]
        )
    return 0


@contextmanager
def database_errors(url: str):
    """A database that cannot be reached or used becomes one :class:`CLIError` line (the URL without its password)."""
    from sqlalchemy.exc import SQLAlchemyError

    try:
        yield
    except SQLAlchemyError as exc:
        reason = getattr(exc, "orig", None) or exc
        first = (str(reason).strip().splitlines() or [type(reason).__name__])[0]
        raise CLIError(f"database {_redact_url(url)}: {type(reason).__name__}: {first[:300]}") from None
    except OSError as exc:
        raise CLIError(f"database {_redact_url(url)}: {exc.strerror or exc}") from None


def require_existing_database(url: str) -> None:
    """A command that only reads must not create a database: SQLite creates a missing file on
    connect, so a missing file is a :class:`CLIError` naming where it looked. Other databases
    (PostgreSQL) are never created by a connection; a missing one is the driver's error."""
    from pathlib import Path

    from sqlalchemy.engine import make_url

    try:
        parsed = make_url(url)
    except Exception:  # the engine reports a malformed URL itself
        return
    name = parsed.database
    if parsed.get_backend_name() != "sqlite" or not name or name == ":memory:" or parsed.query.get("uri"):
        return
    path = Path(name).expanduser()
    if not path.exists():
        raise CLIError(
            f"database {_redact_url(url)}: no such file {path.resolve()} (this command only reads and creates "
            "no database; set DATABASE_URL to the service's database)"
        )


def settings_from_env():
    """:meth:`Settings.from_env`, a bad value as a one-line :class:`CLIError`."""
    from service.config import Settings, SettingsError

    try:
        return Settings.from_env()
    except SettingsError as exc:
        raise CLIError(str(exc)) from None


def _redact_url(url: str) -> str:
    try:
        from sqlalchemy.engine import make_url

        return make_url(url).render_as_string(hide_password=True)
    except Exception:
        return "<database>"


# ---------------------------------------------------------------- replay
def add_replay_parser(subparsers) -> None:
    p = subparsers.add_parser(
        "replay",
        help="rebuild a campaign's policy from its duel log and compare",
        description="Exit 0 when the stored state equals the state rebuilt from the "
        "duel log, 1 with a diff when it does not, 2 when the campaign is missing.",
    )
    p.add_argument("campaign_id", type=record_id("CAMPAIGN_ID"), metavar="CAMPAIGN_ID")
    p.add_argument("--json", action="store_true", help="print the result as JSON")
    p.set_defaults(handler=cmd_replay)


def cmd_replay(args) -> int:
    from service.campaigns import NotFound
    from service.container import build_campaigns
    from service.db import Database

    settings = settings_from_env()
    require_existing_database(settings.database_url)
    with database_errors(settings.database_url):
        db = Database(settings.database_url)
        try:
            try:
                result = build_campaigns(settings, db).replay.replay(args.campaign_id)
            except NotFound as exc:
                raise CLIError(f"replay: {exc.detail}") from None
        finally:
            db.dispose()
    if args.json:
        print(json.dumps(result.to_dict(), indent=2))
    elif result.ok:
        print(f"campaign {result.campaign_id}: stored state equals the replayed log ({result.events} events)")
    else:
        print(f"campaign {result.campaign_id}: stored state differs from the replayed log:")
        for line in result.diff:
            print(f"  {line}")
    return 0 if result.ok else 1


# ---------------------------------------------------------------- db
def add_db_parser(subparsers) -> None:
    p = subparsers.add_parser("db", help="database schema (Alembic migrations)")
    sub = p.add_subparsers(dest="db_command", required=True)
    up = sub.add_parser("upgrade", help="apply migrations (default: to head)")
    up.add_argument("revision", nargs="?", default="head")
    up.set_defaults(handler=cmd_db_upgrade)
    cur = sub.add_parser("current", help="print the schema revision of the database")
    cur.set_defaults(handler=cmd_db_current)


def cmd_db_upgrade(args) -> int:
    from service.config import Settings  # noqa: F401
    from service.db import upgrade_database

    settings = settings_from_env()
    with database_errors(settings.database_url):
        upgrade_database(settings.database_url, args.revision)
    print(f"database {_redact_url(settings.database_url)} upgraded to {args.revision}", file=sys.stderr)
    return 0


def cmd_db_current(args) -> int:
    from service.config import Settings  # noqa: F401
    from service.db import Database, head_revision

    url = settings_from_env().database_url
    require_existing_database(url)
    with database_errors(url):
        db = Database(url)
        try:
            current = db.current_revision()
        finally:
            db.dispose()
    head = head_revision()
    print(f"{current or '(empty)'}{' (head)' if current == head else f' (head is {head})'}")
    return 0
