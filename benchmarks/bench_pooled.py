"""The portfolio certificate test of dctas-pc (one Ville level shared by the models) and its variants.

    nice -n 15 .venv/bin/python benchmarks/bench_pooled.py --trials 300 --equal --errors --error-trials 600
    nice -n 15 .venv/bin/python benchmarks/bench_pooled.py --trials 200 --grid      # the sweep

``portfolio (rho=0.1 z0=0.5 eta=1)`` is dctas-pc's ``threshold = "portfolio"`` trial by trial;
``kappa`` variants (in ``GRID``) replace each pair's mixture by a tilted predictable bet; a variant with
``"known": i`` pays the whole pool to model ``i`` before the first duel (a reference, not a test: it
needs the Condorcet winner; ``bench_certificates.py --part profile`` uses it).

Each model ``a`` is a candidate. Its account holds, for every other model ``m``, a wealth
``V[a, m] = sum_g pi_g A[a, m, g]`` betting that ``a`` beats ``m`` (the dKelly components of the
default test, factor ``1 + mu_g (y_a - 1/2)`` per duel of the pair). Cash comes from one pool of
initial value 1: ``rho / L`` to every candidate at the start, the rest to the current leader as
its evidence grows (predictable: decided before the next duel). A cash injection ``x`` into
candidate ``a`` adds ``x`` to every one of its ``L - 1`` bets and costs the pool ``x`` once.
Certificate "``m`` beaten by ``k``": ``V[k, m] >= 1/delta_1`` (portfolio) or the default pairwise
test at ``delta_2 / L``; ``delta_1 + delta_2 = delta``. Validity: docs/algorithms.md,
"The portfolio test". This script measures mean cost / c_pc* (delta = 0.01) and the share of
trials naming a model on exactly equal models (delta = 0.1).
"""

from __future__ import annotations

import argparse
import math
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import numpy as np  # noqa: E402
from numba import njit  # noqa: E402
from scipy.stats import binom  # noqa: E402

import algorithms._kernels as kern  # noqa: E402
from algorithms import Instance, solve_pc_oracle  # noqa: E402
from algorithms.instances import resolve_instance  # noqa: E402
from algorithms.oracle import effective_costs  # noqa: E402

# the kernels below are compiled without numba's cache: tests/benchmarks/test_portfolio_test.py loads this file by
# path, and a cache written under another module name fails to load there
MU = np.array([2.0 * kern.PC_RATIO ** (g + 1) for g in range(kern.PC_GRID)])
PIW = np.exp(kern.PC_BET_LPI)


@njit
def _port_value(A, a, m, PIW):
    v = 0.0
    for g in range(PIW.shape[0]):
        v += A[a, m, g]
    return v


@njit
def _tilted_bet(LM, a, m, kappa, MU, PIW):
    """The bet on "a beats m": sum_g w_g mu_g, w_g proportional to pi_g exp(kappa * past log-wealth of bet g).

    kappa = 1 is the dKelly mixture's own bet; any kappa gives a predictable bet in [0, 1.6].
    """
    best = -1e300
    for g in range(MU.shape[0]):
        v = math.log(PIW[g]) + kappa * LM[a, m, g]
        if v > best:
            best = v
    tot = 0.0
    lam = 0.0
    for g in range(MU.shape[0]):
        w = math.exp(math.log(PIW[g]) + kappa * LM[a, m, g] - best)
        tot += w
        lam += w * MU[g]
    return lam / tot


@njit
def _port_check(a, m, k, N, W, PI, A, PIW, thr, BEAT, CB, CW):
    """Certify "m beaten by a" from the portfolio if m is behind in the pair and V[a, m] >= thr."""
    if BEAT[a, m]:
        return False
    n = N[k]
    xm = W[k] if PI[k] == m else n - W[k]
    if xm < 0.5 * n and _port_value(A, a, m, PIW) >= thr:
        kern.pc_set(a, m, BEAT, CB, CW)
        return True
    return False


