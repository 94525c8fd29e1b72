"""Judge spend per certificate: one judge call per duel (random order) against both orders, same seeds.

    .venv/bin/python benchmarks/bench_judge_orders.py --trials 500
    .venv/bin/python benchmarks/bench_judge_orders.py --trials 200 --instances search --tie 0.3 --flip 0.13

The judge (algorithms/judge_orders.py) ties ``--tie`` of the duels and flips ``--flip`` of its
verdicts with the order (it picks the first position there); the rest follow the instance's
preference. ``dctas-pc`` runs each campaign, its allocation told the judge's cost per duel
(2 calls with both orders, 1 with one). Printed per instance and mode: the mean judge spend per
campaign (calls x ``--call-cost``), its 95% CI, duels, errors (a wrong winner), campaigns without
a winner; then the ratio both / one of the mean spends and the paired (same seeds) 95% CI of the
per-trial difference.
"""

from __future__ import annotations

import argparse
import math
import os
import sys
import time

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from algorithms.instance import condorcet_winner  # noqa: E402
from algorithms.instances import resolve_instance  # noqa: E402
from algorithms.judge_orders import ORDERS, JudgeNoise, run_trials  # noqa: E402


def _ci(x: np.ndarray) -> float:
    return 1.96 * x.std(ddof=1) / math.sqrt(len(x)) if len(x) > 1 else 0.0


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--instances", default="synthetic:k=4,search")
    ap.add_argument("--trials", type=int, default=500)
    ap.add_argument("--delta", type=float, default=0.01)
    ap.add_argument("--tie", type=float, default=0.30)
    ap.add_argument("--flip", type=float, default=0.13)
    ap.add_argument("--first", type=float, default=1.0, help="share of position-driven verdicts for the first")
    ap.add_argument("--tie-policy", choices=["half", "drop"], default="half")
    ap.add_argument("--call-cost", type=float, default=1.0)
    ap.add_argument("--seed", type=int, default=1)
    a = ap.parse_args()
    noise = JudgeNoise(a.tie, a.flip, a.first)
    print(
        f"judge: tie {a.tie}, flip {a.flip}, first {a.first}; delta {a.delta}; tie_policy {a.tie_policy}; "
        f"{a.trials} trials per mode, seed {a.seed}",
        flush=True,
    )
    print(
        f"{'instance':<16} {'orders':<6} {'judge spend':>11} {'ci95':>8} {'duels':>9} {'errors':>6} "
        f"{'no winner':>9} {'sec':>5}",
        flush=True,
    )
    for name in a.instances.split(","):
        inst = resolve_instance(name)
        best = condorcet_winner(inst.preference)
        spend = {}
        for orders in ORDERS:
            t0 = time.perf_counter()
            runs = run_trials(
                inst.preference,
                noise,
                orders,
                a.delta,
                a.trials,
                a.seed,
                call_cost=a.call_cost,
                tie_policy=a.tie_policy,
            )
            s = np.array([r["judge_spend"] for r in runs], dtype=float)
            spend[orders] = s
            errors = sum(1 for r in runs if r["winner"] is not None and r["winner"] != best)
            none = sum(1 for r in runs if r["winner"] is None)
            duels = np.mean([r["duels"] for r in runs])
            print(
                f"{name:<16} {orders:<6} {s.mean():>11.1f} {_ci(s):>8.1f} {duels:>9.1f} {errors:>6} {none:>9} "
                f"{time.perf_counter() - t0:>5.0f}",
                flush=True,
            )
        both, one = spend["both"], spend["one"]
        diff = both - one
        print(
            f"{name:<16} both/one = {both.mean() / one.mean():.3f}; paired saving (both - one) / both = "
            f"{diff.mean() / both.mean():.3f} +- {_ci(diff) / both.mean():.3f} (95%)",
            flush=True,
        )


if __name__ == "__main__":
    main()
