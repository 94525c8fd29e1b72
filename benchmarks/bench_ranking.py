"""Coverage of the ranking's 95% intervals for the winner's true win rate against the field,
at the campaign's own stopping time (dctas-pc on genai-image, delta 0.05).

Each campaign runs the step-wise dctas-pc policy on the instance's preference
matrix (Bernoulli duels) until its certificate stops it; the ranking's intervals
are computed from its final counts, as the export does, with the percentile
bootstrap (descriptive) and with the anytime-valid intervals
(:func:`algorithms.ranking.anytime_field_intervals`), and the betting intervals simultaneous
over the models (:func:`algorithms.ranking.betting_field_intervals`).

``--wor``: also campaigns without replacement (the service's dctas-pc driver,
:func:`algorithms.prompt_policy_sim.policy_campaign`, on prompt-level tables drawn
from Bradley-Terry strengths ~ N(0, spread^2)), where the anytime interval's validity
is not proven: its coverage of each model's prompt-set win rate against the field.

``--ties``: also campaigns on genai-image-ties, each duel scored 1, 1/2 or 0 with the instance's tie
rates: the betting intervals with the ties counted (their factors exact) and without (the chord, as
before): coverage of every model at once and the winner's median width.

``--tilt K``: the betting intervals with :data:`algorithms.ranking.ALPHA_TILT` set to ``K`` (0: every side's share
of alpha fixed at alpha / (2 L)).

``--timing``: only the seconds :func:`algorithms.ranking.betting_field_intervals` takes on seeded random
counts (duels spread uniformly over all pairs, a fifth of them ties, counted), after a compiling call.

Run: ``PYTHONPATH=. .venv/bin/python benchmarks/bench_ranking.py [--campaigns 200] [--instance genai-image] [--wor] [--ties] [--tilt K] [--timing]``
"""

from __future__ import annotations

import argparse
import time

import numpy as np

from algorithms import ranking
from algorithms.instances import resolve_instance
from algorithms.policies import make_policy
from algorithms.prompt_level import bradley_terry_prompts
from algorithms.prompt_policy_sim import policy_campaign
from algorithms.ranking import anytime_field_intervals, betting_field_intervals, bootstrap_ranking, duels_from_counts


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


def tie_campaigns(campaigns: int, delta: float, instance: str = "genai-image-ties") -> None:
    """dctas-pc on an instance with ties (scores 1, 1/2, 0 with its win and tie rates), stopped by its
    certificate; the betting intervals with and without the ties counted."""
    inst = resolve_instance(instance)
    P, TIE = np.asarray(inst.preference), np.asarray(inst.tie_matrix())
    L = P.shape[0]
    truths = (P.sum(axis=1) - 0.5) / (L - 1)
    every = {"ties counted": 0, "chord": 0}
    width: dict[str, list[float]] = {k: [] for k in every}
    anytime: list[float] = []
    for c in range(campaigns):
        rng = np.random.default_rng(c)
        pol = make_policy("dctas-pc", list(inst.costs), delta)
        T = np.zeros((L, L))
        while not pol.should_stop():
            i, j = pol.next_pair()
            u = rng.random()
            won = P[i, j] - TIE[i, j] / 2  # P counts a tie as half a win
            s = 1.0 if u < won else (0.5 if u < won + TIE[i, j] else 0.0)
            T[i, j] += s == 0.5
            T[j, i] += s == 0.5
            pol.record(i, j, s)
        win, W, N = pol.recommendation(), pol.wins_matrix(), pol.counts_matrix()
        a_lo, a_hi = anytime_field_intervals(W, N, 0.95)
        anytime.append(a_hi[win] - a_lo[win])
        for name, ties in (("ties counted", T), ("chord", None)):
            low, high = betting_field_intervals(W, N, 0.95, ties=ties)
            every[name] += int(np.all((low <= truths) & (truths <= high)))
            width[name].append(high[win] - low[win])
    print(f"{instance}, dctas-pc, delta {delta}, {campaigns} campaigns with ties; betting 95% intervals")
    for name in every:
        print(
            f"  {name:<12} every model at once {100 * every[name] / campaigns:5.1f}%  "
            f"median width of the winner's {np.median(width[name]):.3f}  "
            f"median ratio to the anytime width {np.median(np.array(width[name]) / np.array(anytime)):.3f}"
        )
    print(
        f"  ties counted / chord median width ratio {np.median(np.array(width['ties counted']) / np.array(width['chord'])):.3f}"
    )


def bootstrap_from_counts(W: np.ndarray, N: np.ndarray, seed: int, reps: int = 1000):
    a, b, s, w = duels_from_counts(W, N)
    return bootstrap_ranking(a, b, s, W.shape[0], weights=w, reps=reps, seed=seed)


