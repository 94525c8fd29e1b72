"""dctas-pc's options against its default, same seeds: certificate tests and the sticky leader.

    .venv/bin/python benchmarks/bench_pc_options.py --part cost --trials 500 --tiny-trials 100
    .venv/bin/python benchmarks/bench_pc_options.py --part errors --error-trials 10000 --jobs 2

Variants: ``mixture`` (the default test), ``kk`` (Kaufmann-Koolen single term),
``stitched`` (Howard et al. polynomial stitching), ``stick=X`` (sticky leader, X nats,
with the default test). Part ``cost``: mean cost (and cost / lower bound) at delta = 0.01 and
1e-10 on synthetic k=4, k=19 and search, with the paired (same seeds) mean difference to the
first variant as a fraction of its mean cost and its 95% CI. Part ``errors``: error and "no Condorcet winner"
rates at delta = 0.1 on the hard and intransitive instances of bench_certificates.py.
"""

from __future__ import annotations

import argparse
import math
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import bench_certificates  # noqa: E402
from bench_certificates import HARD, INTRANSITIVE, simulate  # noqa: E402  (simulate: at --level)

from algorithms.instances import resolve_instance  # noqa: E402

COST_INSTANCES = ["synthetic:k=4", "synthetic:k=19", "search"]


def variant_params(v: str) -> dict:
    if v.startswith("stick="):
        return {"stick": float(v.split("=", 1)[1])}
    return {"threshold": v}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--part", choices=["cost", "errors"], required=True)
    ap.add_argument("--variants", default="mixture,kk,stitched,stick=1,stick=3")
    ap.add_argument("--trials", type=int, default=500, help="trials per cell at delta = 0.01")
    ap.add_argument("--tiny-trials", type=int, default=100, help="trials per cell at delta = 1e-10 (0: skip)")
    ap.add_argument("--delta", type=float, default=0.01, help="the first delta of part cost (default 0.01)")
    ap.add_argument("--error-trials", type=int, default=10_000)
    ap.add_argument("--instances", default=None, help="comma-separated (part errors: hard,intransitive)")
    ap.add_argument("--jobs", type=int, default=1)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument(
        "--level",
        choices=["auto", *bench_certificates.certificates.PC_LEVELS],
        default="auto",
        help="dctas-pc's certificate level where a part does not set one (default auto: the product level)",
    )
    a = ap.parse_args()
    bench_certificates.LEVEL = a.level
    variants = a.variants.split(",")
    if a.part == "cost":
        names = a.instances.split(",") if a.instances else COST_INSTANCES
        print(
            f"{'instance':<16} {'delta':>7} {'trials':>6} {'variant':<10} {'mean cost':>10} {'ci95':>8} "
            f"{'/LB':>6} {'vs first':>10} {'paired':>8} {'+-95%':>6} {'errors':>6} {'sec':>5}",
            flush=True,
        )
        for delta, n in ((a.delta, a.trials), (1e-10, a.tiny_trials)):
            if n <= 0:
                continue
            for name in names:
                inst = {"hard": HARD, "intransitive": INTRANSITIVE}.get(name) or resolve_instance(name)
                ref = None
                for v in variants:
                    t0 = time.perf_counter()
                    r = simulate(inst, "dctas-pc", delta, n, seed=a.seed, jobs=a.jobs, **variant_params(v))
                    s = r.summary()
                    ref = r.costs if ref is None else ref
                    # paired (same seeds) difference to the first variant, with a 95% normal CI
                    diff = r.costs - ref
                    half = 1.96 * diff.std(ddof=1) / math.sqrt(n) if n > 1 else 0.0
                    print(
                        f"{name:<16} {delta:>7.0e} {n:>6} {v:<10} {s['mean_cost']:>10.5g} {s['ci95']:>8.3g} "
                        f"{s['cost_over_lower_bound']:>6.2f} {s['mean_cost'] / ref.mean():>10.3f} "
                        f"{diff.mean() / ref.mean():>+8.3f} {half / ref.mean():>6.3f} {s['errors']:>6} "
                        f"{time.perf_counter() - t0:>5.0f}",
                        flush=True,
                    )
    else:
        insts = {"hard": HARD, "intransitive": INTRANSITIVE}
        names = a.instances.split(",") if a.instances else list(insts)
        print(
            f"{'instance':<13} {'variant':<10} {'trials':>6} {'errors':>6} {'rate':>7} {'no-CW':>7} "
            f"{'mean cost':>10} {'sec':>5}",
            flush=True,
        )
        for name in names:
            for v in variants:
                t0 = time.perf_counter()
                r = simulate(
                    insts[name], "dctas-pc", 0.1, a.error_trials, seed=a.seed, jobs=a.jobs, **variant_params(v)
                )
                s = r.summary()
                print(
                    f"{name:<13} {v:<10} {s['trials']:>6} {s['errors']:>6} {s['error_rate']:>7.4f} "
                    f"{s['no_condorcet_winner_rate']:>7.4f} {s['mean_cost']:>10.5g} "
                    f"{time.perf_counter() - t0:>5.0f}",
                    flush=True,
                )


if __name__ == "__main__":
    main()
