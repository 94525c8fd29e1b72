"""dctas-pc (the default) against the paper's dctas: mean cost, cost / lower bound, errors.

    .venv/bin/python benchmarks/bench_certificates.py --trials 500 --jobs 2
    .venv/bin/python benchmarks/bench_certificates.py --quick          # 100 trials, delta 0.01 only

Part 1: at delta = 0.01 and 1e-10 on synthetic k=4, k=19, search, image, text and
genai-image, the mean cost of dctas-pc and dctas (same seeds), the ratio, cost / lower
bound and the error counts. Target: dctas-pc <= 0.3 x dctas at delta = 0.01 everywhere.
Part 2: error rates of dctas-pc at delta = 0.1 on a hard and an intransitive instance
(--error-trials, default 10,000). Part 3: cost / lower bound of dctas-pc on k = 4 as delta shrinks.
"""

from __future__ import annotations

import argparse
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from algorithms import Instance  # noqa: E402
from algorithms.instances import resolve_instance  # noqa: E402
from algorithms.simulator import simulate  # noqa: E402

INSTANCES = ["synthetic:k=4", "synthetic:k=19", "search", "image", "text", "genai-image"]
HARD = Instance(
    ["a", "b", "c", "d"],
    [1.0, 2.0, 1.0, 3.0],
    [[0.5, 0.52, 0.55, 0.53], [0.48, 0.5, 0.54, 0.52], [0.45, 0.46, 0.5, 0.55], [0.47, 0.48, 0.45, 0.5]],
)
INTRANSITIVE = Instance(
    ["w", "x", "y", "z"],
    [2.0, 1.0, 0.5, 3.0],
    [[0.5, 0.7, 0.7, 0.72], [0.3, 0.5, 0.7, 0.3], [0.3, 0.3, 0.5, 0.7], [0.28, 0.7, 0.3, 0.5]],
)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--trials", type=int, default=500)
    ap.add_argument("--tiny-trials", type=int, default=200, help="trials at delta = 1e-10")
    ap.add_argument("--error-trials", type=int, default=10_000)
    ap.add_argument("--jobs", type=int, default=1)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--quick", action="store_true")
    a = ap.parse_args()
    deltas = [(0.01, a.trials)] if a.quick else [(0.01, a.trials), (1e-10, a.tiny_trials)]
    if a.quick:
        a.trials, a.error_trials = 100, 1000
        deltas = [(0.01, 100)]
    print(
        f"{'instance':<16} {'delta':>7} {'trials':>6} {'dctas-pc':>12} {'dctas':>12} {'ratio':>6} "
        f"{'pc/LB':>6} {'dctas/LB':>8} {'err pc':>6} {'err dctas':>9} {'sec':>5}",
        flush=True,
    )
    for delta, n in deltas:
        for name in INSTANCES:
            inst = resolve_instance(name)
            t0 = time.perf_counter()
            pc = simulate(inst, "dctas-pc", delta, n, seed=a.seed, jobs=a.jobs).summary()
            d = simulate(inst, "dctas", delta, n, seed=a.seed, jobs=a.jobs).summary()
            print(
                f"{name:<16} {delta:>7.0e} {n:>6} {pc['mean_cost']:>12.5g} {d['mean_cost']:>12.5g} "
                f"{pc['mean_cost'] / d['mean_cost']:>6.3f} {pc['cost_over_lower_bound']:>6.2f} "
                f"{d['cost_over_lower_bound']:>8.2f} {pc['errors']:>6} {d['errors']:>9} "
                f"{time.perf_counter() - t0:>5.0f}",
                flush=True,
            )
    print()
    for label, inst in (("hard", HARD), ("intransitive", INTRANSITIVE)):
        r = simulate(inst, "dctas-pc", 0.1, a.error_trials, seed=a.seed, jobs=a.jobs).summary()
        print(
            f"error rate of dctas-pc at delta=0.1 on {label}: {r['errors']} / {r['trials']} = "
            f"{r['error_rate']:.4f}; no-CW verdicts {r['no_condorcet_winner_rate']:.4f}",
            flush=True,
        )
    print()
    inst = resolve_instance("synthetic:k=4")
    for delta in (1e-2, 1e-4, 1e-8, 1e-16, 1e-32):
        r = simulate(inst, "dctas-pc", delta, 200 if not a.quick else 50, seed=a.seed, jobs=a.jobs).summary()
        print(
            f"synthetic:k=4 dctas-pc delta={delta:.0e}: cost / lower bound = {r['cost_over_lower_bound']:.3f}",
            flush=True,
        )


if __name__ == "__main__":
    main()
