"""Statistical claims at scale: error rate <= delta and cost against the lower bound.

    .venv/bin/python benchmarks/bench_statistics.py [--trials 2000] [--jobs 2]

For each instance and algorithm: trials, errors, error rate with its one-sided
99.9% Clopper-Pearson upper bound, mean cost, cost / lower bound.
"""

from __future__ import annotations

import argparse
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from scipy.stats import beta as beta_dist  # noqa: E402

from algorithms import ALGORITHMS, Instance, synthetic_instance  # noqa: E402
from algorithms.simulator import simulate  # noqa: E402

INSTANCES = {
    "hard (gaps 0.05)": Instance(
        ["a", "b", "c"], [1.0, 1.0, 1.0], [[0.5, 0.55, 0.56], [0.45, 0.5, 0.52], [0.44, 0.48, 0.5]]
    ),
    "cycle (intransitive)": Instance(
        ["w", "x", "y", "z"],
        [2.0, 1.0, 0.5, 3.0],
        [[0.5, 0.7, 0.7, 0.72], [0.3, 0.5, 0.7, 0.3], [0.3, 0.3, 0.5, 0.7], [0.28, 0.7, 0.3, 0.5]],
    ),
    "synthetic k=10": synthetic_instance(10),
}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--trials", type=int, default=2000)
    ap.add_argument("--delta", type=float, default=0.2)
    ap.add_argument("--jobs", type=int, default=os.cpu_count() or 1)
    args = ap.parse_args()
    print(f"delta = {args.delta}, trials = {args.trials}, seed = 1")
    print(
        f"{'instance':<22} {'alg':<6} {'errors':>7} {'rate':>7} {'upper99.9':>9} {'mean cost':>11} {'cost/LB':>8} {'s':>6}"
    )
    for name, inst in INSTANCES.items():
        for alg in ALGORITHMS:
            t0 = time.perf_counter()
            res = simulate(inst, alg, args.delta, args.trials, seed=1, jobs=args.jobs, max_steps=5_000_000)
            s = res.summary()
            k = int((res.errors & res.stopped).sum())
            upper = float(beta_dist.ppf(0.999, k + 1, args.trials - k)) if k < args.trials else 1.0
            print(
                f"{name:<22} {alg:<6} {k:>7} {k / args.trials:>7.4f} {upper:>9.4f} {s['mean_cost']:>11.1f} "
                f"{s['cost_over_lower_bound']:>8.2f} {time.perf_counter() - t0:>6.1f}",
                flush=True,
            )


if __name__ == "__main__":
    main()
