"""dctas-pc's certificate tests: the default (betting) against the mixture test and the paper's dctas.

    .venv/bin/python benchmarks/bench_certificates.py --part tests --trials 500 --jobs 2
    .venv/bin/python benchmarks/bench_certificates.py --part errors --error-trials 10000 --jobs 2
    .venv/bin/python benchmarks/bench_certificates.py --part explore --trials 200 --jobs 2
    .venv/bin/python benchmarks/bench_certificates.py --part dctas --trials 500 --jobs 2
    .venv/bin/python benchmarks/bench_certificates.py --part union --trials 500 --error-trials 600 --jobs 2 --json
    .venv/bin/python benchmarks/bench_certificates.py --part bets --trials 400 --json
    .venv/bin/python benchmarks/bench_certificates.py --part profile --trials 500 --jobs 2 --json
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
prints the figures as one JSON object. ``bets``: one pair alone, the default test's expected
number of duels to certify at level delta / L (L = 3, or ``--bet-divisor``; delta = 0.01) against a single constant
bet at the Kelly size for the true mean (an oracle no test has), an aGRAPA plug-in bet and an ONS
bet (Waudby-Smith and Ramdas 2024), same outcomes, in units of ``log(1/(4 delta)) / K_inf``.
``profile``: where the gap to c_pc* is, on synthetic k=4, k=19 and search at delta = 0.01: the
default's cost and its share spent on the Condorcet winner's pairs, the winner's pairs certified
each alone (the default mixture and the oracle Kelly bet, at the level delta / L and delta), the
portfolio option and the portfolio with its pool paid to the known winner before the first duel
(``bench_pooled.py``, variant ``known``: a reference that needs the answer).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import numpy as np  # noqa: E402
from scipy.stats import binom  # noqa: E402

import algorithms._kernels as kern  # noqa: E402
import algorithms.certificates as certificates  # noqa: E402
from algorithms import Instance, solve_oracle, solve_pc_oracle  # noqa: E402
from algorithms.instances import resolve_instance  # noqa: E402
from algorithms.simulator import simulate as _simulate  # noqa: E402

#: dctas-pc's certificate level for the runs that do not set one (``--level``; ``auto``: the default)
LEVEL = "auto"


def simulate(instance, algorithm, delta, trials, **kw):
    """:func:`algorithms.simulator.simulate` at ``--level`` for dctas-pc runs that do not name a level."""
    if algorithm == "dctas-pc":
        kw.setdefault("level", LEVEL)
    return _simulate(instance, algorithm, delta, trials, **kw)


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
UNION_COST = [
    ("synthetic:k=4", None),
    ("synthetic:k=19", None),
    ("search", None),
    ("intransitive-5", INTRANSITIVE5),
    ("text", None),
    ("image", None),
    ("genai-image-ties", None),
]
EQUAL_CAP = 20_000  # duels per trial on equal models (no certificate is due there, so trials end at the cap)


def near_tie_cycle(gap: float = 0.05) -> Instance:
    """Three models in a cycle at ``1/2 + gap`` over two models that lose to them at 0.7 and tie each other:
    no Condorcet winner, and each of the three can be named with one false certificate."""
    P = np.full((5, 5), 0.5)
    for i, j in ((0, 1), (1, 2), (2, 0)):
        P[i, j], P[j, i] = 0.5 + gap, 0.5 - gap
    P[:3, 3:], P[3:, :3] = 0.7, 0.3
    return Instance([f"m{i}" for i in range(5)], [1.0] * 5, P.tolist(), require_condorcet=False)


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
    """The certificate levels side by side: ``product`` (the default with replacement), ``delta/L`` and the
    former ``delta/(L-1)``; error on exactly equal models, cost / c_pc* on instances with a winner."""
    out: dict = {"equal_models": [], "cost": []}
    delta, n = 0.1, a.error_trials
    limit = int(binom.ppf(0.999, n, delta))
    print(f"equal models, delta = {delta}, {n} trials, cap {EQUAL_CAP} duels, seed {a.seed} (99.9% limit {limit})")
    print(f"{'L':>3} {'level':>12} {'named':>6} {'share':>7} {'no-CW':>6} {'<= limit':>8} {'sec':>5}", flush=True)
    for L in (2, 3, 4, 6):
        for level in ("product", "delta/L", "delta/(L-1)"):
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
    print(
        f"no Condorcet winner: a near-tie cycle at 0.55 over two models losing at 0.3, delta = {delta}, {a.trials} trials"
    )
    print(f"{'level':>12} {'named':>6} {'no-CW':>6} {'median duels':>12}", flush=True)
    out["no_winner"] = []
    for level in ("product", "delta/L"):
        r = simulate(
            near_tie_cycle(), "dctas-pc", delta, a.trials, seed=a.seed, jobs=a.jobs, max_steps=30_000, level=level
        )
        row = {
            "level": level,
            "trials": a.trials,
            "named": int((r.stopped & (r.recommended >= 0)).sum()),
            "no_condorcet_winner": int(r.no_condorcet_winner.sum()),
            "median_duels": float(np.median(r.pulls)),
        }
        out["no_winner"].append(row)
        print(f"{level:>12} {row['named']:>6} {row['no_condorcet_winner']:>6} {row['median_duels']:>12.0f}", flush=True)
    delta = 0.01
    print(f"cost / c_pc* at delta = {delta}, {a.trials} trials, seed {a.seed}, same seeds in every column")
    print(
        f"{'instance':<16} {'L':>3} {'product':>8} {'delta/L':>8} {'delta/(L-1)':>11} {'prod/dL':>8} {'dctas':>8} "
        f"{'pc/dctas':>8} {'errors':>10} {'sec':>5}",
        flush=True,
    )
    for name, inst in UNION_COST:
        inst = inst or resolve_instance(name)
        t0 = time.perf_counter()
        sims = {
            lv: simulate(inst, "dctas-pc", delta, a.trials, seed=a.seed, jobs=a.jobs, level=lv).summary()
            for lv in ("product", "delta/L", "delta/(L-1)")
        }
        new, mid, old = sims["product"], sims["delta/L"], sims["delta/(L-1)"]
        d = simulate(inst, "dctas", delta, a.trials, seed=a.seed, jobs=a.jobs).summary()
        row = {
            "instance": name,
            "L": inst.L,
            "trials": a.trials,
            "cost_over_c_pc": new["cost_over_pc_lower_bound"],
            "delta_over_l_cost_over_c_pc": mid["cost_over_pc_lower_bound"],
            "legacy_cost_over_c_pc": old["cost_over_pc_lower_bound"],
            "product_over_delta_over_l": new["mean_cost"] / mid["mean_cost"],
            "fix_cost_ratio": mid["mean_cost"] / old["mean_cost"],
            "dctas_cost_over_c_pc": d["mean_cost"] / new["pc_lower_bound"],
            "cost_over_dctas": new["mean_cost"] / d["mean_cost"],
            "errors": new["errors"],
            "delta_over_l_errors": mid["errors"],
            "legacy_errors": old["errors"],
            "dctas_errors": d["errors"],
        }
        out["cost"].append(row)
        print(
            f"{name:<16} {inst.L:>3} {row['cost_over_c_pc']:>8.3f} {row['delta_over_l_cost_over_c_pc']:>8.3f} "
            f"{row['legacy_cost_over_c_pc']:>11.3f} {row['product_over_delta_over_l']:>8.3f} "
            f"{row['dctas_cost_over_c_pc']:>8.3f} {row['cost_over_dctas']:>8.3f} "
            f"{new['errors']:>2}/{mid['errors']}/{old['errors']}/{d['errors']:<3} {time.perf_counter() - t0:>5.0f}",
            flush=True,
        )
    return out


def bt_chain(L: int, ratio: float = 1.15) -> Instance:
    """``L`` models with Bradley-Terry qualities ``ratio^-i``: model ``i`` beats ``i + 1`` with probability
    ``ratio / (1 + ratio)`` (0.535 at 1.15), equal costs."""
    q = ratio ** -np.arange(L, dtype=float)
    P = q[:, None] / (q[:, None] + q[None, :])
    np.fill_diagonal(P, 0.5)
    return Instance([f"m{i}" for i in range(L)], [1.0] * L, P.tolist())


def part_scale(a: argparse.Namespace) -> dict:
    """The product level against delta/L as the number of models grows (a Bradley-Terry chain)."""
    delta, out = 0.01, []
    print(f"Bradley-Terry chain (ratio 1.15), delta = {delta}, {a.trials} trials, seed {a.seed}, same seeds")
    print(f"{'L':>3} {'product':>9} {'delta/L':>9} {'ratio':>6} {'c/c_pc* product':>15} {'delta/L':>8} {'errors':>6}")
    for L in (4, 8, 16, 32):
        s = {
            lv: simulate(bt_chain(L), "dctas-pc", delta, a.trials, seed=a.seed, jobs=a.jobs, level=lv).summary()
            for lv in ("product", "delta/L")
        }
        p, d = s["product"], s["delta/L"]
        row = {
            "L": L,
            "trials": a.trials,
            "product_mean_cost": p["mean_cost"],
            "delta_over_l_mean_cost": d["mean_cost"],
            "ratio": p["mean_cost"] / d["mean_cost"],
            "product_cost_over_c_pc": p["cost_over_pc_lower_bound"],
            "delta_over_l_cost_over_c_pc": d["cost_over_pc_lower_bound"],
            "errors": [p["errors"], d["errors"]],
        }
        out.append(row)
        print(
            f"{L:>3} {row['product_mean_cost']:>9.0f} {row['delta_over_l_mean_cost']:>9.0f} {row['ratio']:>6.3f} "
            f"{row['product_cost_over_c_pc']:>15.3f} {row['delta_over_l_cost_over_c_pc']:>8.3f} "
            f"{p['errors']:>2}/{d['errors']}",
            flush=True,
        )
    return {"instances": out}


def _first_crossing(lw: np.ndarray, thr: float) -> np.ndarray:
    """Per row, the first duel (1-based) whose log-wealth reaches ``thr``; the row length if none."""
    hit = lw >= thr
    return np.where(hit.any(axis=1), hit.argmax(axis=1) + 1, lw.shape[1])


def part_bets(a: argparse.Namespace) -> dict:
    L, delta, n_max = a.bet_divisor, 0.01, 6000
    thr = float(np.log(L / delta))
    rng = np.random.default_rng(a.seed)
    lf = np.asarray(kern.PC_BET_LF)  # log(1 + mu_g (1/2 - y)) for y = 0, 1/4, .., 1
    lpi = np.asarray(kern.PC_BET_LPI)
    out = []
    print(
        f"one pair, level delta/L (L = {L:g}, delta = {delta}), {a.trials} trials, seed {a.seed}: E[duels] K_inf / log(1/(4 delta))"
    )
    print(f"{'win':>5} {'tie':>5} {'K_inf':>7} {'default':>8} {'oracle bet':>10} {'aGRAPA':>7} {'ONS':>6}", flush=True)
    for win, tie in ((0.45, 0.0), (0.40, 0.0), (0.35, 0.0), (0.25, 0.4)):
        # m's score: 1 with prob. win, 1/2 with prob. tie, else 0 (mean below 1/2: "m beaten" is true)
        u = rng.random((a.trials, n_max))
        y = np.where(u < win, 1.0, np.where(u < win + tie, 0.5, 0.0))
        lv = (4 * y).astype(int)
        # the default test: log sum_g pi_g prod_t (1 + mu_g (1/2 - y_t)), exactly the kernel's tables
        n_def = np.empty(a.trials, dtype=np.int64)
        for c0 in range(0, a.trials, 20):  # 20 trials at a time: 20 x n x G log-wealths
            cum = np.cumsum(lf[lv[c0 : c0 + 20]], axis=1) + lpi
            m = cum.max(axis=2)
            n_def[c0 : c0 + 20] = _first_crossing(m + np.log(np.exp(cum - m[..., None]).sum(axis=2)), thr)
        # the Kelly bet for the true law: argmax_mu E log(1 + mu (1/2 - y)), on a fine grid
        mus = np.linspace(0.0, 1.99, 2000)
        probs = {1.0: win, 0.5: tie, 0.0: 1 - win - tie}
        growth = sum(p * np.log1p(mus * (0.5 - v)) for v, p in probs.items())
        mu_star, k_inf = float(mus[growth.argmax()]), float(growth.max())
        n_orc = _first_crossing(np.cumsum(np.log1p(mu_star * (0.5 - y)), axis=1), thr)
        # aGRAPA: lambda_t = g / (v + g^2), g and v the running mean gap and variance of past scores
        lw_a = np.zeros(a.trials)
        n_ag = np.full(a.trials, n_max)
        s1 = np.full(a.trials, 0.5)
        s2 = np.full(a.trials, 0.25)
        for t in range(n_max):
            g = 0.5 - s1 / (t + 1)
            v = np.maximum(s2 / (t + 1) - (s1 / (t + 1)) ** 2, 1e-3)
            lam = np.clip(g / (v + g * g), 0.0, 1.8)
            lw_a += np.log1p(lam * (0.5 - y[:, t]))
            s1 += y[:, t]
            s2 += y[:, t] ** 2
            n_ag = np.where((lw_a >= thr) & (n_ag == n_max), t + 1, n_ag)
        # ONS (online Newton step, Cutkosky and Orabona 2018, as in Waudby-Smith and Ramdas 2024), in [0, 1.6]
        lw_o = np.zeros(a.trials)
        n_on = np.full(a.trials, n_max)
        lam_o = np.zeros(a.trials)
        acc = np.ones(a.trials)
        for t in range(n_max):
            u = 0.5 - y[:, t]
            lw_o += np.log1p(lam_o * u)
            n_on = np.where((lw_o >= thr) & (n_on == n_max), t + 1, n_on)
            grad = -u / (1 + lam_o * u)
            acc += grad * grad
            lam_o = np.clip(lam_o - 2 / (2 - np.log(3)) * grad / acc, 0.0, 1.6)
        unit = float(np.log(1 / (4 * delta))) / k_inf
        row = {
            "win": win,
            "tie": tie,
            "k_inf": k_inf,
            "default": float(n_def.mean()) / unit,
            "oracle_bet": float(n_orc.mean()) / unit,
            "agrapa": float(n_ag.mean()) / unit,
            "ons": float(n_on.mean()) / unit,
        }
        out.append(row)
        print(
            f"{win:>5} {tie:>5} {k_inf:>7.4f} {row['default']:>8.3f} {row['oracle_bet']:>10.3f} {row['agrapa']:>7.3f} "
            f"{row['ons']:>6.3f}",
            flush=True,
        )
    return {"pairs": out}


def _alone_duels(win: float, tie: float, thr: float, trials: int, rng: np.random.Generator, bets: str) -> float:
    """Mean duels for one pair alone to certify "m beaten" at log-wealth ``thr`` (and m behind), m's law (win, tie).

    ``bets``: ``"default"`` (the betting test's mixture, the kernel's tables) or ``"oracle"`` (one constant
    bet at the Kelly size of the true law). A trial that has not certified at ``cap`` duels counts as ``cap``.
    """
    mus = np.linspace(0.0, 1.99, 2000)
    growth = sum(q * np.log1p(mus * (0.5 - v)) for v, q in ((1.0, win), (0.5, tie), (0.0, 1.0 - win - tie)))
    if bets == "default":
        lf, lpi = np.asarray(kern.PC_BET_LF), np.asarray(kern.PC_BET_LPI)
    else:
        mu = float(mus[growth.argmax()])
        lf, lpi = np.log1p(mu * (0.5 - 0.25 * np.arange(5)))[:, None], np.zeros(1)
    cap = int(40 * thr / max(float(growth.max()), 1e-9)) + 1000
    total, block = 0.0, 1000
    for c0 in range(0, trials, 50):
        nt = min(50, trials - c0)
        lw = np.tile(lpi, (nt, 1))
        x = np.zeros(nt)
        hit = np.full(nt, cap, dtype=np.int64)
        n = 0
        while n < cap and (hit == cap).any():
            u = rng.random((nt, block))
            lv = np.where(u < win, 4, np.where(u < win + tie, 2, 0))
            cum = np.cumsum(lf[lv], axis=1) + lw[:, None, :]
            top = cum.max(axis=2)
            tot = top + np.log(np.exp(cum - top[..., None]).sum(axis=2))
            xs = x[:, None] + np.cumsum(lv / 4.0, axis=1)
            ns = n + np.arange(1, block + 1)
            ok = (tot >= thr) & (xs < ns / 2.0)
            first = np.where(ok.any(axis=1), ok.argmax(axis=1) + n + 1, cap)
            hit = np.where(hit == cap, np.minimum(first, cap), hit)
            lw, x, n = cum[:, -1, :], xs[:, -1], n + block
        total += float(hit.sum())
    return total / trials


def part_profile(a: argparse.Namespace) -> dict:
    """Where the gap to c_pc* comes from: sampling against the test, and the union against learning the leader."""
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    import bench_pooled  # noqa: PLC0415 (its kernels compile on import)

    delta = 0.01
    port = dict(bench_pooled.VARIANTS["portfolio (rho=0.1 z0=0.5 eta=1)"])
    rng = np.random.default_rng(a.seed)
    out = []
    print(f"where the gap is, delta = {delta}, {a.trials} trials, seed {a.seed}; cost / c_pc* log(1/(4 delta))")
    print(
        f"{'instance':<16} {'default':>8} {'winner share':>12} {'alone d/L':>9} {'Kelly d/L':>9} {'alone d':>8} "
        f"{'Kelly d':>8} {'portfolio':>9} {'known':>6} {'sec':>5}",
        flush=True,
    )
    for name in ("synthetic:k=4", "synthetic:k=19", "search"):
        t0 = time.perf_counter()
        inst = resolve_instance(name)
        L, cw, lb = inst.L, inst.condorcet_winner, solve_pc_oracle(inst).lower_bound(delta)
        r = simulate(inst, "dctas-pc", delta, a.trials, seed=a.seed, jobs=a.jobs)
        c = np.asarray(inst.costs, dtype=float)
        pairs = [(i, j) for i in range(L) for j in range(i + 1, L)]
        pair_cost = np.array([c[i] + c[j] for i, j in pairs])
        spend = r.pair_pulls * pair_cost
        on_cw = np.array([cw in pr for pr in pairs])
        P, TIE = np.asarray(inst.preference), inst.tie_matrix()
        alone = {}
        for key, thr, bets in (
            ("alone d/L", np.log(L / delta), "default"),
            ("Kelly d/L", np.log(L / delta), "oracle"),
            ("alone d", np.log(1 / delta), "default"),
            ("Kelly d", np.log(1 / delta), "oracle"),
        ):
            spent = 0.0
            for m in range(L):
                if m != cw:
                    tie = float(TIE[m, cw])
                    n = _alone_duels(float(P[m, cw]) - tie / 2, tie, float(thr), a.trials, rng, bets)
                    spent += (c[m] + c[cw]) * n
            alone[key] = spent / lb
        pc, _, _ = bench_pooled.run(inst, delta, a.trials, a.seed, port)
        kc, _, _ = bench_pooled.run(inst, delta, a.trials, a.seed, {**port, "known": cw})
        row = {
            "instance": name,
            "default": float(r.costs.mean() / lb),
            "winner_share": float(spend[:, on_cw].sum() / spend.sum()),
            **{k.replace(" ", "_").replace("/", ""): v for k, v in alone.items()},
            "portfolio": float(pc.mean() / lb),
            "portfolio_known_winner": float(kc.mean() / lb),
        }
        out.append(row)
        print(
            f"{name:<16} {row['default']:>8.3f} {row['winner_share']:>12.3f} "
            + " ".join(f"{alone[k]:>{max(8, len(k))}.3f}" for k in alone)
            + f" {row['portfolio']:>9.3f} {row['portfolio_known_winner']:>6.3f} {time.perf_counter() - t0:>5.0f}",
            flush=True,
        )
    return {"instances": out}


PARTS = {
    "union": part_union,
    "bets": part_bets,
    "tests": part_tests,
    "errors": part_errors,
    "explore": part_explore,
    "dctas": part_dctas,
    "profile": part_profile,
    "scale": part_scale,
}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--part", choices=[*PARTS, "all"], default="all")
    ap.add_argument("--trials", type=int, default=500)
    ap.add_argument("--error-trials", type=int, default=10_000)
    ap.add_argument("--jobs", type=int, default=1)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument(
        "--level",
        choices=["auto", *certificates.PC_LEVELS],
        default="auto",
        help="dctas-pc's certificate level where a part does not set one (default auto: the product level)",
    )
    ap.add_argument("--quick", action="store_true", help="50 trials, 1,000 error trials")
    ap.add_argument(
        "--bet-divisor", type=float, default=3.0, help="bets: the level's divisor L (delta / L; 1 for delta itself)"
    )
    ap.add_argument("--json", action="store_true", help="also print the figures of the parts that have them as JSON")
    a = ap.parse_args()
    global LEVEL
    LEVEL = a.level
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
