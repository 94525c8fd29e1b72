"""Simulated hybrid campaigns: human votes, an LLM judge model, and the same kernels as :class:`HybridPolicy`.

A :class:`JudgeModel` says how the judge's verdict relates to the human vote on the same
duel (``docs/algorithms.md``, *Hybrid: the simulator*):

1. the human vote: a tie with probability ``human_tie``, else a win of ``i`` with
   probability ``q_ij = (p_ij - human_tie / 2) / (1 - human_tie)``, so ``E[H] = p_ij``;
2. the judge: with probability ``position_bias`` it picks the answer shown first (a fair
   coin decides the order); else a tie with probability ``judge_tie``; else, when the
   human vote is decisive, the human's choice with probability ``agreement[i][j]`` (the
   other side otherwise), and when the human tied, a win of ``i`` with probability ``q_ij``.

:func:`calibrated_judge` is fitted to Zheng et al. (2023); :func:`adversarial_judge`
picks the human loser on 70% of duels where the human vote is decisive.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np
from numba import njit

from . import _kernels as kern
from .certificates import certificate_test
from .hybrid import (
    DEFAULT_FLOOR,
    DEFAULT_RATE,
    DEFAULT_TEST,
    N_,
    NH,
    HybridPolicy,
    hy_choose,
    hy_init_plugin,
    hy_pi,
    hy_pi_plugin,
    hy_record,
    hy_record_plugin,
)
from .instance import Instance
from .oracle import effective_costs
from .policies import PolicyError, make_policy, pair_index_arrays

__all__ = [
    "HUMAN_TIE",
    "JudgeModel",
    "adversarial_judge",
    "aipw_active_votes_ratio",
    "aipw_votes_ratio",
    "betting_votes_ratio",
    "judge_law",
    "calibrated_judge",
    "graded_judge",
    "hybrid_instance",
    "run_humans_only",
    "run_hybrid",
    "tie_rate_for",
]

# Zheng et al. 2023, "Judging LLM-as-a-judge", MT-bench expert votes: GPT-4 vs humans
# agree 66% (with ties) and 85% (without); humans among themselves 63% and 81%.
GPT4_AGREE_TIES, GPT4_AGREE_NO_TIES = 0.66, 0.85
HUMAN_AGREE_TIES, HUMAN_AGREE_NO_TIES = 0.63, 0.81


def tie_rate_for(with_ties: float, without_ties: float) -> float:
    """The tie rate ``tau`` (both voters, independently) that turns ``without_ties`` into ``with_ties``.

    Agreement counting ties as a third answer is ``tau^2 + (1 - tau)^2 a`` when the two
    voters tie independently with rate ``tau`` and agree with rate ``a`` when both are
    decisive; the smaller root of ``tau^2 + (1 - tau)^2 a = with_ties`` is returned.
    """
    a, w = float(without_ties), float(with_ties)
    A, B, C = 1.0 + a, -2.0 * a, a - w
    disc = B * B - 4.0 * A * C
    if disc < 0.0:
        raise ValueError("no tie rate reproduces these agreements")
    return (-B - math.sqrt(disc)) / (2.0 * A)


HUMAN_TIE = tie_rate_for(HUMAN_AGREE_TIES, HUMAN_AGREE_NO_TIES)


@dataclass(frozen=True)
class JudgeModel:
    """How the judge's verdict relates to the human vote (module docstring)."""

    agreement: Any  # scalar or L x L: P(judge = human | both decisive, no position pick)
    judge_tie: float = 0.0
    human_tie: float = 0.0
    position_bias: float = 0.0
    name: str = "judge"
    confident: float = 1.0  # share of decisive verdicts that are confident (score 0 or 1); the rest score 1/4 or 3/4
    agreement_confident: float = 1.0  # agreement of a confident verdict (used when confident < 1)

    def matrix(self, L: int) -> np.ndarray:
        a = np.asarray(self.agreement, dtype=float)
        A = np.full((L, L), float(a)) if a.ndim == 0 else a
        if A.shape != (L, L) or not np.all((A >= 0.0) & (A <= 1.0)):
            raise PolicyError(f"agreement must be a number or an {L} x {L} matrix in [0, 1]")
        cs, ac = float(self.confident), float(self.agreement_confident)
        if not (0.0 < cs <= 1.0 and 0.0 <= ac <= 1.0):
            raise PolicyError("confident must be in (0, 1] and agreement_confident in [0, 1]")
        if cs < 1.0:
            unsure = (A - cs * ac) / (1.0 - cs)
            if not np.all((unsure >= 0.0) & (unsure <= 1.0)):
                raise PolicyError(
                    "agreement_confident is too far from agreement: the unsure verdicts' agreement leaves [0, 1]"
                )
        return A


