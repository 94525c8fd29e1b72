"""Judge spend per certificate: both orders, one order (random) and ``orders: auto``, same seeds.

    .venv/bin/python benchmarks/bench_judge_orders.py --trials 500
    .venv/bin/python benchmarks/bench_judge_orders.py --trials 200 --instances search --tie 0.3 --flip 0.13
    .venv/bin/python benchmarks/bench_judge_orders.py --trials 300 --flip 0.13,0.25,0.35,0.4,0.5 --json

The judge (algorithms/judge_orders.py) ties ``--tie`` of the duels and flips ``--flip`` of its
verdicts with the order (it picks the first position there); the rest follow the instance's
preference. ``dctas-pc`` runs each campaign, its allocation told the judge's cost per duel
(2 calls with both orders and auto, 1 with one). Trial ``n`` draws the ``k``-th duel of a pair
from the same stream in every mode. Printed per instance, flip rate and mode: the mean judge
spend per campaign (calls x ``--call-cost``), its 95% CI, duels, the share of duels judged in
one order, errors (a wrong winner), campaigns without a winner; then both / one and auto / the
better fixed mode with the paired (same seeds) 95% CI. ``--json``: the same figures as one
JSON object.
"""

from __future__ import annotations

import argparse
import json
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


def _row(runs: list[dict], best: int | None, call_cost: float) -> dict:
    s = np.array([r["judge_spend"] for r in runs], dtype=float)
    duels = np.array([r["duels"] for r in runs], dtype=float)
    one = np.array([r["modes"].get("one", 0) for r in runs], dtype=float)
    return {
        "spend": s,
        "judge_spend": float(s.mean()),
        "ci95": float(_ci(s)),
        "duels": float(duels.mean()),
        "one_order_share": float(one.sum() / max(duels.sum(), 1.0)),
        "errors": sum(1 for r in runs if r["winner"] is not None and r["winner"] != best),
        "no_winner": sum(1 for r in runs if r["winner"] is None),
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--instances", default="synthetic:k=4")
    ap.add_argument("--trials", type=int, default=500)
    ap.add_argument("--delta", type=float, default=0.01)
    ap.add_argument("--tie", type=float, default=0.30)
    ap.add_argument("--flip", default="0.13", help="flip rates, comma-separated")
    ap.add_argument("--first", type=float, default=1.0, help="share of position-driven verdicts for the first")
    ap.add_argument("--orders", default=",".join(ORDERS), help="modes, comma-separated (both, one, auto)")
    ap.add_argument("--tie-policy", choices=["half", "drop"], default="half")
    ap.add_argument("--call-cost", type=float, default=1.0)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--json", action="store_true", help="print one JSON object instead of the table")
    a = ap.parse_args()
    flips = [float(x) for x in a.flip.split(",")]
    modes = [m for m in a.orders.split(",") if m]
    bad = [m for m in modes if m not in ORDERS]
    if bad:
        ap.error(f"--orders: unknown mode {bad[0]!r} (choose from {', '.join(ORDERS)})")
    say = (lambda *x, **k: None) if a.json else print
    say(
        f"judge: tie {a.tie}, first {a.first}; delta {a.delta}; tie_policy {a.tie_policy}; "
        f"{a.trials} trials per mode, seed {a.seed}",
        flush=True,
    )
    say(
        f"{'instance':<16} {'flip':>5} {'orders':<6} {'judge spend':>11} {'ci95':>8} {'duels':>9} {'one':>5} "
        f"{'errors':>6} {'no winner':>9} {'sec':>5}",
        flush=True,
    )
    out: dict = {"tie": a.tie, "first": a.first, "delta": a.delta, "trials": a.trials, "seed": a.seed, "runs": []}
    for name in a.instances.split(","):
        inst = resolve_instance(name)
        best = condorcet_winner(inst.preference)
        for flip in flips:
            noise = JudgeNoise(a.tie, flip, a.first)
            rows = {}
            for orders in modes:
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
                r = rows[orders] = _row(runs, best, a.call_cost)
                say(
                    f"{name:<16} {flip:>5.2f} {orders:<6} {r['judge_spend']:>11.1f} {r['ci95']:>8.1f} "
                    f"{r['duels']:>9.1f} {r['one_order_share']:>5.2f} {r['errors']:>6} {r['no_winner']:>9} "
                    f"{time.perf_counter() - t0:>5.0f}",
                    flush=True,
                )
            entry: dict = {
                "instance": name,
                "flip": flip,
                "modes": {m: {k: v for k, v in r.items() if k != "spend"} for m, r in rows.items()},
            }
            if "both" in rows and "one" in rows:
                both, one = rows["both"]["spend"], rows["one"]["spend"]
                entry["both_over_one"] = float(both.mean() / one.mean())
                say(f"{name:<16} {flip:>5.2f} both/one = {entry['both_over_one']:.3f}", flush=True)
                if "auto" in rows:
                    fixed = "one" if one.mean() < both.mean() else "both"
                    ref = rows[fixed]["spend"]
                    diff = rows["auto"]["spend"] - ref
                    entry["better_fixed"] = fixed
                    entry["auto_over_better_fixed"] = float(rows["auto"]["spend"].mean() / ref.mean())
                    entry["auto_over_better_fixed_ci95"] = float(_ci(diff) / ref.mean())
                    say(
                        f"{name:<16} {flip:>5.2f} auto/{fixed} = {entry['auto_over_better_fixed']:.3f} +- "
                        f"{entry['auto_over_better_fixed_ci95']:.3f} (95%, paired)",
                        flush=True,
                    )
            out["runs"].append(entry)
    if a.json:
        print(json.dumps(out, indent=1))


if __name__ == "__main__":
    main()
