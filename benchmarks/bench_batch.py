"""Batch campaigns against call-by-call campaigns, same seeds side by side; and rounds in the simulator.

    .venv/bin/python benchmarks/bench_batch.py [--seeds 5] [--sim-trials 200] [--json]

Part 1 (the service, in process, on a temporary SQLite file, against the fake provider's batch
routes served on a loopback port): for each seed, the same campaign (4 models of qualities 1, 2,
3, 5; an LLM judge asking both orders; 40 prompts; answer and verdict reuse; delta 0.05) run once
call by call and once as a batch campaign (first round 4, doubling), list and batch prices 2:1
(2 and 1 USD per million tokens). Printed per seed: the winner of each, the spend of each, the
ratio, the batch campaign's rounds and duels, and the bound ``ceil(log2(duels)) + 2``.

Part 2 (the simulator, ``algorithms.rounds.simulate_rounds``): dctas-pc on a close 3-model
instance at delta 0.25, in rounds of 1 (one at a time), 4 and 16, the error rate with a one-sided
exact binomial test of H0 "error rate > delta", and the rounds against their bound.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import math
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "tests"))

import httpx  # noqa: E402
import numpy as np  # noqa: E402
from scipy.stats import binomtest  # noqa: E402

from algorithms.instance import Instance  # noqa: E402
from algorithms.rounds import simulate_rounds  # noqa: E402
from service.app import create_app  # noqa: E402
from service.config import Settings  # noqa: E402
from service.db import upgrade_database  # noqa: E402
from service.fake_provider import create_fake_provider_app  # noqa: E402

KEY = "bench-batch-key"
LIST = {"input_cost_per_token": 2e-6, "output_cost_per_token": 2e-6}
HALF = {"input_cost_per_token_batches": 1e-6, "output_cost_per_token_batches": 1e-6}


def campaign(base: str, seed: int, batch: bool) -> dict:
    models = [f"s{seed}-m{q}-q{q}" for q in (1, 2, 3, 5)]
    judge = f"s{seed}-judge"
    client = {"kind": "openai", "base_url": base, "params": {"max_tokens": 64}}
    body = {
        "name": f"bench {seed} {'batch' if batch else 'calls'}",
        "models": [{"name": m, "client": {**client, "model": m}} for m in models],
        "prompts": [f"Question {seed}.{n}?" for n in range(40)],
        "judge": {
            "kind": "llm",
            "orders": "both",
            "client": {
                **client,
                "model": judge,
                "price": {"input_per_1m": 2, "output_per_1m": 2},
                "batch_price": {"input_per_1m": 1, "output_per_1m": 1},
            },
        },
        "price_map": {m: {**LIST, **HALF} for m in models},
        "expected_output_tokens": 20,
        "delta": 0.05,
        "seed": seed,
    }
    if batch:
        body["batch"] = {"round_size": 4, "poll_seconds": 0.02}
    return body


async def run_pair(url: str, base: str, seed: int) -> dict:
    settings = Settings(database_url=url, api_key=KEY, resume_runs=False, auto_migrate="never")
    app = create_app(settings.with_database_url(url))
    out: dict = {"seed": seed}
    try:
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(
            transport=transport, base_url="http://b", headers={"Authorization": f"Bearer {KEY}"}
        ) as api:
            ids = {}
            for mode in ("calls", "batch"):
                r = await api.post("/v1/campaigns", json=campaign(base, seed, mode == "batch"))
                r.raise_for_status()
                ids[mode] = r.json()["id"]
                assert (await api.post(f"/v1/campaigns/{ids[mode]}/run", json={})).status_code == 202
            runs = app.state.campaigns.runs
            deadline = time.monotonic() + 300
            while any(runs.run_active_here(c) for c in ids.values()):
                assert time.monotonic() < deadline, "a campaign did not end in 300 s"
                await asyncio.sleep(0.1)
            for mode, cid in ids.items():
                v = (await api.get(f"/v1/campaigns/{cid}")).json()
                out[mode] = {
                    "status": v["status"],
                    "winner": v["winner_index"],
                    "spend": v["spend"],
                    "duels": v["duels_created"],
                    "rounds": (v["batch"] or {}).get("rounds"),
                }
    finally:
        await app.state.campaigns.aclose()
        app.state.db.dispose()
    b = out["batch"]
    out["ratio"] = b["spend"] / out["calls"]["spend"] if out["calls"]["spend"] else None
    out["rounds_bound"] = math.ceil(math.log2(max(2, b["duels"]))) + 2
    return out


def part_one(seeds: int) -> dict:
    from test_faults import ThreadedServer  # the loopback uvicorn the tests use

    provider = ThreadedServer(create_fake_provider_app(marker_key="bench-batch"))
    rows = []
    try:
        with tempfile.TemporaryDirectory() as tmp:
            url = f"sqlite:///{Path(tmp) / 'bench.db'}"
            upgrade_database(url)
            for seed in range(1, seeds + 1):
                rows.append(asyncio.run(run_pair(url, provider.url + "/v1", seed)))
                r = rows[-1]
                print(
                    f"seed {seed}: winners {r['calls']['winner']} / {r['batch']['winner']}, spend "
                    f"{r['calls']['spend']:.6f} / {r['batch']['spend']:.6f} USD (ratio {r['ratio']:.3f}), "
                    f"batch: {r['batch']['rounds']} rounds, {r['batch']['duels']} duels "
                    f"(bound {r['rounds_bound']}); call by call: {r['calls']['duels']} duels",
                    file=sys.stderr,
                )
    finally:
        provider.stop()
    calls = sum(r["calls"]["spend"] for r in rows)
    batch = sum(r["batch"]["spend"] for r in rows)
    return {
        "rows": rows,
        "spend_ratio_of_totals": batch / calls,
        "same_winner": all(r["calls"]["winner"] == r["batch"]["winner"] for r in rows),
        "rounds_within_bound": all(r["batch"]["rounds"] <= r["rounds_bound"] for r in rows),
    }


def part_two(trials: int) -> list[dict]:
    inst = Instance(
        names=["a", "b", "c"], costs=[1, 1, 1], preference=[[0.5, 0.62, 0.65], [0.38, 0.5, 0.58], [0.35, 0.42, 0.5]]
    )
    delta, out = 0.25, []
    for size in (1, 4, 16):
        cfg = {"round_size": size, "growth": 1.0 if size == 1 else 2.0, "max_round_size": 1 if size == 1 else 4096}
        t0 = time.perf_counter()
        res = simulate_rounds(inst, "dctas-pc", delta, trials, cfg, seed=7)
        errors = int((res.recommended != 0).sum())
        row = {
            "round_size": size,
            "trials": trials,
            "errors": errors,
            "error_rate": errors / trials,
            "p_value_error_above_delta": binomtest(errors, trials, delta, alternative="less").pvalue,
            "mean_planned": float(res.planned.mean()),
            "mean_recorded": float(res.recorded.mean()),
            "mean_rounds": float(res.rounds.mean()),
            "rounds_within_bound": bool(np.all(res.rounds <= np.ceil(np.log2(np.maximum(res.planned, 2))) + 2))
            if size > 1
            else None,
            "seconds": round(time.perf_counter() - t0, 1),
        }
        out.append(row)
        print(
            f"rounds of {size:>2}: error {errors}/{trials} (p = {row['p_value_error_above_delta']:.2g} for H0 "
            f"error > {delta}), {row['mean_planned']:.1f} duels planned, {row['mean_recorded']:.1f} recorded, "
            f"{row['mean_rounds']:.2f} rounds",
            file=sys.stderr,
        )
    return out


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--seeds", type=int, default=5)
    p.add_argument("--sim-trials", type=int, default=200)
    p.add_argument("--json", action="store_true")
    args = p.parse_args()
    rep = {"service": part_one(args.seeds), "simulator": part_two(args.sim_trials)}
    s = rep["service"]
    print(
        f"spend ratio batch / call by call (totals over {args.seeds} seeds): {s['spend_ratio_of_totals']:.3f}; "
        f"same winner: {s['same_winner']}; rounds within ceil(log2(duels)) + 2: {s['rounds_within_bound']}",
        file=sys.stderr,
    )
    if args.json:
        print(json.dumps(rep, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
