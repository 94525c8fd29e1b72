"""Spend to certify with and without answer/verdict reuse on prompt-level instances.

    .venv/bin/python benchmarks/bench_reuse_sim.py [--trials 1000] [--delta 0.05]

Four models with answer costs 4, 2, 1, 1 and a judge at 1.5 per call (a verdict
is two calls, both orders); verdict tables drawn once from a per-prompt
Bradley-Terry model (prompt noise sd 1, judge ties 0.1, seed 1). For each
instance and mode (fresh, reuse with replacement, reuse without replacement):
mean spend and duels to certify, the largest spend over the every-answer-once
bound, errors against the prompt-set Condorcet winner with a one-sided 99%
Clopper-Pearson upper bound on the error rate, and the spend ratios. Trials use
seeds 0, 1, ... in every mode (same seeds side by side).
"""

from __future__ import annotations

import argparse
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import numpy as np  # noqa: E402
from scipy.stats import beta as beta_dist  # noqa: E402

from algorithms.prompt_level import bradley_terry_prompts  # noqa: E402
from algorithms.prompt_sim import run_trials  # noqa: E402

COSTS = [4.0, 2.0, 1.0, 1.0]
JUDGE = 1.5
THETAS = {"clear": [1.0, 0.3, 0.0, -0.3], "small gaps": [0.3, 0.15, 0.0, -0.1]}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--trials", type=int, default=1000)
    ap.add_argument("--delta", type=float, default=0.05)
    ap.add_argument("--prompts", type=int, nargs="+", default=[50, 500])
    args = ap.parse_args()
    if args.trials < 1 or not 0 < args.delta < 1:
        ap.error("--trials must be >= 1 and --delta in (0, 1)")
    print(
        f"delta = {args.delta}, trials = {args.trials} per mode (seeds 0..{args.trials - 1}), "
        f"answer costs {COSTS}, judge {JUDGE} per call"
    )
    for P in args.prompts:
        for label, theta in THETAS.items():
            inst = bradley_terry_prompts(theta, P, costs=COSTS, judge_cost=JUDGE, prompt_sd=1.0, tie_prob=0.1, seed=1)
            cw = inst.condorcet_winner()
            pref = inst.preference()
            gaps = (
                "none" if cw is None else ", ".join(f"{pref[cw, k] - 0.5:.3f}" for k in range(inst.n_models) if k != cw)
            )
            bound = inst.every_answer_once_bound()
            print(
                f"\n{inst.n_models} models x {P} prompts, {label}: prompt-set winner {cw}, "
                f"its gaps {gaps}; every-answer-once bound {bound:.0f}"
            )
            print(
                f"  {'mode':<6} {'mean spend':>11} {'mean duels':>11} {'max/bound':>9} {'errors':>7} "
                f"{'upper99':>8} {'no-CW':>6} {'capped':>6} {'s':>5}"
            )
            spends = {}
            for mode in ("fresh", "reuse", "wor"):
                t0 = time.perf_counter()
                r = run_trials(inst, mode, args.delta, args.trials, seed=0)
                spends[mode] = r["spend"]
                k = r["errors"]
                upper = float(beta_dist.ppf(0.99, k + 1, args.trials - k)) if k < args.trials else 1.0
                print(
                    f"  {mode:<6} {r['spend'].mean():>11.1f} {r['duels'].mean():>11.1f} "
                    f"{r['spend'].max() / bound:>9.3f} {k:>7} {upper:>8.4f} {int((r['outcome'] < 0).sum() - r['capped']):>6} "
                    f"{r['capped']:>6} {time.perf_counter() - t0:>5.1f}",
                    flush=True,
                )
            f, b, w = (spends[m].mean() for m in ("fresh", "reuse", "wor"))
            cheaper = float(np.mean(spends["wor"] < spends["reuse"]))
            print(
                f"  spend ratios: fresh/reuse {f / b:.2f}, fresh/wor {f / w:.2f}, reuse/wor {b / w:.3f}; "
                f"wor cheaper than reuse on the same seed in {cheaper:.1%} of trials"
            )


if __name__ == "__main__":
    main()
