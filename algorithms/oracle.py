"""The oracle: lower bound and optimal allocations (paper, Theorem 1, Proposition 1, Lemma 2).

For an instance with Condorcet winner ``a*``, define for every ``m != a*``::

    g[m, n]   = d(p_mn, max(1/2, p_mn)) / (c_m + c_n + c_J) (zero unless m loses to n)
    alpha_m   = max_n g[m, n]                               (Theorem 1)
    Gamma_m   = argmax_n g[m, n]                            (ties within a tolerance)
    c*(nu)    = sum_{m != a*} 1 / alpha_m                   (lower-bound constant)
    w_m       = (1 / alpha_m) / c*                          (Proposition 1, cost fractions,
                                                             split evenly over Gamma_m)
    alpha_ij  = (w_ij / (c_i + c_j + c_J)) / sum_kl w_kl / (c_k + c_l + c_J)   (Lemma 2, pull fractions)

and ``E[J] >= c*(nu) log(1 / (4 delta))`` for every delta-PC algorithm.

``c_J >= 0`` is the judge's cost per duel, so a duel on ``(i, j)`` costs
``c_i + c_j + c_J``; ``c_J = 0`` is the paper's setting exactly. Since
``c_i + c_j + c_J = (c_i + c_J/2) + (c_j + c_J/2)``, the judge's cost is the
same as shifting every arm's cost by ``c_J / 2`` (:func:`effective_costs`), which
is how the policies and the simulator apply it.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Sequence

import numpy as np
import numpy.typing as npt

from .instance import Instance, InstanceError, condorcet_winner, validate_components
from .stats import empirical_preference, kl_bernoulli

__all__ = [
    "OracleResult",
    "effective_costs",
    "validate_judge_cost",
    "g_matrix",
    "solve_oracle",
    "lower_bound",
    "plugin_lower_bound",
    "PCResult",
    "solve_pc_oracle",
    "pc_lower_bound",
    "plugin_pc_lower_bound",
    "kl_delta",
    "half_divergence",
]

DEFAULT_RTOL = 1e-9


def validate_judge_cost(judge_cost: Any) -> float:
    """``c_J`` as a float; ValueError unless it is a finite number >= 0."""
    try:
        cj = float(judge_cost)
    except (TypeError, ValueError):
        raise ValueError(f"judge cost must be a number >= 0, got {judge_cost!r}") from None
    if not (math.isfinite(cj) and cj >= 0.0):
        raise ValueError(f"judge cost must be a finite number >= 0, got {cj!r}")
    return cj


def effective_costs(costs: Sequence[float] | np.ndarray, judge_cost: float = 0.0) -> np.ndarray:
    """Per-arm costs ``c_i + c_J / 2``: pair sums are then ``c_i + c_j + c_J`` (the cost of one duel)."""
    return np.asarray(costs, dtype=float) + validate_judge_cost(judge_cost) / 2.0


def half_divergence(P: np.ndarray, ties: np.ndarray | None = None) -> np.ndarray:
    """``D[m, n]``: the divergence from pair ``(m, n)``'s outcome law to the nearest law with ``p_mn >= 1/2``.

    Without ties, ``d(p_mn, 1/2)``. With tie probability ``tau`` (outcomes 1, 1/2, 0 with
    probabilities ``w, tau, l``), ``K_inf = (1 - tau) d(w / (1 - tau), 1/2)`` (the tie outcome
    carries no information about the sign; docs/algorithms.md). Zero where ``m`` does not lose.
    """
    P = np.clip(np.asarray(P, dtype=float), 0.0, 1.0)
    if ties is None:
        return np.where(P < 0.5, kl_bernoulli(P, 0.5), 0.0)
    T = np.asarray(ties, dtype=float)
    dec = 1.0 - T
    with np.errstate(divide="ignore", invalid="ignore"):
        q = np.clip(np.where(dec > 0, (P - T / 2.0) / np.where(dec > 0, dec, 1.0), 0.5), 0.0, 1.0)
    return np.where(P < 0.5, dec * kl_bernoulli(q, 0.5), 0.0)


def g_matrix(P: np.ndarray, costs: np.ndarray, judge_cost: float = 0.0, ties: np.ndarray | None = None) -> np.ndarray:
    """``g[m, n] = d(p_mn, max(1/2, p_mn)) / (c_m + c_n + c_J)``; zero on the diagonal and where m does not lose.

    With a tie matrix, ``d(p_mn, 1/2)`` is the tie-aware :func:`half_divergence`.
    """
    P = np.asarray(P, dtype=float)
    c = effective_costs(costs, judge_cost)
    D = half_divergence(P, ties)
    G = D / (c[:, None] + c[None, :])
    np.fill_diagonal(G, 0.0)
    return G


@dataclass(frozen=True)
class OracleResult:
    """Solution of the oracle problem for one instance.

    Attributes
    ----------
    winner : int
        The Condorcet winner ``a*``.
    alpha : ndarray of shape (L,)
        ``alpha_m`` for every arm (``inf`` at ``a*``).
    gamma : tuple of tuples
        ``Gamma_m`` for every arm (empty at ``a*``).
    c_star : float
        ``c*(nu) = sum_{m != a*} 1/alpha_m``.
    pairs : list of (i, j)
        Canonical pair order, ``i < j``.
    cost_fractions, pull_fractions : ndarray of shape (K,)
        ``w`` and ``alpha`` over ``pairs``.
    """

    winner: int
    alpha: np.ndarray
    gamma: tuple[tuple[int, ...], ...]
    c_star: float
    pairs: list[tuple[int, int]]
    cost_fractions: np.ndarray
    pull_fractions: np.ndarray

    def lower_bound(self, delta: float) -> float:
        """``c* log(1 / (4 delta))`` (Theorem 1); 0 when ``delta >= 1/4``."""
        if not (0 < delta < 1):
            raise ValueError(f"delta must be in (0, 1), got {delta!r}")
        return self.c_star * max(0.0, math.log(1.0 / (4.0 * delta)))


def solve_oracle(
    instance_or_P: Instance | Any,
    costs: Sequence[float] | None = None,
    *,
    rtol: float = DEFAULT_RTOL,
    judge_cost: float = 0.0,
    ties: Any = None,
) -> OracleResult:
    """Solve the oracle for an :class:`Instance`, or for a preference matrix and costs.

    ``rtol`` is the relative tolerance used to collect ``Gamma_m``: ``n`` is in
    ``Gamma_m`` when ``g[m, n] >= alpha_m (1 - rtol)``. Raises
    :class:`~algorithms.instance.InstanceError` when there is no Condorcet winner.
    ``judge_cost`` is ``c_J``, added to the cost of every duel. ``ties`` (a tie matrix; an
    :class:`Instance` brings its own) makes the divergences tie-aware (:func:`half_divergence`).
    """
    cj = validate_judge_cost(judge_cost)
    if isinstance(instance_or_P, Instance):
        P, c = instance_or_P.preference, instance_or_P.costs
        ties = instance_or_P.ties
        if costs is not None:
            c = np.asarray(costs, dtype=float)
    else:
        if costs is None:
            raise ValueError("solve_oracle(P, costs): costs are required with a matrix")
        L = np.asarray(instance_or_P).shape[0] if np.ndim(instance_or_P) == 2 else 0
        _, c, P = validate_components([f"arm{i}" for i in range(L)], costs, instance_or_P)
    L = P.shape[0]
    a = condorcet_winner(P)
    if a is None:
        raise InstanceError("the oracle needs a Condorcet winner; this preference matrix has none")
    G = g_matrix(P, c, cj, None if ties is None else np.asarray(ties, dtype=float))
    c = effective_costs(c, cj)
    alpha = np.full(L, np.inf)
    gamma: list[tuple[int, ...]] = []
    for m in range(L):
        if m == a:
            gamma.append(())
            continue
        alpha[m] = G[m].max()
        gamma.append(tuple(int(n) for n in np.flatnonzero((G[m] >= alpha[m] * (1 - rtol)) & (np.arange(L) != m))))
    inv = np.where(np.arange(L) == a, 0.0, 1.0 / alpha)
    c_star = float(inv.sum())
    pairs = [(i, j) for i in range(L) for j in range(i + 1, L)]
    index = {p: k for k, p in enumerate(pairs)}
    w = np.zeros(len(pairs))
    for m in range(L):
        if m == a:
            continue
        for n in gamma[m]:
            w[index[(min(m, n), max(m, n))]] += inv[m] / c_star / len(gamma[m])
    pc = np.array([c[i] + c[j] for i, j in pairs])
    pull = (w / pc) / np.sum(w / pc)
    return OracleResult(int(a), alpha, tuple(gamma), c_star, pairs, w, pull)


def lower_bound(instance: Instance, delta: float, judge_cost: float = 0.0) -> float:
    """``c*(nu) log(1/(4 delta))``: no delta-PC algorithm has a smaller expected cost (Theorem 1)."""
    return solve_oracle(instance, judge_cost=judge_cost).lower_bound(delta)


def plugin_lower_bound(
    wins: npt.ArrayLike, counts: npt.ArrayLike, costs: Sequence[float], delta: float, judge_cost: float = 0.0
) -> float | None:
    """The lower bound evaluated at the empirical matrix; None if the estimate has no Condorcet winner."""
    P = empirical_preference(wins, counts)
    if condorcet_winner(P) is None:
        return None
    try:
        return solve_oracle(P, costs, judge_cost=judge_cost).lower_bound(delta)
    except (InstanceError, ValueError):
        return None


# -- the pairwise-certificate yardstick c_pc* (docs/algorithms.md, "The right yardstick") --------------


def kl_delta(delta: float) -> float:
    """``kl(delta, 1 - delta)``: the right-hand side of the transportation inequality at error ``delta``."""
    if not (0 < delta < 1):
        raise ValueError(f"delta must be in (0, 1), got {delta!r}")
    # kl(delta, 1 - delta) = (1 - 2 delta) log((1 - delta) / delta), written so that tiny deltas stay finite
    return (1.0 - 2.0 * delta) * (math.log1p(-delta) - math.log(delta)) if delta < 0.5 else 0.0


@dataclass(frozen=True)
class PCResult:
    """The lower-bound constant of a rule whose answers are "arm a" or "no Condorcet winner".

    Attributes
    ----------
    winner : int or None
        The Condorcet winner, or None when the instance has none.
    c_pc : float
        ``c_pc*``: with a winner ``a``, ``sum_{m != a} (c_a + c_m + c_J) / d(p_am, 1/2)``; without one,
        ``1 / t*`` of the linear programme of :func:`solve_pc_oracle`.
    pair_costs : ndarray of shape (K,)
        The optimal cost fractions over the canonical pairs (they sum to 1).
    pairs : list of (i, j)
        Canonical pair order, ``i < j``.
    """

    winner: int | None
    c_pc: float
    pair_costs: np.ndarray
    pairs: list[tuple[int, int]]

    def lower_bound(self, delta: float) -> float:
        """``c_pc* log(1 / (4 delta))``: the same log term as :meth:`OracleResult.lower_bound`."""
        if not (0 < delta < 1):
            raise ValueError(f"delta must be in (0, 1), got {delta!r}")
        return self.c_pc * max(0.0, math.log(1.0 / (4.0 * delta)))

    def floor(self, delta: float) -> float:
        """``c_pc* kl(delta, 1 - delta)``: the sharper form of the bound (no delta-correct rule costs less)."""
        return self.c_pc * kl_delta(delta)


def _matrix_and_costs(instance_or_P: Instance | Any, costs: Sequence[float] | None) -> tuple[np.ndarray, np.ndarray]:
    if isinstance(instance_or_P, Instance):
        c = instance_or_P.costs if costs is None else np.asarray(costs, dtype=float)
        return instance_or_P.preference, c
    if costs is None:
        raise ValueError("solve_pc_oracle(P, costs): costs are required with a matrix")
    L = np.asarray(instance_or_P).shape[0] if np.ndim(instance_or_P) == 2 else 0
    _, c, P = validate_components([f"arm{i}" for i in range(L)], costs, instance_or_P)
    return P, c


def solve_pc_oracle(
    instance_or_P: Instance | Any, costs: Sequence[float] | None = None, *, judge_cost: float = 0.0, ties: Any = None
) -> PCResult:
    """``c_pc*`` for an :class:`Instance`, or for a preference matrix and costs.

    With a Condorcet winner ``a``, an alternative only needs one pair ``(a, m)`` moved to
    ``p_am <= 1/2``, so a pair's evidence ``N_am d(p_am, 1/2)`` must reach ``kl(delta, 1-delta)``
    for every ``m`` separately: ``c_pc* = sum_{m != a} (c_a + c_m + c_J) / d(p_am, 1/2)``.
    Without one, the answer "no Condorcet winner" is refuted by making any arm ``m`` beat every
    arm it does not beat, so ``c_pc* = 1 / t*`` with ``t* = max t`` such that
    ``sum_{k: p_mk <= 1/2} w_mk d(p_mk, 1/2) >= t`` for every ``m``, over cost fractions ``w >= 0``
    with ``sum w_ij = 1`` (``w_ij`` is the spend on pair ij, ``w_ij / (c_i + c_j + c_J)`` its duels).
    Infinite when a deciding pair sits exactly at 1/2. With ties (``ties``, or the instance's),
    ``d(p, 1/2)`` is the tie-aware :func:`half_divergence`.
    """
    cj = validate_judge_cost(judge_cost)
    P, c = _matrix_and_costs(instance_or_P, costs)
    if isinstance(instance_or_P, Instance):
        ties = instance_or_P.ties
    L = P.shape[0]
    ce = effective_costs(c, cj)
    pairs = [(i, j) for i in range(L) for j in range(i + 1, L)]
    index = {p: k for k, p in enumerate(pairs)}
    Tm = None if ties is None else np.asarray(ties, dtype=float)
    H = half_divergence(P, Tm)
    D = H + H.T  # d(p_mk, 1/2) on both sides of every pair
    a = condorcet_winner(P)
    w = np.zeros(len(pairs))
    if a is not None:
        terms = np.array([(ce[a] + ce[m]) / D[a, m] if D[a, m] > 0 else np.inf for m in range(L) if m != a])
        c_pc = float(terms.sum())
        if math.isfinite(c_pc):
            for t, m in zip(terms, (m for m in range(L) if m != a)):
                w[index[(min(a, m), max(a, m))]] = t / c_pc
        return PCResult(int(a), c_pc, w, pairs)
    return _no_winner_pc(P, ce, pairs, index, D)


def _no_winner_pc(
    P: np.ndarray, ce: np.ndarray, pairs: list[tuple[int, int]], index: dict[tuple[int, int], int], D: np.ndarray
) -> PCResult:
    """The linear programme of :func:`solve_pc_oracle` when no arm beats every other."""
    from scipy.optimize import linprog

    L, K = P.shape[0], len(pairs)
    # variables: w_0..w_{K-1}, t; maximise t
    A, b = [], []
    for m in range(L):
        row = np.zeros(K + 1)
        for k in range(L):
            if k != m and P[m, k] <= 0.5:
                i, j = min(m, k), max(m, k)
                row[index[(i, j)]] = -D[m, k] / (ce[i] + ce[j])
        row[K] = 1.0
        A.append(row)
        b.append(0.0)
    res = linprog(
        np.r_[np.zeros(K), -1.0],
        A_ub=np.array(A),
        b_ub=np.array(b),
        A_eq=np.r_[np.ones(K), 0.0][None, :],
        b_eq=[1.0],
        bounds=[(0, None)] * (K + 1),
        method="highs",
    )
    t = float(-res.fun) if res.success else 0.0
    if not t > 0:
        return PCResult(None, math.inf, np.zeros(K), pairs)
    return PCResult(None, 1.0 / t, np.asarray(res.x[:K], dtype=float), pairs)


def pc_lower_bound(instance: Instance, delta: float, judge_cost: float = 0.0) -> float:
    """``c_pc* log(1/(4 delta))``: the bound of a rule that may also answer "no Condorcet winner"."""
    return solve_pc_oracle(instance, judge_cost=judge_cost).lower_bound(delta)


def plugin_pc_lower_bound(
    wins: npt.ArrayLike, counts: npt.ArrayLike, costs: Sequence[float], delta: float, judge_cost: float = 0.0
) -> float | None:
    """:func:`pc_lower_bound` at the empirical matrix; None if the estimate has no Condorcet winner or the bound is infinite."""
    P = empirical_preference(wins, counts)
    if condorcet_winner(P) is None:
        return None
    try:
        lb = solve_pc_oracle(P, costs, judge_cost=judge_cost).lower_bound(delta)
    except (InstanceError, ValueError):
        return None
    return lb if math.isfinite(lb) else None