@njit
def run_pooled(
    P,
    TIE,
    c_true,
    log_thr_pair,
    thr_pool,
    rho,
    z0,
    shape,
    eta,
    kappa,
    MU,
    PIW,
    seeds,
    max_steps,
    out_cost,
    out_rec,
    out_stop,
    known,
):
    L = P.shape[0]
    K = L * (L - 1) // 2
    NG = MU.shape[0]
    PI = np.empty(K, dtype=np.int64)
    PJ = np.empty(K, dtype=np.int64)
    PK = -np.ones((L, L), dtype=np.int64)
    k = 0
    for i in range(L):
        for j in range(i + 1, L):
            PI[k] = i
            PJ[k] = j
            PK[i, j] = k
            PK[j, i] = k
            k += 1
    N = np.zeros(K)
    W = np.zeros(K)
    alpha = np.zeros(K)
    T = np.zeros((L, L))
    G = np.zeros((L, L))
    S = np.zeros(L)
    AMAX = np.zeros(L)
    BEAT = np.zeros((L, L), dtype=np.bool_)
    CB = np.zeros(L, dtype=np.int64)
    CW = np.zeros(L, dtype=np.int64)
    LEAD = -np.ones(1, dtype=np.int64)
    H = np.zeros((K, 2 * kern.PC_LEVELS))
    A = np.zeros((L, L, NG))
    LM = np.zeros((L, L, NG))
    wg = np.zeros(NG)
    given = np.zeros(L)
    for trial in range(seeds.shape[0]):
        np.random.seed(seeds[trial])
        N[:] = 0.0
        W[:] = 0.0
        T[:, :] = 0.0
        G[:, :] = 0.0
        S[:] = 0.0
        AMAX[:] = 0.0
        BEAT[:, :] = False
        CB[:] = 0
        CW[:] = 0
        LEAD[0] = -1
        H[:, :] = 0.0
        LM[:, :, :] = 0.0
        if kappa > 0.0:
            A[:, :, :] = 0.0
            A[:, :, 0] = rho / L
        else:
            for g in range(NG):
                A[:, :, g] = PIW[g] * rho / L
        given[:] = 0.0
        pool = 1.0 - rho
        cost = 0.0
        rec = -1
        steps = 0
        while steps < max_steps:
            a = kern.pc_lead(CB, AMAX, LEAD, 0.0)
            if known >= 0 and pool > 1e-12:
                a = known  # the "known winner" reference: all the cash to it before the first duel
            # --- cash to the leader, decided on the past only
            if pool > 1e-12 and a >= 0:
                z = 1e300
                for m in range(L):
                    if m != a and T[m, a] < z and known < 0:
                        z = T[m, a]
                if shape == 0:
                    h = 1.0 if z >= z0 else 0.0
                elif shape == 1:
                    h = min(1.0, z / z0)
                else:
                    h = 1.0 - math.exp(-z / z0)
                x = (1.0 - rho) * h - given[a]
                if x > pool:
                    x = pool
                if x > 1e-3 * (1.0 - rho) or (x > 0 and x >= pool):
                    pool -= x
                    given[a] += x
                    for m in range(L):
                        if m != a and kappa > 0.0:
                            A[a, m, 0] += x
                        elif m != a:
                            # tranche weights: the prior tilted by the pair's past log-wealth to the power eta
                            best = -1e300
                            for g in range(NG):
                                wg[g] = math.log(PIW[g]) + eta * LM[a, m, g]
                                if wg[g] > best:
                                    best = wg[g]
                            tot = 0.0
                            for g in range(NG):
                                wg[g] = math.exp(wg[g] - best)
                                tot += wg[g]
                            for g in range(NG):
                                A[a, m, g] += x * wg[g] / tot
                    hit = False
                    for m in range(L):
                        if m != a and _port_check(a, m, PK[a, m], N, W, PI, A, PIW, thr_pool, BEAT, CB, CW):
                            hit = True
                    if hit:
                        v = kern.pc_verdict(CB, CW)
                        if v != -1:
                            rec = v
                            break
                        a = kern.pc_lead(CB, AMAX, LEAD, 0.0)
            if known >= 0:
                a = kern.pc_lead(CB, AMAX, LEAD, 0.0)  # the sampling keeps the plug-in leader
            k = kern.pc_choose(N, float(steps), a, G, AMAX, c_true, PI, PJ, PK, BEAT, CB, alpha, 1.0, 2, 0.5)
            i = PI[k]
            j = PJ[k]
            score = kern.draw_score(P[i, j], TIE[i, j])
            N[k] += 1.0
            W[k] += score
            kern.refresh_pair(k, N, W, PI, PJ, c_true, T, G, S, AMAX)
            cost += c_true[i] + c_true[j]
            steps += 1
            if kappa > 0.0:
                li = _tilted_bet(LM, i, j, kappa, MU, PIW)
                lj = _tilted_bet(LM, j, i, kappa, MU, PIW)
                A[i, j, 0] *= 1.0 + li * (score - 0.5)
                A[j, i, 0] *= 1.0 + lj * (0.5 - score)
            for g in range(NG):
                fi = 1.0 + MU[g] * (score - 0.5)
                fj = 1.0 + MU[g] * (0.5 - score)
                if kappa <= 0.0:
                    A[i, j, g] *= fi
                    A[j, i, g] *= fj
                LM[i, j, g] += math.log(fi)
                LM[j, i, g] += math.log(fj)
            kern.pc_hist_add(k, score, H)
            hit = kern.pc_update_bet(k, N, W, H, PI, PJ, log_thr_pair, BEAT, CB, CW)
            if _port_check(i, j, k, N, W, PI, A, PIW, thr_pool, BEAT, CB, CW):
                hit = True
            if _port_check(j, i, k, N, W, PI, A, PIW, thr_pool, BEAT, CB, CW):
                hit = True
            if hit:
                v = kern.pc_verdict(CB, CW)
                if v != -1:
                    rec = v
                    break
        out_cost[trial] = cost
        out_rec[trial] = rec
        out_stop[trial] = rec != -1


