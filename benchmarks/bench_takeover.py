"""How long a background run waits for a new owner after its owner dies.

    .venv/bin/python benchmarks/bench_takeover.py [--lease 20] [--heartbeat 5] [--trials 3] [--database-url URL]

Each trial: service instance A starts a run (concurrency 3, simulated models that
answer in 0.5 s) and, at a random moment, dies as SIGKILL would leave it (its
tasks cancelled mid-call, its lease neither renewed nor released). Instance B,
already serving with ``LLMDUEL_RESUME_RUNS`` on, takes the run over. Printed per
trial: the time from the crash to B owning the run, and how many of A's duels
B expired at take-over. The bound is lease + heartbeat (docs/reliability.md,
*Run ownership*). Default database: a new SQLite file in a temporary directory.
"""

from __future__ import annotations

import argparse
import asyncio
import random
import statistics
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

import httpx  # noqa: E402

from service.app import create_app  # noqa: E402
from service.config import Settings  # noqa: E402
from service.db import upgrade_database  # noqa: E402

KEY = "bench-takeover-key"


def make_app(url: str, lease: float, heartbeat: float, resume: bool):
    settings = Settings(
        database_url=url,
        api_key=KEY,
        resume_runs=resume,
        auto_migrate="never",
        run_lease_seconds=lease,
        run_heartbeat_seconds=heartbeat,
    ).with_database_url(url)
    return create_app(settings)


def client(app) -> httpx.AsyncClient:
    return httpx.AsyncClient(
        transport=httpx.ASGITransport(app=app), base_url="http://b", headers={"Authorization": f"Bearer {KEY}"}
    )


async def trial(url: str, lease: float, heartbeat: float, rng: random.Random) -> tuple[float, int]:
    a = make_app(url, lease, heartbeat, resume=False)
    b = make_app(url, lease, heartbeat, resume=True)
    models = [{"name": f"m{n}", "cost": 1.0, "client": {"kind": "simulated", "latency_s": 0.5}} for n in range(3)]
    body = {
        "name": "takeover",
        "models": models,
        "prompts": ["p"],
        "judge": {"kind": "simulated", "preference": [[0.5, 0.6, 0.7], [0.4, 0.5, 0.6], [0.3, 0.4, 0.5]]},
    }
    try:
        async with client(a) as api:
            cid = (await api.post("/v1/campaigns", json=body)).json()["id"]
            assert (await api.post(f"/v1/campaigns/{cid}/run", json={"concurrency": 3})).status_code == 202
        await b.state.campaigns.runs.resume_runs()  # B serves with its keeper running
        await asyncio.sleep(rng.uniform(0.5, 0.5 + 2 * heartbeat))  # A renews its lease meanwhile
        campaigns = a.state.campaigns  # SIGKILL: A's tasks stop mid-call, nothing is released
        campaigns.keeper.stop()
        for task in list(campaigns.runs._runs.values()):
            task.cancel()
        crashed = time.monotonic()
        while not b.state.campaigns.runs.run_active_here(cid):
            await asyncio.sleep(0.01)
        took = time.monotonic() - crashed
        async with client(b) as api:
            duels = (await api.get(f"/v1/campaigns/{cid}/duels", params={"status": "expired"})).json()["items"]
            await api.post(f"/v1/campaigns/{cid}/stop")
        return took, len(duels)
    finally:
        for app in (a, b):
            await app.state.campaigns.aclose()
            app.state.db.dispose()


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--lease", type=float, default=20.0)
    ap.add_argument("--heartbeat", type=float, default=5.0)
    ap.add_argument("--trials", type=int, default=3)
    ap.add_argument("--database-url")
    ap.add_argument("--seed", type=int, default=1)
    args = ap.parse_args()
    url = args.database_url or f"sqlite:///{Path(tempfile.mkdtemp()) / 'takeover.db'}"
    upgrade_database(url)
    rng = random.Random(args.seed)
    times = []
    for n in range(args.trials):
        took, expired = asyncio.run(trial(url, args.lease, args.heartbeat, rng))
        times.append(took)
        print(f"trial {n + 1}: taken over {took:.2f} s after the crash; {expired} duels of the dead owner expired")
    bound = args.lease + args.heartbeat
    print(
        f"lease {args.lease:g} s, heartbeat {args.heartbeat:g} s: take-over min {min(times):.2f} s, "
        f"median {statistics.median(times):.2f} s, max {max(times):.2f} s (bound {bound:g} s)"
    )
    return 0 if max(times) <= bound + 1.0 else 1


if __name__ == "__main__":
    raise SystemExit(main())
