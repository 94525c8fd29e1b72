"""Simulator speed: duel steps per second per core, against the plain step-wise loop.

    .venv/bin/python benchmarks/bench_simulator.py            # L = 3, 8, 20 and the synthetic experiment
    .venv/bin/python benchmarks/bench_simulator.py --quick    # smaller runs
    .venv/bin/python benchmarks/bench_simulator.py --algorithm dctas-pc --L 8 --no-experiment

Prints medians over repeats. Target: >= 1,000,000 steps per second per core on L = 8
for every algorithm (DCTAS and the default dctas-pc).
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from algorithms import Instance, make_policy, synthetic_instance  # noqa: E402
from algorithms.simulator import simulate  # noqa: E402

CPU_TIME = False  # --cpu-time: steps per CPU second of this process (steadier on a shared machine)


def bt_instance(L: int, seed: int = 3) -> Instance:
    """A Bradley-Terry instance with a clear Condorcet winner and costs spread over 0.5..5."""
    rng = np.random.default_rng(seed)
    r = np.sort(rng.normal(0, 1, L))[::-1]
    r[0] += 0.3
    P = 1 / (1 + np.exp(-(r[:, None] - r[None, :])))
    return Instance([f"m{i}" for i in range(L)], rng.uniform(0.5, 5, L), P)


def fast_rate(inst: Instance, algorithm: str, delta: float, trials: int, repeats: int) -> float:
    simulate(inst, algorithm, delta, 1, seed=0)  # compile / load the cache
    rates = []
    clock = time.process_time if CPU_TIME else time.perf_counter
    for r in range(repeats):
        t0 = clock()
        res = simulate(inst, algorithm, delta, trials, seed=r + 1, jobs=1)
        rates.append(res.pulls.sum() / (clock() - t0))
    return statistics.median(rates)


def stepwise_rate(inst: Instance, algorithm: str, delta: float, steps: int, repeats: int) -> float:
    rates = []
    P = inst.preference
    for r in range(repeats):
        rng = np.random.default_rng(r)
        pol = make_policy(algorithm, inst.costs, delta)
        t0 = time.perf_counter()
        n = 0
        while n < steps and not pol.stopped:
            i, j = pol.next_pair()
            pol.record(i, j, float(rng.random() < P[i, j]))
            n += 1
        rates.append(n / (time.perf_counter() - t0))
    return statistics.median(rates)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--jobs", type=int, default=os.cpu_count() or 1)
    ap.add_argument("--algorithm", action="append", help="dctas (default) and/or dctas-pc; repeatable")
    ap.add_argument("--L", type=int, action="append", help="number of arms: 3, 8 and/or 20 (default all)")
    ap.add_argument("--repeats", type=int, default=None, help="repeats per figure (default 5, 3 with --quick)")
    ap.add_argument("--no-stepwise", action="store_true", help="skip the step-wise loop")
    ap.add_argument("--no-experiment", action="store_true", help="skip the full synthetic experiment")
    ap.add_argument("--cpu-time", action="store_true", help="rate per CPU second instead of wall-clock second")
    ap.add_argument("--trials", type=int, default=None, help="trials per fast-simulator run (default by L)")
    args = ap.parse_args()
    global CPU_TIME
    CPU_TIME = args.cpu_time
    repeats = args.repeats or (3 if args.quick else 5)
    sizes = {3: 200, 8: 20, 20: 2}
    print(f"{'algorithm':<9} {'L':>3} {'fast steps/s':>14} {'step-wise steps/s':>18} {'ratio':>8}")
    for algorithm in args.algorithm or ["dctas"]:
        for L in args.L or sorted(sizes):
            # dctas-pc stops after ~200 duels at L = 8 (DCTAS ~2,900): 50x the trials, so the
            # per-call set-up of simulate() does not dominate the rate
            trials = args.trials or sizes.get(L, 2) * (50 if algorithm == "dctas-pc" else 1)
            inst = bt_instance(L)
            fast = fast_rate(inst, algorithm, 0.01, trials if not args.quick else max(1, trials // 4), repeats)
            if args.no_stepwise:
                print(f"{algorithm:<9} {L:>3} {fast:>14,.0f}", flush=True)
                continue
            slow = stepwise_rate(inst, algorithm, 0.01, 3000 if not args.quick else 1000, repeats)
            print(f"{algorithm:<9} {L:>3} {fast:>14,.0f} {slow:>18,.0f} {fast / slow:>8.0f}", flush=True)
    if args.no_experiment:
        return
    # the paper's full synthetic experiment: 19 values of k, 5 algorithms, 500 trials, delta = 0.01
    trials = 100 if args.quick else 500
    t0 = time.perf_counter()
    steps = 0
    for k in range(1, 20):
        for alg in ("dctas", "tas", "crr", "dctac", "dpca"):
            res = simulate(synthetic_instance(k), alg, 0.01, trials, seed=k, jobs=args.jobs)
            steps += int(res.pulls.sum())
    dt = time.perf_counter() - t0
    print(
        f"synthetic experiment (19 k x 5 algorithms x {trials} trials, delta=0.01, jobs={args.jobs}): "
        f"{dt:.1f} s, {steps:,} steps"
    )


if __name__ == "__main__":
    main()