def calibrated_judge() -> JudgeModel:
    """GPT-4 on MT-bench (Zheng et al. 2023): 85% agreement when both are decisive, ties such that
    agreement counting ties is 66%; the same tie rate for humans fits their 63%/81% (see docs)."""
    tau = tie_rate_for(GPT4_AGREE_TIES, GPT4_AGREE_NO_TIES)
    return JudgeModel(GPT4_AGREE_NO_TIES, judge_tie=tau, human_tie=HUMAN_TIE, name="calibrated")


def adversarial_judge() -> JudgeModel:
    """Prefers the human loser on 70% of the duels where the human vote is decisive; never ties."""
    return JudgeModel(0.3, judge_tie=0.0, human_tie=HUMAN_TIE, name="adversarial")


def graded_judge() -> JudgeModel:
    """The calibrated judge with graded verdicts: 60% of its decisive verdicts are confident (score 0 or 1)
    and agree with the human 95% of the time, the rest are unsure (score 1/4 or 3/4) and agree 70%, so
    the agreement over decisive verdicts is the published 85%. The split is an assumption (see docs)."""
    tau = tie_rate_for(GPT4_AGREE_TIES, GPT4_AGREE_NO_TIES)
    return JudgeModel(
        GPT4_AGREE_NO_TIES, judge_tie=tau, human_tie=HUMAN_TIE, name="graded", confident=0.6, agreement_confident=0.95
    )


def hybrid_instance() -> Instance:
    """The benchmark's 4-model instance: a Condorcet winner, gaps 0.08 to 0.2, equal costs."""
    P = np.array(
        [
            [0.5, 0.58, 0.62, 0.70],
            [0.42, 0.5, 0.56, 0.62],
            [0.38, 0.44, 0.5, 0.57],
            [0.30, 0.38, 0.43, 0.5],
        ]
    )
    meta = {"provenance": {"source": "hand-made for benchmarks/bench_hybrid.py", "derivation": "docs/algorithms.md"}}
    return Instance(["m0", "m1", "m2", "m3"], [1.0, 1.0, 1.0, 1.0], P, meta)


@njit(cache=True)
def _seed(s):
    """Seed numba's random stream (the one :func:`_draw` and :func:`_uniform` use)."""
    np.random.seed(s)


@njit(cache=True)
def _uniform():
    return np.random.random()


@njit(cache=True)
def _draw(p, a, ht, jt, pb):
    """One duel: ``(H, J)`` per the module docstring (scores of the first arm of the pair)."""
    return _draw_graded(p, a, ht, jt, pb, 1.0, a)


@njit(cache=True)
def _draw_graded(p, a, ht, jt, pb, cs, ac):
    """:func:`_draw` with a graded judge: a decisive verdict is confident (score 0 or 1, agreement
    ``ac``) with probability ``cs``, else unsure (score 1/4 or 3/4, agreement ``(a - cs ac) / (1 - cs)``),
    so the agreement over decisive verdicts stays ``a``. ``cs = 1`` draws exactly what :func:`_draw` drew."""
    q = (p - 0.5 * ht) / (1.0 - ht)
    q = min(max(q, 0.0), 1.0)
    if np.random.random() < ht:
        H = 0.5
    else:
        H = 1.0 if np.random.random() < q else 0.0
    if np.random.random() < pb:
        return H, (1.0 if np.random.random() < 0.5 else 0.0)
    if np.random.random() < jt:
        return H, 0.5
    s = 0.5
    agree = a
    if cs < 1.0:
        if np.random.random() < cs:
            agree = ac
        else:
            s = 0.25
            agree = (a - cs * ac) / (1.0 - cs)
    if H == 0.5:
        win = 1.0 if np.random.random() < q else 0.0
    else:
        win = H if np.random.random() < agree else 1.0 - H
    return H, 0.5 + s * (2.0 * win - 1.0)