def run(inst: Instance, delta: float, trials: int, seed: int, variant: dict, max_steps: int = 50_000_000):
    L = inst.L
    d1 = delta * variant["share"]
    d2 = delta - d1
    log_thr_pair = math.log(L / d2) if d2 > 1e-12 else 1e300
    seeds = np.random.SeedSequence(seed).generate_state(trials, dtype=np.uint32).astype(np.int64)
    cost = np.zeros(trials)
    rec = np.zeros(trials, dtype=np.int64)
    stop = np.zeros(trials, dtype=np.bool_)
    run_pooled(
        np.ascontiguousarray(inst.preference, dtype=float),
        np.ascontiguousarray(inst.tie_matrix(), dtype=float),
        effective_costs(inst.costs, 0.0),
        log_thr_pair,
        1.0 / d1,
        variant["rho"],
        variant["z0"],
        variant["shape"],
        variant.get("eta", 0.0),
        variant.get("kappa", 0.0),
        MU,
        PIW,
        seeds,
        max_steps,
        cost,
        rec,
        stop,
        int(variant.get("known", -1)),
    )
    return cost, rec, stop


# instances of tests/algorithms/test_union_level.py: two equal leaders, a cycle, a winner over a cycle, a near-tie
EQUAL_LEADERS = Instance(
    ["a", "b", "c"], [1.0, 1.0, 1.0], [[0.5, 0.5, 0.7], [0.5, 0.5, 0.7], [0.3, 0.3, 0.5]], require_condorcet=False
)
CYCLE = Instance(
    ["r", "p", "s", "d"],
    [1.0, 1.0, 1.0, 1.0],
    [[0.5, 0.4, 0.6, 0.7], [0.6, 0.5, 0.4, 0.7], [0.4, 0.6, 0.5, 0.7], [0.3, 0.3, 0.3, 0.5]],
    require_condorcet=False,
)
INTRANSITIVE = Instance(
    ["w", "x", "y", "z"],
    [2.0, 1.0, 0.5, 3.0],
    [[0.5, 0.7, 0.7, 0.72], [0.3, 0.5, 0.7, 0.3], [0.3, 0.3, 0.5, 0.7], [0.28, 0.7, 0.3, 0.5]],
)
NEAR_TIE = Instance(["a", "b", "c"], [1.0, 1.0, 1.0], [[0.5, 0.53, 0.6], [0.47, 0.5, 0.6], [0.4, 0.4, 0.5]])


def wrong_verdicts(inst: Instance, rec: np.ndarray, stop: np.ndarray) -> int:
    """Trials with a wrong verdict: a name other than the Condorcet winner, or "no Condorcet winner" when one exists."""
    cw = inst.condorcet_winner
    if cw is None:
        return int((stop & (rec >= 0)).sum())
    return int((stop & (rec != cw)).sum())


def equal_models(L: int) -> Instance:
    return Instance([f"m{i}" for i in range(L)], [1.0] * L, [[0.5] * L for _ in range(L)], require_condorcet=False)