def wor_coverage(campaigns: int, n_prompts: int, spread: float, delta: float) -> None:
    rng = np.random.default_rng(0)
    hit_w = hit_all = n_w = n_all = 0
    for t in range(campaigns):
        theta = rng.normal(0.0, spread, 4)
        inst = bradley_terry_prompts(
            theta, n_prompts, costs=[2, 3, 4, 5], judge_cost=1.0, prompt_sd=0.5, tie_prob=0.1, seed=t
        )
        r = policy_campaign(inst, "wor", delta, t)
        P = inst.preference()
        truth = (P.sum(axis=1) - 0.5) / 3
        lo, hi = anytime_field_intervals(r.wins, r.counts, 0.95)
        inside = (lo <= truth) & (truth <= hi)
        n_all += 4
        hit_all += int(inside.sum())
        if r.outcome >= 0:
            n_w += 1
            hit_w += int(inside[r.outcome])
    print(
        f"  wor, {n_prompts} prompts, spread {spread}: winner covered {100 * hit_w / max(n_w, 1):5.1f}% "
        f"of {n_w} campaigns with a winner; every model {100 * hit_all / n_all:5.1f}% of {n_all}"
    )


def timing(sizes=((6, 3_000), (20, 4_000), (128, 50_000)), seed: int = 0) -> None:
    """Print the seconds of the betting intervals on seeded random counts of ``(models, duels)``."""
    rng = np.random.default_rng(seed)
    betting_field_intervals(np.full((3, 3), 1.0), np.full((3, 3), 2.0), 0.95)  # compiled (cached) first
    for L, duels in sizes:
        W, N, T = np.zeros((L, L)), np.zeros((L, L)), np.zeros((L, L))
        for _ in range(duels):
            i, j = rng.choice(L, 2, replace=False)
            s = rng.choice([1.0, 0.0, 0.5], p=[0.4, 0.4, 0.2])
            N[i, j] += 1
            N[j, i] += 1
            W[i, j] += s
            W[j, i] += 1.0 - s
            T[i, j] += s == 0.5
            T[j, i] += s == 0.5
        t0 = time.perf_counter()
        betting_field_intervals(W, N, 0.95, ties=T)  # as the ranking calls it
        print(f"betting_field_intervals: {L} models, {duels} duels: {time.perf_counter() - t0:.3f} s")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--campaigns", type=int, default=200)
    ap.add_argument("--instance", default="genai-image")
    ap.add_argument("--delta", type=float, default=0.05)
    ap.add_argument("--wor", action="store_true", help="also campaigns without replacement (4 models)")
    ap.add_argument("--ties", action="store_true", help="also campaigns with ties (genai-image-ties)")
    ap.add_argument(
        "--tilt", type=float, default=None, help="ALPHA_TILT of the betting intervals (default: the module's)"
    )
    ap.add_argument("--timing", action="store_true", help="only the betting intervals' seconds on random counts")
    a = ap.parse_args()
    if a.tilt is not None:
        ranking.ALPHA_TILT = a.tilt  # betting_field_intervals reads it at each call
    if a.timing:
        timing()
        return
    inst = resolve_instance(a.instance)
    P = np.asarray(inst.preference)
    L = P.shape[0]
    t0 = time.perf_counter()
    kinds = ("bootstrap", "anytime", "betting")
    hit = dict.fromkeys(kinds, 0)
    every = dict.fromkeys(kinds, 0)  # every model's interval covers at once
    width: dict[str, list[float]] = {k: [] for k in kinds}
    every_width: list[np.ndarray] = []  # the betting widths of every model
    truths = (P.sum(axis=1) - 0.5) / (L - 1)
    for c in range(a.campaigns):
        win, W, N = stopped_campaign(P, inst.costs, a.delta, seed=c)
        r = bootstrap_from_counts(W, N, seed=c)
        for name, (low, high) in (
            ("bootstrap", (r.low, r.high)),
            ("anytime", anytime_field_intervals(W, N, 0.95)),
            ("betting", betting_field_intervals(W, N, 0.95)),
        ):
            hit[name] += int(low[win] <= truths[win] <= high[win])
            every[name] += int(np.all((low <= truths) & (truths <= high)))
            width[name].append(high[win] - low[win])
            if name == "betting":
                every_width.append(high - low)
    print(f"{a.instance}, dctas-pc, delta {a.delta}, {a.campaigns} campaigns; 95% intervals of the winner")
    for name in kinds:
        print(
            f"  {name:<9} coverage {100 * hit[name] / a.campaigns:5.1f}%  every model at once "
            f"{100 * every[name] / a.campaigns:5.1f}%  median width {np.median(width[name]):.3f}"
        )
    print(
        f"  betting / anytime median width ratio {np.median(np.array(width['betting']) / np.array(width['anytime'])):.3f}"
    )
    by_model = np.median(np.array(every_width), axis=0)
    print(
        "  betting median width of each model (true win rate): "
        + ", ".join(f"{by_model[m]:.3f} ({truths[m]:.2f})" for m in np.argsort(-truths))
    )
    if a.ties:
        tie_campaigns(a.campaigns, a.delta)
    if a.wor:
        print("anytime 95% intervals, campaigns without replacement (prompt-set truth):")
        for n_prompts, spread in ((50, 0.5), (200, 0.5), (50, 0.15)):
            wor_coverage(a.campaigns, n_prompts, spread, a.delta)
    print(f"({time.perf_counter() - t0:.0f} s)")


if __name__ == "__main__":
    main()