@njit(cache=True)
def _hybrid_trials(
    P,
    A,
    ht,
    jt,
    pb,
    cs,
    ac,
    c,
    rate,
    floor,
    active,
    pi_min,
    log_thr,
    seeds,
    max_duels,
    out,
    PI,
    PJ,
    PK,
    plugin,
    nstat,
    narrow,
    strata,
):
    L = P.shape[0]
    K = L * (L - 1) // 2
    for r in range(seeds.shape[0]):
        np.random.seed(seeds[r])
        ST = np.zeros((K, nstat))
        if plugin:
            hy_init_plugin(ST, rate, floor, active)
        T = np.zeros((L, L))
        G = np.zeros((L, L))
        S = np.zeros(L)
        AMAX = np.zeros(L)
        BEAT = np.zeros((L, L), dtype=np.bool_)
        CB = np.zeros(L, dtype=np.int64)
        CW = np.zeros(L, dtype=np.int64)
        alpha = np.zeros(K)
        v = -1
        t = 0
        while t < max_duels:
            k = hy_choose(ST[:, N_].copy(), ST, PI, PJ, PK, G, AMAX, c, BEAT, CB, alpha)
            i = PI[k]
            j = PJ[k]
            H, J = _draw_graded(P[i, j], A[i, j], ht, jt, pb, cs, ac)
            pi = rate
            if plugin:
                pi = hy_pi_plugin(k, J, rate, floor, active, ST)
            elif active:
                pi = hy_pi(k, J, rate, floor, ST)
            human = _uniform() < pi
            if plugin:
                hy_record_plugin(
                    k, J, H, human, pi, rate, floor, active, log_thr, ST, PI, PJ, c, T, G, S, AMAX, BEAT, CB, CW, narrow,
                    strata,
                )  # fmt: skip
            else:
                hy_record(k, J, H, human, pi, pi_min, log_thr, ST, PI, PJ, c, T, G, S, AMAX, BEAT, CB, CW)
            t += 1
            v = kern.pc_verdict(CB, CW)
            if v != -1:
                break
        out[r, 0] = v
        out[r, 1] = t
        out[r, 2] = ST[:, NH].sum()


@njit(cache=True)
def _humans_trials(P, ht, c, rule, c0, seeds, max_duels, out, PI, PJ, PK):
    """Humans-only dctas-pc (its kernels, the default mixture test) on the same human votes."""
    L = P.shape[0]
    K = L * (L - 1) // 2
    for r in range(seeds.shape[0]):
        np.random.seed(seeds[r])
        N = np.zeros(K)
        W = np.zeros(K)
        T = np.zeros((L, L))
        G = np.zeros((L, L))
        S = np.zeros(L)
        AMAX = np.zeros(L)
        BEAT = np.zeros((L, L), dtype=np.bool_)
        CB = np.zeros(L, dtype=np.int64)
        CW = np.zeros(L, dtype=np.int64)
        alpha = np.zeros(K)
        v = -1
        t = 0
        while t < max_duels:
            a = kern.pc_leader(CB, AMAX)
            k = kern.pc_choose(N.copy(), N.sum(), a, G, AMAX, c, PI, PJ, PK, BEAT, CB, alpha, 0.0, 0, 0.0)
            H, J = _draw(P[PI[k], PJ[k]], 1.0, ht, 0.0, 0.0)
            N[k] += 1.0
            W[k] += H
            kern.refresh_pair(k, N, W, PI, PJ, c, T, G, S, AMAX)
            kern.pc_update(k, N, W, PI, PJ, rule, c0, BEAT, CB, CW)
            t += 1
            v = kern.pc_verdict(CB, CW)
            if v != -1:
                break
        out[r, 0] = v
        out[r, 1] = t
        out[r, 2] = t


