"""Prompt-level instances and confidence sequences for answer and verdict reuse.

With answer reuse (one answer per model and prompt) and verdict reuse (one
verdict per judge, prompt, answer pair and order), the outcome of a duel
``(i, j)`` on prompt ``p`` is a fixed value ``v_ij(p)`` in ``{0, 1/2, 1}``
(both orders combined, a disagreement counts as a tie), and the preference the
certificates speak about is the mean over the campaign's ``P`` prompts::

    p_ij = (1/P) sum_p v_ij(p)                                          (R1)

This module holds the pure mathematics (no I/O): the instance (``PromptInstance``),
its prompt-set matrix and Condorcet winner, the cost bound "every answer once and
every pair judged once on every prompt", and the one-sided betting tests and
confidence sequences used by the simulator (:mod:`algorithms.prompt_sim`):

* with replacement (outcomes i.i.d. with mean ``mu``), the wealth of a bettor
  against ``H0: mu <= m``::

      K_t(m) = prod_{s<=t} (1 + lambda_s (X_s - m))                      (R2)

* without replacement from a population of ``N`` values with mean ``mu``
  (Waudby-Smith and Ramdas, 2020), the same bet against the mean of the values
  not yet drawn under ``mu = m``::

      m_s(m) = (N m - sum_{r<s} X_r) / (N - s + 1)                         (R3)
      K_t(m) = prod_{s<=t} (1 + lambda_s (X_s - m_s(m)))                   (R4)

  with a predictable bet ``0 <= lambda_s <= BET_CAP / m_s(m)``. ``H0`` is
  rejected at level ``alpha`` when ``K_t(m) >= 1/alpha`` (Ville's inequality);
  the deterministic bounds ``[S_t / N, (S_t + N - t) / N]`` are always added,
  so at ``t = N`` the sequence is the exact mean. docs/reuse.md gives the
  validity argument.

Values are stored in halves (``2 v`` in ``{0, 1, 2}``, ``int8``) so that
comparisons with ``1/2`` on the prompt set are exact integer comparisons.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Sequence

import numpy as np
from numba import njit

__all__ = [
    "BET_CAP",
    "PromptInstance",
    "bradley_terry_prompts",
    "bet_size",
    "log_wealth",
    "log_wealth_step",
    "cs_contains",
    "cs_bounds",
]

BET_CAP = 0.75  # lambda_s * m_s <= BET_CAP keeps every factor of (R2)/(R4) >= 1 - BET_CAP > 0


@dataclass(frozen=True)
class PromptInstance:
    """``L`` models with answer costs, a judge cost per call and a verdict table.

    ``halves[i, j, p] = 2 v_ij(p)`` in ``{0, 1, 2}`` with
    ``halves[j, i, p] = 2 - halves[i, j, p]`` and ``halves[i, i, p] = 1``.
    A verdict on pair ``(i, j)`` and prompt ``p`` costs ``2 * judge_cost``
    (both orders).
    """

    costs: np.ndarray
    judge_cost: float
    halves: np.ndarray

    @classmethod
    def from_table(cls, costs: Any, judge_cost: Any, table: Any) -> "PromptInstance":
        """Build from an explicit ``(L, L, P)`` table of ``v_ij(p)`` in ``{0, 1/2, 1}``.

        Raises ``ValueError`` with a message on a bad shape, a value outside
        ``{0, 1/2, 1}``, a table that is not antisymmetric (``v_ij + v_ji = 1``)
        or a negative or non-finite cost.
        """
        c = np.asarray(costs, dtype=float)
        if c.ndim != 1 or c.size < 2:
            raise ValueError(f"costs must be a 1-D sequence of at least 2 numbers, got shape {c.shape}")
        if not np.all(np.isfinite(c)) or np.any(c < 0):
            raise ValueError("costs must be finite and >= 0")
        cj = float(judge_cost)
        if not math.isfinite(cj) or cj < 0:
            raise ValueError(f"judge_cost must be finite and >= 0, got {judge_cost!r}")
        t = np.asarray(table, dtype=float)
        L = c.size
        if t.ndim != 3 or t.shape[0] != L or t.shape[1] != L or t.shape[2] < 1:
            raise ValueError(f"table must have shape (L, L, P) = ({L}, {L}, P >= 1), got {t.shape}")
        h = 2.0 * t
        if not np.all(np.isin(h, (0.0, 1.0, 2.0))):
            raise ValueError("table values must be 0, 1/2 or 1")
        if not np.array_equal(h + h.transpose(1, 0, 2), np.full_like(h, 2.0)):
            raise ValueError("table must satisfy v_ij(p) + v_ji(p) = 1 (v_ii(p) = 1/2)")
        return cls(costs=c, judge_cost=cj, halves=h.astype(np.int8))

    @property
    def n_models(self) -> int:
        return int(self.costs.size)

    @property
    def n_prompts(self) -> int:
        return int(self.halves.shape[2])

    def preference(self) -> np.ndarray:
        """The prompt-set matrix (R1): ``p_ij`` = mean over prompts of ``v_ij(p)``."""
        return self.halves.mean(axis=2) / 2.0

    def condorcet_winner(self) -> int | None:
        """The model ``m`` with ``p_mk > 1/2`` for every ``k != m`` on the prompt set, or None.

        Decided exactly on the integer table: ``sum_p 2 v_mk(p) > P``.
        """
        S = self.halves.sum(axis=2, dtype=np.int64)
        P = self.n_prompts
        for m in range(self.n_models):
            if all(S[m, k] > P for k in range(self.n_models) if k != m):
                return m
        return None

    def fresh_duel_cost(self, i: int, j: int) -> float:
        """Cost of a duel without reuse: two answers and two judge calls."""
        return float(self.costs[i] + self.costs[j] + 2.0 * self.judge_cost)

    def every_answer_once_bound(self) -> float:
        """Every answer generated once plus every pair judged once (both orders) on every prompt."""
        L, P = self.n_models, self.n_prompts
        return float(P * self.costs.sum() + L * (L - 1) / 2 * P * 2.0 * self.judge_cost)


def bradley_terry_prompts(
    theta: Sequence[float],
    n_prompts: int,
    *,
    costs: Sequence[float],
    judge_cost: float,
    prompt_sd: float = 1.0,
    tie_prob: float = 0.0,
    seed: int = 0,
) -> PromptInstance:
    """Draw a verdict table once from a per-prompt Bradley-Terry model.

    Model ``i`` has strength ``s_i(p) = theta_i + prompt_sd * z_ip`` on prompt ``p``
    (``z_ip`` standard normal). Each judge order is a tie with probability
    ``tie_prob``, otherwise ``i`` wins it with probability
    ``1 / (1 + exp(s_j(p) - s_i(p)))``. The two orders are combined into
    ``v_ij(p)``: 1 if ``i``'s order scores sum above 1, 0 if below, 1/2 otherwise
    (a split decision is a tie).
    """
    th = np.asarray(theta, dtype=float)
    if th.ndim != 1 or th.size < 2 or not np.all(np.isfinite(th)):
        raise ValueError("theta must be a 1-D sequence of at least 2 finite numbers")
    if int(n_prompts) != n_prompts or n_prompts < 1:
        raise ValueError(f"n_prompts must be a positive integer, got {n_prompts!r}")
    if not (prompt_sd >= 0 and math.isfinite(prompt_sd)):
        raise ValueError(f"prompt_sd must be finite and >= 0, got {prompt_sd!r}")
    if not 0.0 <= tie_prob < 1.0:
        raise ValueError(f"tie_prob must be in [0, 1), got {tie_prob!r}")
    L, P = th.size, int(n_prompts)
    rng = np.random.default_rng(seed)
    s = th[:, None] + prompt_sd * rng.standard_normal((L, P))
    table = np.full((L, L, P), 0.5)
    for i in range(L):
        for j in range(i + 1, L):
            pw = 1.0 / (1.0 + np.exp(s[j] - s[i]))
            score = np.zeros(P)
            for _order in range(2):
                tie = rng.random(P) < tie_prob
                win = rng.random(P) < pw
                score += np.where(tie, 0.5, win.astype(float))
            v = np.where(score > 1.0, 1.0, np.where(score < 1.0, 0.0, 0.5))
            table[i, j] = v
            table[j, i] = 1.0 - v
    return PromptInstance.from_table(costs, judge_cost, table)


@njit(cache=True)
def bet_size(n, s, sq, m_t):
    """Predictable bet for (R2)/(R4) from the bettor's own past only.

    ``n`` past values with sum ``s`` and sum of squares ``sq``; ``m_t`` the
    null mean of the next value. The bet approximates the growth-optimal
    ``(mu - m)/(sigma^2 + (mu - m)^2)`` with regularised plug-ins
    ``mu_hat = (1/2 + s)/(1 + n)`` and ``sigma2_hat = (1/4 + n var)/(1 + n)``,
    clipped to ``[0, BET_CAP / m_t]``.
    """
    mu = (0.5 + s) / (1.0 + n)
    var = 0.25
    if n > 0:
        v = sq - s * s / n
        if v < 0.0:
            v = 0.0
        var = (0.25 + v) / (1.0 + n)
    edge = mu - m_t
    if edge <= 0.0:
        return 0.0
    lam = edge / (var + edge * edge)
    top = BET_CAP / max(m_t, 1e-12)
    return lam if lam < top else top


@njit(cache=True)
def log_wealth_step(t, s, sq, x, N, m0):
    """``log`` of factor ``t + 1`` of (R2) (``N = 0``) or (R4) (``N > 0``): the one place the bet is applied.

    ``t`` values already drawn with sum ``s`` and sum of squares ``sq``, ``x`` the new
    value, ``m0`` the null mean. Without replacement the null mean of the next value
    is (R3) ``m_t = (N m0 - s) / (N - t)``. When ``m_t > 1`` no bet is made (the
    values left cannot average above 1, ``mu < m0`` is certain: returns 0); when
    ``m_t < 0`` the values drawn alone exceed ``N m0`` (``mu > m0`` is certain:
    returns ``inf``). Otherwise ``log1p(lambda (x - m_t))`` with the predictable bet
    :func:`bet_size` (0 when it does not bet). Used by :func:`log_wealth` and by
    dctas-pc without replacement (:func:`algorithms._kernels.pc_wor_bet`).
    """
    if N > 0:
        m_t = (N * m0 - s) / (N - t)
    else:
        m_t = m0
    if m_t > 1.0:
        return 0.0
    if m_t < 0.0:
        return np.inf
    lam = bet_size(t, s, sq, m_t)
    if lam > 0.0:
        return math.log1p(lam * (x - m_t))
    return 0.0


@njit(cache=True)
def _log_wealth(x, N, m0):
    T = x.size
    out = np.empty(T)
    lw = 0.0
    s = 0.0
    sq = 0.0
    for t in range(T):
        lw += log_wealth_step(t, s, sq, x[t], N, m0)
        out[t] = lw
        s += x[t]
        sq += x[t] * x[t]
    return out


def _as_values(x: Any) -> np.ndarray:
    a = np.asarray(x, dtype=float)
    if a.ndim != 1 or not np.all((a >= 0) & (a <= 1)):
        raise ValueError("values must be a 1-D sequence in [0, 1]")
    return a


def log_wealth(x: Any, m0: float, population: int | None = None) -> np.ndarray:
    """``log K_t(m0)`` for ``t = 1..len(x)``: (R2) if ``population`` is None, else (R4).

    Tests ``H0: mu <= m0`` against ``mu > m0`` for values ``x`` in ``[0, 1]`` drawn
    in order (i.i.d., or without replacement from ``population`` values).
    """
    a = _as_values(x)
    N = 0 if population is None else int(population)
    if population is not None and not (N >= a.size and N >= 1):
        raise ValueError("population must be at least the number of values drawn")
    return _log_wealth(a, N, float(m0))


def cs_contains(x: Any, mu: float, alpha: float, population: int | None = None) -> bool:
    """Whether the two-sided sequence at level ``alpha`` holds ``mu`` at every time.

    The sequence at time ``t`` is ``{m : max_{s<=t} K_s(m) < 2/alpha`` for the
    upper test on ``x`` and the lower test on ``1 - x``} intersected (without
    replacement) with the deterministic bounds, which always hold the true mean.
    """
    a = _as_values(x)
    thr = math.log(2.0 / alpha)
    up = log_wealth(a, mu, population)
    lo = log_wealth(1.0 - a, 1.0 - mu, population)
    return bool(up.max(initial=-np.inf) < thr and lo.max(initial=-np.inf) < thr)


def cs_bounds(x: Any, alpha: float, population: int | None = None, grid: int = 401) -> tuple[np.ndarray, np.ndarray]:
    """Lower and upper ends of the two-sided sequence at every time, on a grid of ``m`` (rounded outwards).

    Without replacement the ends are clipped to the deterministic bounds
    ``[S_t / N, (S_t + N - t) / N]``; at ``t = N`` both ends equal the exact mean.
    """
    a = _as_values(x)
    thr = math.log(2.0 / alpha)
    ms = np.linspace(0.0, 1.0, grid)
    T = a.size
    inside = np.ones((grid, T), dtype=bool)
    for g, m in enumerate(ms):
        up = np.maximum.accumulate(log_wealth(a, m, population))
        lo = np.maximum.accumulate(log_wealth(1.0 - a, 1.0 - m, population))
        inside[g] = (up < thr) & (lo < thr)
    lower = np.empty(T)
    upper = np.empty(T)
    S = np.cumsum(a)
    for t in range(T):
        idx = np.flatnonzero(inside[:, t])
        # rounded outwards to the neighbouring grid points
        lower[t] = ms[max(idx[0] - 1, 0)] if idx.size else 0.0
        upper[t] = ms[min(idx[-1] + 1, grid - 1)] if idx.size else 1.0
        if population is not None:
            N = int(population)
            lower[t] = max(lower[t], S[t] / N)
            upper[t] = min(upper[t], (S[t] + N - t - 1) / N)
            if lower[t] > upper[t]:  # grid coarser than the deterministic interval
                lower[t] = upper[t] = min(max(lower[t], S[t] / N), (S[t] + N - t - 1) / N)
    return lower, upper
