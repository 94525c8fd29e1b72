"""The service's own policy (dctas-pc) with reuse (prompts with replacement) and without replacement.

    .venv/bin/python benchmarks/bench_wor_policy.py [--trials 1000] [--delta 0.05]

The four prompt-level instances of docs/reuse.md (built as in
benchmarks/bench_reuse_sim.py: answer costs 4, 2, 1, 1, judge 1.5 per call, a
verdict is both orders; 50 and 500 prompts, "clear" and "small gaps"; table seed
1). For each instance, ``reuse`` and ``wor`` (algorithms/prompt_policy_sim.py) on
the same seeds 0..trials-1: mean and median spend and duels, errors against the
prompt-set Condorcet winner with a one-sided 99% Clopper-Pearson upper bound,
outcome counts, the spend ratio reuse/wor, the share of seeds where wor spent
strictly less, and the every-answer-once bound. One process.
"""

from __future__ import annotations

import argparse
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import numpy as np  # noqa: E402
from bench_reuse_sim import COSTS, JUDGE, THETAS  # noqa: E402  (the instances of docs/reuse.md, defined once)
from scipy.stats import beta as beta_dist  # noqa: E402

from algorithms.prompt_level import bradley_terry_prompts  # noqa: E402
from algorithms.prompt_policy_sim import policy_trials  # noqa: E402
from algorithms.prompt_sim import CAPPED, NO_CW, UNDECIDABLE  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--trials", type=int, default=1000)
    ap.add_argument("--delta", type=float, default=0.05)
    ap.add_argument("--prompts", type=int, nargs="+", default=[50, 500])
    args = ap.parse_args()
    if args.trials < 1 or not 0 < args.delta < 1:
        ap.error("--trials must be >= 1 and --delta in (0, 1)")
    print(
        f"dctas-pc, delta = {args.delta}, trials = {args.trials} per mode (seeds 0..{args.trials - 1}), "
        f"answer costs {COSTS}, judge {JUDGE} per call"
    )
    rows = []
    for P in args.prompts:
        for label, theta in THETAS.items():
            inst = bradley_terry_prompts(theta, P, costs=COSTS, judge_cost=JUDGE, prompt_sd=1.0, tie_prob=0.1, seed=1)
            cw = inst.condorcet_winner()
            pref = inst.preference()
            gaps = (
                "none" if cw is None else ", ".join(f"{pref[cw, k] - 0.5:.3f}" for k in range(inst.n_models) if k != cw)
            )
            bound = inst.every_answer_once_bound()
            print(f"\n{inst.n_models} models x {P} prompts, {label}: winner {cw}, gaps {gaps}; bound {bound:.0f}")
            print(
                f"  {'mode':<6} {'mean spend':>10} {'median':>8} {'mean duels':>10} {'median':>7} {'max/bnd':>7} "
                f"{'errors':>6} {'upper99':>7} {'no-CW':>5} {'undec':>5} {'capped':>6} {'s':>6}"
            )
            res = {}
            for mode in ("reuse", "wor"):
                t0 = time.perf_counter()
                r = policy_trials(inst, mode, args.delta, args.trials, seed=0)
                res[mode] = r
                k = r["errors"]
                upper = float(beta_dist.ppf(0.99, k + 1, args.trials - k)) if k < args.trials else 1.0
                o = r["outcome"]
                print(
                    f"  {mode:<6} {r['spend'].mean():>10.1f} {np.median(r['spend']):>8.1f} {r['duels'].mean():>10.1f} "
                    f"{np.median(r['duels']):>7.0f} {r['spend'].max() / bound:>7.3f} {k:>6} {upper:>7.4f} "
                    f"{int((o == NO_CW).sum()):>5} {int((o == UNDECIDABLE).sum()):>5} {int((o == CAPPED).sum()):>6} "
                    f"{time.perf_counter() - t0:>6.1f}",
                    flush=True,
                )
            b, w = res["reuse"]["spend"], res["wor"]["spend"]
            cheaper = float(np.mean(w < b))
            print(
                f"  reuse/wor mean spend {b.mean() / w.mean():.3f}, median {np.median(b) / np.median(w):.3f}; "
                f"wor cheaper on {100 * cheaper:.1f}% of seeds (equal {100 * float(np.mean(w == b)):.1f}%)",
                flush=True,
            )
            rows.append((P, label, bound, res, cheaper))
    print(
        "\n| instance | bound | reuse spend mean / median | wor spend mean / median | reuse/wor | wor cheaper | "
        "duels reuse / wor (mean) | errors reuse / wor |"
    )
    print("|---|---|---|---|---|---|---|---|")
    for P, label, bound, res, cheaper in rows:
        b, w = res["reuse"], res["wor"]
        print(
            f"| {P} prompts, {label} | {bound:.0f} | {b['spend'].mean():.1f} / {np.median(b['spend']):.1f} | "
            f"{w['spend'].mean():.1f} / {np.median(w['spend']):.1f} | {b['spend'].mean() / w['spend'].mean():.2f} | "
            f"{100 * cheaper:.1f}% | {b['duels'].mean():.0f} / {w['duels'].mean():.0f} | {b['errors']} / {w['errors']} |"
        )


if __name__ == "__main__":
    main()