def _seeds(trials: int, seed: int) -> np.ndarray:
    if not isinstance(trials, (int, np.integer)) or trials < 1:
        raise PolicyError(f"trials must be a positive integer, got {trials!r}")
    return np.random.SeedSequence(int(seed)).generate_state(int(trials), dtype=np.uint32).astype(np.int64)


def run_humans_only_default(
    instance: Instance,
    delta: float,
    trials: int,
    seed: int = 0,
    *,
    human_tie: float = HUMAN_TIE,
    max_duels: int = 1_000_000,
) -> dict[str, Any]:
    """Humans-only dctas-pc with today's default certificate test, through the step-wise
    policy (:func:`algorithms.make_policy`), on the same model of human votes as
    :func:`run_humans_only` (its own random stream: same distribution, not the same draws)."""
    P = np.asarray(instance.preference, dtype=float)
    out = np.zeros((int(trials), 3))
    for r, s in enumerate(_seeds(trials, seed)):
        rng = np.random.default_rng(int(s))
        policy = make_policy("dctas-pc", list(instance.costs), float(delta))
        t = 0
        while not policy.should_stop() and t < max_duels:
            i, j = policy.next_pair()
            q = min(max((P[i, j] - 0.5 * human_tie) / (1.0 - human_tie), 0.0), 1.0)
            h = 0.5 if rng.random() < human_tie else (1.0 if rng.random() < q else 0.0)
            policy.record(i, j, h)
            t += 1
        if policy.should_stop():
            rec = policy.winner if policy.winner is not None else -2  # -2: "no Condorcet winner"
        else:
            rec = -1
        out[r] = (rec, t, t)
    return _tally(out, instance)


def _tally(out: np.ndarray, instance: Instance) -> dict[str, Any]:
    cw = instance.condorcet_winner
    rec = out[:, 0].astype(int)
    errors = (rec != cw) if cw is not None else (rec >= 0)
    return {
        "trials": int(out.shape[0]),
        "errors": int(errors.sum()),
        "error_rate": float(errors.mean()),
        "unfinished": int((rec == -1).sum()),
        "mean_duels": float(out[:, 1].mean()),
        "mean_human_votes": float(out[:, 2].mean()),
        "human_votes": out[:, 2].copy(),
    }


def run_hybrid(
    instance: Instance,
    judge: JudgeModel,
    delta: float,
    trials: int,
    seed: int = 0,
    *,
    human_rate: Any = DEFAULT_RATE,
    floor: float = DEFAULT_FLOOR,
    judge_cost: float = 0.0,
    human_fee: float = 1.0,
    max_duels: int = 1_000_000,
    level: str = "delta/L",
    test: str = DEFAULT_TEST,
    prior: str = "narrow",
    alloc: str = "strata",
) -> dict[str, Any]:
    """``trials`` hybrid campaigns (the kernels of :class:`algorithms.hybrid.HybridPolicy`).

    Returns ``trials``, ``errors``, ``error_rate``, ``unfinished``, ``mean_duels``,
    ``mean_human_votes`` and the per-trial ``human_votes`` array.
    """
    pol = HybridPolicy(
        [float(x) for x in instance.costs],
        delta,
        judge_cost=judge_cost,
        human_fee=human_fee,
        human_rate=human_rate,
        floor=floor,
        level=level,
        test=test,
        prior=prior,
        alloc=alloc,
    )
    L = instance.L
    out = np.zeros((int(trials), 3))
    _hybrid_trials(
        np.asarray(instance.preference, dtype=float), judge.matrix(L), float(judge.human_tie),
        float(judge.judge_tie), float(judge.position_bias), float(judge.confident),
        float(judge.agreement_confident), pol._c, float(pol.rate), float(pol.floor),
        pol.active, float(pol.pi_min), pol._log_thr, _seeds(trials, seed), int(max_duels), out,
        *pair_index_arrays(L), pol.plugin, pol.ST.shape[1], pol.narrow, pol.strata,
    )  # fmt: skip
    return _tally(out, instance)


