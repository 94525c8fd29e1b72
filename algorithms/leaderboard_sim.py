"""Simulated leaderboard campaigns (``goal: top_k`` / ``ranking``): dctas-pc's goal sampling against
the sampling a user would otherwise do, on one preference matrix with ties, same seeds.

Three ways to run one campaign (:func:`goal_campaign`):

``adaptive``
    dctas-pc with the goal (:meth:`algorithms.policies.PCPolicy._choose_goal`) and its certificate.
``uniform``
    every pair in turn (round robin), stopped by the same certificate: what uniform sampling costs
    for the same guarantee.
``uniform-ci``
    every pair in turn, stopped when each pair's 95% normal (Wald) interval, recomputed after every
    round, separates it from 1/2 as the goal needs: what a user does with the usual intervals (their
    level holds at one fixed sample size, not at a stopping time chosen by looking at them).

Duels draw their score from the instance's win and tie probabilities (1, 1/2, 0), as the
simulator does. A campaign that reaches ``cap`` duels reports what it certified so far.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from .leaderboard import GOAL_TOP_K, certified_tiers, claim_is_wrong, goal_reached, top_k_set
from .policies import PCPolicy, make_policy

__all__ = ["GoalRun", "goal_campaign", "SAMPLINGS", "top_k_is_wrong"]

SAMPLINGS = ("adaptive", "uniform", "uniform-ci")
WALD_Z = 1.959963984540054


@dataclass(frozen=True)
class GoalRun:
    duels: int
    cost: float
    ranking: list[list[int]]
    top_k: list[int] | None
    reached: str | None  # certified, undecidable, or None (stopped by the cap)
    wrong: bool  # the reported order (or top set) contradicts the instance


def top_k_is_wrong(P: np.ndarray, top: list[int]) -> bool:
    """A reported top set is wrong when a member does not beat (``p > 1/2``) every non-member."""
    rest = [v for v in range(P.shape[0]) if v not in top]
    return any(P[u, v] <= 0.5 for u in top for v in rest)


def _wald_beat(N: np.ndarray, W: np.ndarray, PI: np.ndarray, PJ: np.ndarray, L: int) -> np.ndarray:
    B = np.zeros((L, L), dtype=bool)
    for kk in range(len(N)):
        n = N[kk]
        if n < 2:
            continue
        m = W[kk] / n
        sd = math.sqrt(max(m * (1 - m), 1e-12) / n)
        if m - WALD_Z * sd > 0.5:
            B[PI[kk], PJ[kk]] = True
        elif m + WALD_Z * sd < 0.5:
            B[PJ[kk], PI[kk]] = True
    return B


def goal_campaign(
    P: np.ndarray,
    costs: np.ndarray,
    delta: float,
    goal: str,
    k: int | None,
    seed: int,
    sampling: str = "adaptive",
    ties: np.ndarray | None = None,
    cap: int = 20_000,
    judge_cost: float = 0.0,
) -> GoalRun:
    """One campaign to the goal's certificate or ``cap`` duels (module docstring)."""
    if sampling not in SAMPLINGS:
        raise ValueError(f"sampling must be one of {SAMPLINGS}")
    P = np.asarray(P, dtype=float)
    L = P.shape[0]
    T = np.zeros((L, L)) if ties is None else np.asarray(ties, dtype=float)
    rng = np.random.default_rng(seed)
    pol = make_policy("dctas-pc", list(costs), delta, goal=goal, k=k, judge_cost=judge_cost)
    assert isinstance(pol, PCPolicy)
    c = np.asarray(costs, dtype=float)
    PI, PJ = pol.PI, pol.PJ
    N = np.zeros(pol.K)
    W = np.zeros(pol.K)
    duels, cost, rr = 0, 0.0, 0
    beat = None
    reached = None
    while duels < cap:
        if sampling == "adaptive":
            i, j = pol.next_pair()
        else:
            kk = rr % pol.K
            rr += 1
            i, j = int(PI[kk]), int(PJ[kk])
        u = rng.random()
        s = 1.0 if u < P[i, j] - T[i, j] / 2 else (0.5 if u < P[i, j] + T[i, j] / 2 else 0.0)
        duels += 1
        cost += c[i] + c[j] + judge_cost
        if sampling == "uniform-ci":
            kk = int(pol.PK[i, j])
            N[kk] += 1
            W[kk] += s
            if rr % pol.K == 0:
                beat = _wald_beat(N, W, PI, PJ, L)
                reached = goal_reached(certified_tiers(beat), goal, k)
                if reached is not None:
                    break
            continue
        pol.record(i, j, s)
        if pol.stopped:
            break
    if sampling == "uniform-ci":
        tiers = certified_tiers(beat if beat is not None else np.zeros((L, L), dtype=bool))
    else:
        tiers = pol.tiers()
        reached = pol.goal_verdict
    ranking = [list(t.models) for t in tiers]
    top = top_k_set(tiers, k) if goal == GOAL_TOP_K and k is not None else None
    wrong = claim_is_wrong(P, ranking)
    return GoalRun(duels, cost, ranking, top, reached, wrong)
