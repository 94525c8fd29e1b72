"""dctas-pc's certificate tests: the default (betting) against the mixture test and the paper's dctas.

    .venv/bin/python benchmarks/bench_certificates.py --part tests --trials 500 --jobs 2
    .venv/bin/python benchmarks/bench_certificates.py --part errors --error-trials 10000 --jobs 2
    .venv/bin/python benchmarks/bench_certificates.py --part explore --trials 200 --jobs 2
    .venv/bin/python benchmarks/bench_certificates.py --part dctas --trials 500 --jobs 2
    .venv/bin/python benchmarks/bench_certificates.py --part union --trials 500 --error-trials 600 --jobs 2 --json
    .venv/bin/python benchmarks/bench_certificates.py --quick          # every part, few trials

``tests``: at delta = 0.01 on synthetic k=4, k=19, search and the tie-heavy genai-image-ties4
(33% ties), the default (``betting``) and ``--threshold mixture`` (the test before it), same
seeds: mean costs, their ratio, cost / c*, cost / c_pc* (both with the paper's
``log(1/(4 delta))``) and the floor ``c_pc* kl(delta, 1 - delta) / (c* log(1/(4 delta)))`` that
no rule with both verdicts can beat. Targets (issue 23): ratio <= 0.90 on k=4, k=19, search,
<= 0.70 on the tie instance; cost / c_pc* <= 2.0 / 2.0 / 2.8 on k=4 / k=19 / search.
``errors``: error rates of the default at delta = 0.1 on a hard, an intransitive and the
tie-heavy instance, with the one-sided binomial check (the rate is at most delta unless the
count exceeds the 99.9% binomial quantile). ``explore``: forced-exploration variants of the
default (sampling with the betting test) against the mixture. ``dctas``: dctas-pc against the
paper's dctas on the six built-ins. ``union``: the level of each certificate, ``delta / L``
(default) against ``delta / (L - 1)`` (the level before): the share of trials naming a winner
on exactly equal models (L = 2, 3, 4) at delta = 0.1 with its binomial check, and at
delta = 0.01 the mean cost / c_pc* of both levels and of the paper's dctas on the same seeds
on synthetic k=4, k=19, search and a 5-arm intransitive instance with a winner; ``--json``
prints the figures as one JSON object.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from scipy.stats import binom  # noqa: E402

import algorithms.certificates as certificates  # noqa: E402
from algorithms import Instance, solve_oracle, solve_pc_oracle  # noqa: E402
from algorithms.instances import resolve_instance  # noqa: E402
from algorithms.simulator import simulate  # noqa: E402

INSTANCES = ["synthetic:k=4", "synthetic:k=19", "search", "image", "text", "genai-image"]
TEST_INSTANCES = ["synthetic:k=4", "synthetic:k=19", "search", "genai-image-ties4"]
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
# a Condorcet winner w over four arms with two cycles (x > y > z > v > x)
INTRANSITIVE5 = Instance(
    ["w", "x", "y", "z", "v"],
    [1.0, 2.0, 1.0, 0.5, 1.5],
    [
        [0.5, 0.6, 0.62, 0.58, 0.65],
        [0.4, 0.5, 0.65, 0.45, 0.38],
        [0.38, 0.35, 0.5, 0.65, 0.55],
        [0.42, 0.55, 0.35, 0.5, 0.6],
        [0.35, 0.62, 0.45, 0.4, 0.5],
    ],
)
UNION_COST = [("synthetic:k=4", None), ("synthetic:k=19", None), ("search", None), ("intransitive-5", INTRANSITIVE5)]
EQUAL_CAP = 20_000  # duels per trial on equal models (no certificate is due there, so trials end at the cap)


def equal_models(L: int) -> Instance:
    """``L`` exactly equal models: every duel a fair coin; naming any model is an error."""
    P = [[0.5] * L for _ in range(L)]
    return Instance([f"m{i}" for i in range(L)], [1.0] * L, P, require_condorcet=False)


# (near-tie weight bound, exploration mode, fraction): see algorithms._kernels.pc_choose
EXPLORE_VARIANTS = {
    "default": None,
    "unbounded, all pairs at sqrt(t)": (0.0, 0, 1.0),
    "bounded, all pairs at sqrt(t)": (1.0, 0, 1.0),
    "bounded, leader's pairs only": (1.0, 1, 1.0),
    "unbounded, leader's pairs only": (0.0, 1, 1.0),
}


def part_tests(a: argparse.Namespace) -> None:
    delta = 0.01
    print(f"default (betting) against --threshold mixture, delta = {delta}, {a.trials} trials, seed {a.seed}")
    print(
        f"{'instance':<18} {'betting':>10} {'mixture':>10} {'ratio':>6} {'cost/c*':>8} {'cost/c_pc*':>10} "
        f"{'c_pc*/c*':>8} {'floor':>6} {'mix/c_pc*':>9} {'errors':>7} {'sec':>5}",
        flush=True,
    )
    for name in TEST_INSTANCES:
        inst = resolve_instance(name)
        t0 = time.perf_counter()
        b = simulate(inst, "dctas-pc", delta, a.trials, seed=a.seed, jobs=a.jobs).summary()
        m = simulate(inst, "dctas-pc", delta, a.trials, seed=a.seed, jobs=a.jobs, threshold="mixture").summary()
        o, pc = solve_oracle(inst), solve_pc_oracle(inst)
        floor = pc.floor(delta) / o.lower_bound(delta)
        print(
            f"{name:<18} {b['mean_cost']:>10.5g} {m['mean_cost']:>10.5g} {b['mean_cost'] / m['mean_cost']:>6.3f} "
            f"{b['cost_over_lower_bound']:>8.2f} {b['cost_over_pc_lower_bound']:>10.2f} {pc.c_pc / o.c_star:>8.3f} "
            f"{floor:>6.2f} {m['cost_over_pc_lower_bound']:>9.2f} {b['errors']:>3}/{m['errors']:<3} "
            f"{time.perf_counter() - t0:>5.0f}",
            flush=True,
        )


def part_errors(a: argparse.Namespace) -> None:
    delta, n = 0.1, a.error_trials
    limit = int(binom.ppf(0.999, n, delta))
    print(f"error rate of the default at delta = {delta}, {n} trials, seed {a.seed} (binomial 99.9% limit: {limit})")
    for label, inst in (
        ("hard", HARD),
        ("intransitive", INTRANSITIVE),
        ("tie-heavy", resolve_instance("genai-image-ties4")),
    ):
        t0 = time.perf_counter()
        r = simulate(inst, "dctas-pc", delta, n, seed=a.seed, jobs=a.jobs, max_steps=5_000_000)
        k = int(r.errors.sum())
        print(
            f"{label:<13} errors {k} / {n} = {k / n:.4f} (<= limit: {k <= limit}); no-CW verdicts "
            f"{int(r.no_condorcet_winner.sum())}; unfinished {int((~r.stopped).sum())}; mean cost "
            f"{r.costs.mean():.5g}; {time.perf_counter() - t0:.0f} s",
            flush=True,
        )


def part_explore(a: argparse.Namespace) -> None:
    delta = 0.01
    names = ["synthetic:k=4", "synthetic:k=19", "search", "image", "genai-image"]
    print(f"sampling variants with the betting test / mixture (default sampling), delta = {delta}, {a.trials} trials")
    print(f"{'instance':<16} " + " ".join(f"{v[:30]:>31}" for v in EXPLORE_VARIANTS), flush=True)
    saved_cap, saved_explore = dict(certificates.PC_TIE_CAP), dict(certificates.PC_EXPLORE)
    for name in names:
        inst = resolve_instance(name)
        m = simulate(inst, "dctas-pc", delta, a.trials, seed=a.seed, jobs=a.jobs, threshold="mixture").costs.mean()
        cells = []
        for v in EXPLORE_VARIANTS.values():
            if v is not None:
                certificates.PC_TIE_CAP["betting"] = v[0]
                certificates.PC_EXPLORE["betting"] = (v[1], v[2])
            try:
                b = simulate(inst, "dctas-pc", delta, a.trials, seed=a.seed, jobs=a.jobs).costs.mean()
            finally:
                certificates.PC_TIE_CAP.update(saved_cap)
                certificates.PC_EXPLORE.update(saved_explore)
            cells.append(f"{b / m:>31.3f}")
        print(f"{name:<16} " + " ".join(cells), flush=True)


def part_dctas(a: argparse.Namespace) -> None:
    delta = 0.01
    print(f"dctas-pc (default) against the paper's dctas, delta = {delta}, {a.trials} trials")
    print(f"{'instance':<16} {'dctas-pc':>12} {'dctas':>12} {'ratio':>6} {'pc/LB':>6} {'dctas/LB':>8}", flush=True)
    for name in INSTANCES:
        inst = resolve_instance(name)
        pc = simulate(inst, "dctas-pc", delta, a.trials, seed=a.seed, jobs=a.jobs).summary()
        d = simulate(inst, "dctas", delta, a.trials, seed=a.seed, jobs=a.jobs).summary()
        print(
            f"{name:<16} {pc['mean_cost']:>12.5g} {d['mean_cost']:>12.5g} {pc['mean_cost'] / d['mean_cost']:>6.3f} "
            f"{pc['cost_over_lower_bound']:>6.2f} {d['cost_over_lower_bound']:>8.2f}",
            flush=True,
        )


def part_union(a: argparse.Namespace) -> dict:
    out: dict = {"equal_models": [], "cost": []}
    delta, n = 0.1, a.error_trials
    limit = int(binom.ppf(0.999, n, delta))
    print(f"equal models, delta = {delta}, {n} trials, cap {EQUAL_CAP} duels, seed {a.seed} (99.9% limit {limit})")
    print(f"{'L':>3} {'level':>12} {'named':>6} {'share':>7} {'no-CW':>6} {'<= limit':>8} {'sec':>5}", flush=True)
    for L in (2, 3, 4):
        for level in ("delta/L", "delta/(L-1)"):
            t0 = time.perf_counter()
            r = simulate(
                equal_models(L), "dctas-pc", delta, n, seed=a.seed, jobs=a.jobs, max_steps=EQUAL_CAP, level=level
            )
            named = int((r.stopped & (r.recommended >= 0)).sum())  # a capped trial names nobody
            row = {"L": L, "level": level, "trials": n, "named": named, "share": named / n, "limit": limit}
            row["no_condorcet_winner"] = int(r.no_condorcet_winner.sum())
            out["equal_models"].append(row)
            print(
                f"{L:>3} {level:>12} {named:>6} {named / n:>7.4f} {row['no_condorcet_winner']:>6} "
                f"{str(named <= limit):>8} {time.perf_counter() - t0:>5.0f}",
                flush=True,
            )
    delta = 0.01
    print(f"cost / c_pc* at delta = {delta}, {a.trials} trials, seed {a.seed}, same seeds in every column")
    print(
        f"{'instance':<16} {'delta/L':>8} {'delta/(L-1)':>11} {'fix cost':>8} {'dctas':>8} {'pc/dctas':>8} "
        f"{'errors':>8} {'sec':>5}",
        flush=True,
    )
    for name, inst in UNION_COST:
        inst = inst or resolve_instance(name)
        t0 = time.perf_counter()
        new = simulate(inst, "dctas-pc", delta, a.trials, seed=a.seed, jobs=a.jobs).summary()
        old = simulate(inst, "dctas-pc", delta, a.trials, seed=a.seed, jobs=a.jobs, level="delta/(L-1)").summary()
        d = simulate(inst, "dctas", delta, a.trials, seed=a.seed, jobs=a.jobs).summary()
        row = {
            "instance": name,
            "trials": a.trials,
            "cost_over_c_pc": new["cost_over_pc_lower_bound"],
            "legacy_cost_over_c_pc": old["cost_over_pc_lower_bound"],
            "fix_cost_ratio": new["mean_cost"] / old["mean_cost"],
            "dctas_cost_over_c_pc": d["mean_cost"] / new["pc_lower_bound"],
            "cost_over_dctas": new["mean_cost"] / d["mean_cost"],
            "errors": new["errors"],
            "legacy_errors": old["errors"],
            "dctas_errors": d["errors"],
        }
        out["cost"].append(row)
        print(
            f"{name:<16} {row['cost_over_c_pc']:>8.3f} {row['legacy_cost_over_c_pc']:>11.3f} "
            f"{row['fix_cost_ratio']:>8.3f} {row['dctas_cost_over_c_pc']:>8.3f} {row['cost_over_dctas']:>8.3f} "
            f"{new['errors']:>2}/{old['errors']}/{d['errors']:<3} {time.perf_counter() - t0:>5.0f}",
            flush=True,
        )
    return out


PARTS = {"union": part_union, "tests": part_tests, "errors": part_errors, "explore": part_explore, "dctas": part_dctas}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--part", choices=[*PARTS, "all"], default="all")
    ap.add_argument("--trials", type=int, default=500)
    ap.add_argument("--error-trials", type=int, default=10_000)
    ap.add_argument("--jobs", type=int, default=1)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--quick", action="store_true", help="50 trials, 1,000 error trials")
    ap.add_argument("--json", action="store_true", help="also print the figures of the parts that have them as JSON")
    a = ap.parse_args()
    if a.quick:
        a.trials, a.error_trials = 50, 1000
    figures = {}
    for name, fn in PARTS.items():
        if a.part in (name, "all"):
            res = fn(a)
            if res is not None:
                figures[name] = res
            print(flush=True)
    if a.json:
        print(json.dumps(figures, indent=1))


if __name__ == "__main__":
    main()