def run_humans_only(
    instance: Instance,
    delta: float,
    trials: int,
    seed: int = 0,
    *,
    human_tie: float = HUMAN_TIE,
    max_duels: int = 1_000_000,
) -> dict[str, Any]:
    """``trials`` humans-only dctas-pc campaigns (default mixture certificates) on the same human-vote model."""
    rule, c0 = certificate_test("mixture", float(delta), instance.L)
    out = np.zeros((int(trials), 3))
    c = effective_costs(instance.costs, 0.0)
    _humans_trials(
        np.asarray(instance.preference, dtype=float), float(human_tie), c, rule, c0, _seeds(trials, seed),
        int(max_duels), out, *pair_index_arrays(instance.L),
    )  # fmt: skip
    return _tally(out, instance)


def judge_law(p: float, agreement: float, judge: JudgeModel) -> dict[tuple[float, float], float]:
    """The exact joint law of ``(H, J)`` that :func:`_draw_graded` samples for a pair with ``E[H] = p``."""
    ht, jt, pb = float(judge.human_tie), float(judge.judge_tie), float(judge.position_bias)
    cs, ac = float(judge.confident), float(judge.agreement_confident)
    q = min(max((p - 0.5 * ht) / (1.0 - ht), 0.0), 1.0)
    grades = (
        [(0.5, 1.0, agreement)] if cs >= 1.0 else [(0.5, cs, ac), (0.25, 1.0 - cs, (agreement - cs * ac) / (1.0 - cs))]
    )
    law: dict[tuple[float, float], float] = {}
    for H, pH in ((0.5, ht), (1.0, (1.0 - ht) * q), (0.0, (1.0 - ht) * (1.0 - q))):
        js = [(1.0, 0.5 * pb), (0.0, 0.5 * pb), (0.5, (1.0 - pb) * jt)]
        for s, share, a in grades:
            w = (1.0 - pb) * (1.0 - jt) * (1.0 if cs >= 1.0 else share)
            if H == 0.5:
                js += [(0.5 + s, w * q), (0.5 - s, w * (1.0 - q))]
            else:
                sign = 1.0 if H == 1.0 else -1.0
                js += [(0.5 + sign * s, w * a), (0.5 - sign * s, w * (1.0 - a))]
        for J, pJ in js:
            law[(H, J)] = law.get((H, J), 0.0) + pH * pJ
    return law


def aipw_votes_ratio(p: float, agreement: float, judge: JudgeModel, rate: float) -> float:
    """Human votes of the best judge-augmented estimate over humans alone, for one pair, as ``n`` grows.

    Among the unbiased per-duel estimates ``Y = f(J) + (H - f(J)) xi / pi`` with a fixed
    ``pi = rate`` (``f = 1/2 + lambda u`` is the hybrid's), the variance is smallest at
    ``f(J) = E[H | J]``: ``Var Y = E[Var(H | J)] / pi + Var(E[H | J])`` (augmented inverse-
    probability weighting; Robins, Rotnitzky and Zhao 1994 show no regular estimator from
    these data does better). A test on the mean needs human votes in proportion to
    ``pi Var Y``, so ``(E[Var(H | J)] + pi Var(E[H | J])) / Var(H)`` bounds the ratio the
    hybrid can reach on this pair with this judge, whatever its bets.
    """
    law = judge_law(p, agreement, judge)
    EH = sum(w * H for (H, _), w in law.items())
    VH = sum(w * (H - EH) ** 2 for (H, _), w in law.items())
    within = between = 0.0
    for J in {J for _, J in law}:
        wj = sum(w for (_, j), w in law.items() if j == J)
        if wj <= 0.0:
            continue
        m = sum(w * H for (H, j), w in law.items() if j == J) / wj
        within += sum(w * (H - m) ** 2 for (H, j), w in law.items() if j == J)
        between += wj * (m - EH) ** 2
    return (within + float(rate) * between) / VH


def _by_score(law: dict[tuple[float, float], float]) -> dict[float, tuple[float, float, float]]:
    """Per judge score ``J``: ``(P(J), E[H | J], sd(H | J))``."""
    out = {}
    for J in sorted({J for _, J in law}):
        wj = sum(w for (_, j), w in law.items() if j == J)
        if wj <= 0.0:
            continue
        m = sum(w * H for (H, j), w in law.items() if j == J) / wj
        v = sum(w * (H - m) ** 2 for (H, j), w in law.items() if j == J) / wj
        out[J] = (wj, m, math.sqrt(v))
    return out