# rho: share of the pool given to every candidate at the start (rho / L each); z0: the leader's cash
# follows (1 - rho)(1 - exp(-z / z0)), z its smallest GLR evidence of beating another model (nats);
# eta: a tranche's weights over the bets are the prior tilted by the pair's past log-wealth to the power eta
VARIANTS = {
    "bonferroni (rho=1)": {"share": 1.0, "rho": 1.0, "z0": 1.0, "shape": 2, "eta": 0.0},
    "rho=0.1 z0=0.5 eta=3": {"share": 1.0, "rho": 0.1, "z0": 0.5, "shape": 2, "eta": 3.0},
    "rho=0.3 z0=1 eta=3": {"share": 1.0, "rho": 0.3, "z0": 1.0, "shape": 2, "eta": 3.0},
    # dctas-pc's threshold = "portfolio", trial by trial (tests/benchmarks/test_portfolio_test.py)
    "portfolio (rho=0.1 z0=0.5 eta=1)": {"share": 1.0, "rho": 0.1, "z0": 0.5, "shape": 2, "eta": 1.0},
}
GRID = dict(VARIANTS)
for _k in (1.0, 1.5, 2.0, 3.0):
    GRID[f"rho=1 kappa={_k}"] = {"share": 1.0, "rho": 1.0, "z0": 1.0, "shape": 2, "kappa": _k}
    GRID[f"rho=0.1 z0=0.5 kappa={_k}"] = {"share": 1.0, "rho": 0.1, "z0": 0.5, "shape": 2, "kappa": _k}
    GRID[f"rho=0.3 z0=1 kappa={_k}"] = {"share": 1.0, "rho": 0.3, "z0": 1.0, "shape": 2, "kappa": _k}
for _rho in (0.1, 0.3):
    for _z0 in (0.5, 1.0):
        for _eta in (0.0, 1.0, 3.0, 10.0):
            GRID[f"rho={_rho} z0={_z0} eta={_eta}"] = {"share": 1.0, "rho": _rho, "z0": _z0, "shape": 2, "eta": _eta}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--trials", type=int, default=300)
    ap.add_argument("--error-trials", type=int, default=600)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--variants", default=",".join(VARIANTS), help="names from VARIANTS (or GRID with --grid)")
    ap.add_argument("--grid", action="store_true", help="every variant of GRID (the sweep)")
    ap.add_argument("--instances", default="synthetic:k=4,synthetic:k=19,search")
    ap.add_argument("--equal", action="store_true", help="also the equal-models check at delta = 0.1")
    ap.add_argument("--errors", action="store_true", help="also error rates at delta = 0.1 on hard instances")
    a = ap.parse_args()
    names = list(GRID) if a.grid else a.variants.split(",")
    delta = 0.01
    print(f"mean cost / c_pc* log(1/(4 delta)), delta = {delta}, {a.trials} trials, seed {a.seed}")
    for name in a.instances.split(","):
        inst = resolve_instance(name)
        lb = solve_pc_oracle(inst).lower_bound(delta)
        cw = int(np.argmax([sum(p > 0.5 for p in row) for row in inst.preference]))
        for v in names:
            t0 = time.perf_counter()
            cost, rec, stop = run(inst, delta, a.trials, a.seed, GRID[v])
            err = int(((rec != cw) & stop).sum())
            print(
                f"{name:<16} {v:<24} {cost.mean() / lb:6.3f} errors {err} {time.perf_counter() - t0:5.0f}s", flush=True
            )
    if a.equal:
        d, n = 0.1, a.error_trials
        limit = int(binom.ppf(0.999, n, d))
        print(f"equal models, delta = {d}, {n} trials, cap 20000 duels (99.9% limit {limit})")
        for L in (2, 3, 4):
            for v in names:
                cost, rec, stop = run(equal_models(L), d, n, a.seed, GRID[v], max_steps=20_000)
                named = int((stop & (rec >= 0)).sum())
                print(f"L={L} {v:<24} named {named} ({named / n:.3f})", flush=True)
    if a.errors:
        d, n = 0.1, a.error_trials
        limit = int(binom.ppf(0.999, n, d))
        print(f"wrong verdicts at delta = {d}, {n} trials (99.9% limit {limit})")
        cases = [
            ("equal leaders", EQUAL_LEADERS, 3_000),
            ("cycle", CYCLE, 20_000),
            ("intransitive", INTRANSITIVE, 200_000),
            ("near-tie 0.53", NEAR_TIE, 200_000),
            ("tie-heavy", resolve_instance("genai-image-ties4"), 200_000),
        ]
        for label, inst, cap in cases:
            for v in names:
                cost, rec, stop = run(inst, d, n, a.seed, GRID[v], max_steps=cap)
                k = wrong_verdicts(inst, rec, stop)
                print(f"{label:<14} {v:<24} wrong {k} ({k / n:.3f}) no-CW {int((rec == -2).sum())}", flush=True)


if __name__ == "__main__":
    main()
