"""Coverage of the ranking's 95% intervals for the winner's true win rate against the field,
at the campaign's own stopping time (dctas-pc on genai-image, delta 0.05).

Each campaign runs the step-wise dctas-pc policy on the instance's preference
matrix (Bernoulli duels) until its certificate stops it; the ranking's intervals
are computed from its final counts, as the export does, with the percentile
bootstrap (descriptive) and with the anytime-valid intervals
(:func:`algorithms.ranking.anytime_field_intervals`).

Run: ``PYTHONPATH=. .venv/bin/python benchmarks/bench_ranking.py [--campaigns 200] [--instance genai-image]``
"""

from __future__ import annotations

import argparse
import time

import numpy as np

from algorithms.instances import resolve_instance
from algorithms.policies import make_policy
from algorithms.ranking import anytime_field_intervals, bootstrap_ranking


def stopped_campaign(P: np.ndarray, costs, delta: float, seed: int, cap: int = 200_000):
    """One dctas-pc campaign on Bernoulli duels: (winner, wins matrix, counts matrix)."""
    rng = np.random.default_rng(seed)
    pol = make_policy("dctas-pc", list(costs), delta)
    t = 0
    while not pol.should_stop() and t < cap:
        i, j = pol.next_pair()
        pol.record(i, j, float(rng.random() < P[i, j]))
        t += 1
    return pol.recommendation(), pol.wins_matrix(), pol.counts_matrix()


def bootstrap_from_counts(W: np.ndarray, N: np.ndarray, seed: int, reps: int = 1000):
    L = W.shape[0]
    a, b, s, w = [], [], [], []
    for i in range(L):
        for j in range(i + 1, L):
            a += [i, i]
            b += [j, j]
            s += [1.0, 0.0]
            w += [int(round(W[i, j])), int(round(N[i, j] - W[i, j]))]
    return bootstrap_ranking(a, b, s, L, weights=w, reps=reps, seed=seed)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--campaigns", type=int, default=200)
    ap.add_argument("--instance", default="genai-image")
    ap.add_argument("--delta", type=float, default=0.05)
    a = ap.parse_args()
    inst = resolve_instance(a.instance)
    P = np.asarray(inst.preference)
    L = P.shape[0]
    t0 = time.perf_counter()
    hit = {"bootstrap": 0, "anytime": 0}
    width = {"bootstrap": [], "anytime": []}
    for c in range(a.campaigns):
        win, W, N = stopped_campaign(P, inst.costs, a.delta, seed=c)
        truth = (P[win].sum() - 0.5) / (L - 1)
        r = bootstrap_from_counts(W, N, seed=c)
        lo, hi = anytime_field_intervals(W, N, 0.95)
        for name, (low, high) in (("bootstrap", (r.low[win], r.high[win])), ("anytime", (lo[win], hi[win]))):
            hit[name] += int(low <= truth <= high)
            width[name].append(high - low)
    print(f"{a.instance}, dctas-pc, delta {a.delta}, {a.campaigns} campaigns; 95% intervals of the winner")
    for name in ("bootstrap", "anytime"):
        print(f"  {name:<9} coverage {100 * hit[name] / a.campaigns:5.1f}%  median width {np.median(width[name]):.3f}")
    print(f"({time.perf_counter() - t0:.0f} s)")


if __name__ == "__main__":
    main()
