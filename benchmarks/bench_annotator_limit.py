"""The cost of the shared annotator request limit: one database transaction per admitted request.

    .venv/bin/python benchmarks/bench_annotator_limit.py [--requests 2000] [--annotators 20]
                                                          [--backends sqlite,postgres] [--pg URL]

For each backend (SQLite in a temporary file; PostgreSQL in a fresh database on ``--pg``, skipped
with a note when no server answers) it migrates the schema, makes ``--annotators`` annotators and
takes ``--requests`` tokens from :class:`service.api.annotator_limits.AnnotatorRequestLimiter`
(a limit no request reaches), round robin over the annotators, in one thread: the median and p99
milliseconds per admitted request, what each annotator request now adds (plus the hop to a worker
thread). Then one annotator over its limit: the microseconds of a refusal on the process's fast
path, and how many database transactions its refused requests cost.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
import uuid
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from service.api.annotator_limits import AnnotatorRequestLimiter  # noqa: E402
from service.db import Database, upgrade_database  # noqa: E402


def _annotators(url: str, n: int) -> list[int]:
    """``n`` annotators of a new campaign, made through the API (an ASGI app, no network)."""
    import asyncio

    import httpx

    from service.app import create_app
    from service.config import Settings

    key = "bench-" + uuid.uuid4().hex
    settings = Settings(database_url=url, api_key=key, resume_runs=False, auto_migrate="never").with_database_url(url)
    app = create_app(settings)
    body = {
        "name": "bench limit",
        "models": [{"name": f"m{k}", "cost": 1.0, "client": {"kind": "simulated"}} for k in range(2)],
        "prompts": ["q"],
        "judge": {"kind": "human"},
    }

    async def make() -> list[int]:
        auth = {"Authorization": f"Bearer {key}"}
        async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://b", headers=auth) as c:
            cid = (await c.post("/v1/campaigns", json=body)).raise_for_status().json()["id"]
            out = []
            for k in range(n):
                r = await c.post(f"/v1/campaigns/{cid}/annotators", json={"label": f"a{k}"})
                out.append(int(r.raise_for_status().json()["id"]))
            return out

    try:
        return asyncio.run(make())
    finally:
        app.state.db.dispose()


def run(url: str, requests: int, annotators: int) -> None:
    upgrade_database(url)
    ids = _annotators(url, annotators)
    db = Database(url)
    try:
        limiter = AnnotatorRequestLimiter(db, 10**9)
        ms = []
        for k in range(requests):
            t0 = time.perf_counter()
            assert limiter.take(ids[k % len(ids)]) is None
            ms.append((time.perf_counter() - t0) * 1e3)
        ms.sort()
        print(
            f"  admitted: median {statistics.median(ms):.2f} ms, p99 {ms[int(0.99 * len(ms))]:.2f} ms per request ({requests} requests)"
        )
        tight = AnnotatorRequestLimiter(db, 1)
        tight.take(ids[0])
        asked = tight.asked
        t0 = time.perf_counter()
        refused = sum(tight.take(ids[0]) is not None for _ in range(10_000))
        us = (time.perf_counter() - t0) / 10_000 * 1e6
        print(
            f"  over its limit: {refused} of 10000 refused, {us:.1f} us each, {tight.asked - asked} database transactions"
        )
    finally:
        db.dispose()


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--requests", type=int, default=2000)
    ap.add_argument("--annotators", type=int, default=20)
    ap.add_argument("--backends", default="sqlite,postgres")
    ap.add_argument("--pg", default="postgresql+psycopg://postgres@127.0.0.1:5432/postgres")
    a = ap.parse_args()
    for backend in a.backends.split(","):
        print(backend)
        if backend == "sqlite":
            with tempfile.TemporaryDirectory() as tmp:
                run(f"sqlite:///{tmp}/bench.db", a.requests, a.annotators)
            continue
        import psycopg
        from sqlalchemy.engine import make_url

        admin = make_url(a.pg)
        conninfo = admin.set(drivername="postgresql").render_as_string(hide_password=False)
        name = f"llmduel_bench_limit_{uuid.uuid4().hex[:8]}"
        try:
            with psycopg.connect(conninfo, autocommit=True, connect_timeout=3) as conn:
                conn.execute(f'CREATE DATABASE "{name}"')
        except psycopg.OperationalError as exc:
            print(f"  skipped: no PostgreSQL ({str(exc).strip().splitlines()[0]})")
            continue
        try:
            run(admin.set(database=name).render_as_string(hide_password=False), a.requests, a.annotators)
        finally:
            with psycopg.connect(conninfo, autocommit=True, connect_timeout=3) as conn:
                conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


if __name__ == "__main__":
    main()
