"""The hot path alone: CPU per vote cycle (next duel + vote), without HTTP, on PostgreSQL.

    .venv/bin/python benchmarks/bench_hotpath.py [--blocks 3] [--cycles 1000] [--path loop|thread]

One process, one annotator, one campaign with 4 simulated models (they answer at
once), calling the service layer directly (``Cycle.next_duel`` and
``.vote``) in a loop. Each block of ``--cycles`` cycles prints the service's CPU
per cycle (this process) and PostgreSQL's (the server's processes, from /proc),
so the transaction layer can be measured without the HTTP stack and without the
noise of 50 concurrent clients. ``--path`` chooses the driver of the one plan and
verdict sequence (service/cycle/): ``loop`` (asyncpg on the event loop, the default
on PostgreSQL) or ``thread`` (SQLAlchemy Core in worker threads).

Then it runs ``VACUUM`` and one more block, and one block on a new campaign:
PostgreSQL's CPU per cycle grows with the campaign's number of duels until the
tables are vacuumed (docs/reliability.md, "What is left").
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
import time
import uuid
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "benchmarks"))


def main() -> int:
    import psycopg
    from bench_load import create_database, drop_database, postgres_cpu_seconds

    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--pg", default=os.environ.get("LLMDUEL_TEST_PG_URL", "postgresql://postgres@127.0.0.1:5432/test"))
    ap.add_argument("--blocks", type=int, default=3)
    ap.add_argument("--cycles", type=int, default=1000)
    ap.add_argument("--path", choices=["loop", "thread"], default="loop")
    args = ap.parse_args()
    if args.blocks < 1 or args.cycles < 1:
        ap.error("--blocks and --cycles must be >= 1")

    url, conninfo, name = create_database(args.pg)
    try:
        from service.app import create_app
        from service.auth import Principal
        from service.config import Settings
        from service.db import upgrade_database
        from service.schemas import CampaignCreate

        upgrade_database(url)
        settings = Settings(
            database_url=url,
            api_key="bench-" + uuid.uuid4().hex,
            resume_runs=False,
            auto_migrate="never",
            inline_transactions=args.path == "loop",
        ).with_database_url(url)
        app = create_app(settings)
        svc = app.state.campaigns.cycle
        body = {
            "name": "hot path",
            "delta": 0.001,
            "judge": {"kind": "human"},
            "prompts": [f"prompt {k}" for k in range(20)],
            "models": [
                {"name": f"m{k}", "cost": 0.001 * (1 + k % 3), "client": {"kind": "simulated"}} for k in range(4)
            ],
        }

        def new_campaign(n: int) -> tuple[int, Principal]:
            cid = app.state.campaigns.lifecycle.create_campaign(CampaignCreate(**body))
            return cid, Principal(admin=False, campaign_id=cid, annotator_id=n)

        async def cycles(cid: int, who: Principal, n: int) -> None:
            for k in range(n):
                view, _ = await svc.next_duel(cid, who)
                await svc.vote(view["id"], "tie" if k % 10 == 0 else ("a" if k % 2 else "b"), who)

        async def block(label: str, cid: int, who: Principal) -> None:
            t0, p0 = time.process_time(), postgres_cpu_seconds()
            await cycles(cid, who, args.cycles)
            cpu, pg = time.process_time() - t0, postgres_cpu_seconds()
            pg_ms = "n/a" if p0 is None or pg is None else f"{(pg - p0) / args.cycles * 1000:.2f} ms"
            print(f"  {label:<34} service {cpu / args.cycles * 1000:.2f} ms, PostgreSQL {pg_ms} per cycle")

        async def run() -> None:
            cid, who = new_campaign(1)
            await cycles(cid, who, 200)  # warm-up: caches, prepared statements
            print(f"path={args.path}: {args.blocks} blocks of {args.cycles} vote cycles on one campaign")
            for b in range(args.blocks):
                await block(f"block {b + 1} (duels {200 + b * args.cycles}+)", cid, who)
            with psycopg.connect(conninfo.rsplit("/", 1)[0] + "/" + name, autocommit=True) as conn:
                conn.execute("VACUUM campaigns")
                conn.execute("VACUUM duels")
            await block("after VACUUM, same campaign", cid, who)
            cid2, who2 = new_campaign(2)
            await cycles(cid2, who2, 50)
            await block("a new campaign", cid2, who2)
            print(f"  transactions: {svc.hot_counts}")

        asyncio.run(run())
        app.state.db.dispose()
    finally:
        drop_database(conninfo, name)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
