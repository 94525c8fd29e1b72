"""The certified leaderboard (``goal: top_k`` / ``ranking``) against uniform sampling, same seeds.

For each instance and goal, ``--trials`` campaigns of each sampling
(:mod:`algorithms.leaderboard_sim`): ``adaptive`` (dctas-pc with the goal), ``uniform`` (every pair
in turn, stopped by the same certificate), ``uniform-ci`` (every pair in turn until each pair's 95%
Wald interval separates it from 1/2 as the goal needs). Campaign ``t`` of every sampling uses seed
``t``. Reports the mean cost (sum of ``c_i + c_j`` over the duels), its ratio to ``uniform``'s, the
errors (a reported order or top set the instance contradicts) and how many campaigns reached the
certificate before ``--cap`` duels.

Instances: ``genai-image`` (6 models), ``genai-image-ties4`` (4 models, a third of duels tied),
``near-ties`` (4 models: an exact tie at the top with 40% tied duels, a near-tie at 0.52 and an exact tie
below, ``NEAR_TIES``).

Run: ``PYTHONPATH=. .venv/bin/python benchmarks/bench_leaderboard.py [--trials 40] [--delta 0.05] [--json]``
"""

from __future__ import annotations

import argparse
import json
import time

import numpy as np

from algorithms.instances import resolve_instance
from algorithms.leaderboard_sim import SAMPLINGS, goal_campaign, top_k_is_wrong

NEAR_TIES = {
    "preference": [[0.5, 0.5, 0.65, 0.8], [0.5, 0.5, 0.52, 0.7], [0.35, 0.48, 0.5, 0.5], [0.2, 0.3, 0.5, 0.5]],
    "ties": [[0, 0.4, 0, 0], [0.4, 0, 0, 0], [0, 0, 0, 0.3], [0, 0, 0.3, 0]],
    "costs": [1.0, 2.0, 3.0, 4.0],
}
CASES = [
    ("genai-image", "ranking", None),
    ("genai-image", "top_k", 1),
    ("genai-image", "top_k", 3),
    ("genai-image-ties4", "ranking", None),
    ("genai-image-ties4", "top_k", 2),
    ("near-ties", "ranking", None),
    ("near-ties", "top_k", 2),
]


def load(name: str):
    if name == "near-ties":
        return (np.array(NEAR_TIES["preference"]), np.array(NEAR_TIES["costs"]), np.array(NEAR_TIES["ties"]))
    inst = resolve_instance(name, require_condorcet=False)
    return np.asarray(inst.preference, dtype=float), np.asarray(inst.costs, dtype=float), inst.ties


def run_case(name: str, goal: str, k: int | None, trials: int, delta: float, cap: int) -> dict:
    P, costs, ties = load(name)
    out: dict = {"instance": name, "goal": goal, "k": k, "delta": delta, "trials": trials, "cap": cap}
    for sampling in SAMPLINGS:
        runs = [goal_campaign(P, costs, delta, goal, k, t, sampling, ties=ties, cap=cap) for t in range(trials)]
        wrong = [r.wrong or (r.top_k is not None and len(r.top_k) == k and top_k_is_wrong(P, r.top_k)) for r in runs]
        out[sampling] = {
            "mean_cost": float(np.mean([r.cost for r in runs])),
            "mean_duels": float(np.mean([r.duels for r in runs])),
            "errors": int(sum(wrong)),
            "certified": sum(r.reached == "certified" for r in runs),
            "undecidable": sum(r.reached == "undecidable" for r in runs),
            "at_cap": sum(r.reached is None for r in runs),
        }
    base = out["uniform"]["mean_cost"]
    for sampling in SAMPLINGS:
        out[sampling]["cost_over_uniform"] = out[sampling]["mean_cost"] / base
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--trials", type=int, default=40)
    ap.add_argument("--delta", type=float, default=0.05)
    ap.add_argument("--cap", type=int, default=20_000, help="duels per campaign at most")
    ap.add_argument("--json", action="store_true")
    a = ap.parse_args()
    t0 = time.perf_counter()
    rows = [run_case(n, g, k, a.trials, a.delta, a.cap) for n, g, k in CASES]
    if a.json:
        print(json.dumps({"cases": rows, "seconds": round(time.perf_counter() - t0, 1)}, indent=2))
        return
    print(f"delta {a.delta}, {a.trials} campaigns per row, cap {a.cap} duels; cost relative to uniform + certificate")
    print(f"{'instance':<18} {'goal':<9} | " + " | ".join(f"{s:>28}" for s in SAMPLINGS))
    for r in rows:
        goal = r["goal"] + (f" {r['k']}" if r["k"] else "")
        cells = []
        for s in SAMPLINGS:
            c = r[s]
            cells.append(
                f"{c['cost_over_uniform']:5.2f}x err {c['errors']:>2} done {c['certified'] + c['undecidable']:>3}"
            )
        print(f"{r['instance']:<18} {goal:<9} | " + " | ".join(f"{x:>28}" for x in cells))
    print(f"({time.perf_counter() - t0:.0f} s)")


if __name__ == "__main__":
    main()
