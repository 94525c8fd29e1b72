"""The top cycle shown beside a dctas-pc verdict: the certified part against the plug-in estimate.

    .venv/bin/python benchmarks/bench_top_cycle.py --runs 200 --delta 0.1

Instance (issue 22's kind): a 3-cycle at ``--cycle`` (default 0.6) among arms 0, 1, 2, and two
close arms 3, 4 that each lose to every cycle arm at ``--close`` (default 0.55) and tie each
other. The true top cycle is {0, 1, 2}. Each run plays dctas-pc (with replacement, unit costs)
until it stops or ``--cap`` duels, then compares with the truth: the certified top set
(``algorithms.certificates.certified_top``, what the pages show) must lie inside the top cycle
except with probability at most ``s (L - s) delta / (L - 1)`` = 1.5 delta here (docs/algorithms.md);
the plug-in top cycle of the estimate (``summary()["top_cycle"]``, no uncertainty) is printed
beside it.
"""

from __future__ import annotations

import argparse
import os
import sys
import time

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from algorithms import make_policy  # noqa: E402
from algorithms.certificates import certified_top  # noqa: E402


def instance(cycle: float, close: float) -> np.ndarray:
    P = np.full((5, 5), 0.5)
    for a, b in ((0, 1), (1, 2), (2, 0)):
        P[a, b], P[b, a] = cycle, 1 - cycle
    for t in range(3):
        for v in (3, 4):
            P[t, v], P[v, t] = close, 1 - close
    return P


def one_run(P: np.ndarray, delta: float, seed: int, cap: int) -> tuple[set[int], set[int], bool, int]:
    rng = np.random.default_rng(seed)
    policy = make_policy("dctas-pc", costs=[1.0] * len(P), delta=delta)
    while not policy.should_stop() and policy.t < cap:
        i, j = policy.next_pair([])
        policy.record(i, j, float(rng.random() < P[i, j]))
    s = policy.summary()
    return set(certified_top(s["certificates"], len(P))), set(s["top_cycle"]), policy.stopped, policy.t


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=200)
    ap.add_argument("--delta", type=float, default=0.1)
    ap.add_argument("--cycle", type=float, default=0.6)
    ap.add_argument("--close", type=float, default=0.55)
    ap.add_argument("--cap", type=int, default=20_000)
    args = ap.parse_args()
    P = instance(args.cycle, args.close)
    truth = {0, 1, 2}
    t0 = time.time()
    outside = plugin_wrong = stopped = full = 0
    duels = []
    for seed in range(args.runs):
        top, plugin, stop, t = one_run(P, args.delta, seed, args.cap)
        outside += not top <= truth
        full += top == truth
        plugin_wrong += plugin != truth
        stopped += stop
        duels.append(t)
    n = args.runs
    print(f"{n} runs, delta {args.delta}, cycle {args.cycle}, close {args.close} ({time.time() - t0:.0f} s)")
    print(f"  stopped (no Condorcet winner) {stopped}/{n}; median duels {np.median(duels):.0f}")
    print(
        f"  certified top set outside the top cycle: {outside}/{n} = {outside / n:.1%} (bound {1.5 * args.delta:.0%})"
    )
    print(f"  certified top set = the whole top cycle: {full}/{n} = {full / n:.1%}")
    print(f"  plug-in top cycle wrong:                 {plugin_wrong}/{n} = {plugin_wrong / n:.1%}")


if __name__ == "__main__":
    main()