def _active_pi(cells: dict[float, tuple[float, float, float]], rate: float) -> dict[float, float]:
    """``pi(J)`` proportional to ``sd(H | J)`` with mean ``rate`` (Zrnic and Candes 2024), at most 1."""
    es = sum(w * s for w, _, s in cells.values())
    return {J: min(1.0, rate * s / es) if es > 0 else rate for J, (_, _, s) in cells.items()}


def aipw_active_votes_ratio(p: float, agreement: float, judge: JudgeModel, rate: float) -> float:
    """:func:`aipw_votes_ratio` with ``pi(J)`` proportional to ``sd(H | J)`` at mean ``rate`` instead of a
    fixed ``pi``: ``E[pi] (E[sd(H | J)^2 / pi(J)] + Var(E[H | J])) / Var(H)``, which is
    ``((E sd)^2 + rate Var(E[H | J])) / Var(H)`` when no ``pi`` reaches 1 (the variance-optimal
    allocation for a mean ``rate``, by Cauchy-Schwarz)."""
    law = judge_law(p, agreement, judge)
    cells = _by_score(law)
    pi = _active_pi(cells, rate)
    EH = sum(w * m for w, m, _ in cells.values())
    VH = sum(w * (H - EH) ** 2 for (H, _), w in law.items())
    mean_pi = sum(w * pi[J] for J, (w, _, _) in cells.items())
    var_y = sum(w * (s * s / pi[J] + (m - EH) ** 2) for J, (w, m, s) in cells.items())
    return mean_pi * var_y / VH


def _growth(values: list[float], probs: list[float]) -> float:
    """``max_b E log(1 + b y)`` over the bets ``b >= 0`` that keep every factor positive."""
    from scipy.optimize import minimize_scalar

    y = np.asarray(values)
    w = np.asarray(probs)
    top = 1.0 / -y.min() if y.min() < 0.0 else 1e6
    res = minimize_scalar(
        lambda b: -float(np.sum(w * np.log1p(b * y))), bounds=(0.0, top * (1 - 1e-9)), method="bounded"
    )
    return max(-float(res.fun), 0.0)


def betting_votes_ratio(p: float, agreement: float, judge: JudgeModel, rate: float, active: bool = False) -> float:
    """Human votes of the best betting test on the AIPW estimate over the best betting test on the human
    score alone, for one pair with ``p > 1/2``: ``E[pi] g_H / g_Y``.

    ``g = max_b E log(1 + b (X - 1/2))`` is the growth rate of the best constant bet (the smallest
    expected sample size of a level-alpha test of ``E X <= 1/2`` is ``log(1/alpha) / g`` as alpha
    goes to 0, over the tests valid for every law on the observations' range); ``X`` is the human
    score for ``g_H`` and ``Y = f(J) + (H - f(J)) xi / pi(J)`` with the oracle ``f = E[H | J]`` for
    ``g_Y``, ``pi`` the fixed ``rate`` or (``active``) proportional to ``sd(H | J)`` at mean ``rate``.
    Below :func:`aipw_votes_ratio`'s variance bound is out of reach; this one counts the heavy tail
    of the inverse-probability weight, which a bet must survive (``1 + b (Y - 1/2) > 0`` when a
    confident judge is contradicted by a human asked with a small ``pi``)."""
    law = judge_law(p, agreement, judge)
    cells = _by_score(law)
    pi = _active_pi(cells, rate) if active else {J: float(rate) for J in cells}
    ys: list[float] = []
    ws: list[float] = []
    hs: dict[float, float] = {}
    for (H, J), w in law.items():
        if w <= 0.0 or J not in cells:
            continue
        m = cells[J][1]
        ys += [m - 0.5 + (H - m) / pi[J], m - 0.5]
        ws += [w * pi[J], w * (1.0 - pi[J])]
        hs[H] = hs.get(H, 0.0) + w
    g_h = _growth([h - 0.5 for h in hs], list(hs.values()))
    g_y = _growth(ys, ws)
    mean_pi = sum(w * pi[J] for J, (w, _, _) in cells.items())
    return mean_pi * g_h / g_y
