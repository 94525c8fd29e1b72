"""Forecast of what a campaign costs before it certifies: the simulator run on
preference matrices drawn from a prior or from a pilot's posterior.

The true preference matrix is unknown before a campaign runs, and the cost to
certify depends on it (the gaps between the models above all). The forecast
draws ``trials`` matrices and runs the policy once on each with
:func:`algorithms.simulator.simulate` (the same kernels as the service's
policies, the judge's cost included), which gives a distribution of the cost and
of the number of duels, a probability of certifying within a budget and a duel
cap, and the oracle's lower bound ``c* log(1/(4 delta))`` on the drawn matrices.

Where the matrices come from:

* :func:`bradley_terry_draws` (the prior): strengths ``theta_i ~ N(0, spread^2)``,
  ``P_ij = 1 / (1 + exp(theta_j - theta_i))``. :data:`DEFAULT_SPREAD` = 0.5 is in the
  middle of what LMArena's categories give (the real-world instances of
  ``algorithms/research/instances``: strength standard deviations 0.17 (text, 5
  models) to 0.85 (genai-image, 6 models), docs/service.md, Forecast);
* :func:`posterior_draws` (a pilot): each pair's ``P_ij ~ Beta(1 + W_ij, 1 + W_ji)``
  given the duels counted so far (uniform prior, pairs independent);
* :func:`fixed_draws`: one known matrix (a simulated judge's).

Bounded: each trial stops at ``duel_cap`` duels (:func:`trial_duel_cap`) (it then counts as not certified:
its cost is a lower bound of the real one) and no new trial starts after
``time_limit_s`` seconds, so the answer may rest on fewer trials than asked.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass, field
from typing import Any, Callable, Sequence

import numpy as np

from .instance import Instance, condorcet_winner
from .oracle import solve_oracle
from .simulator import simulate

__all__ = [
    "DEFAULT_SPREAD",
    "DEFAULT_TRIALS",
    "DEFAULT_TRIAL_DUEL_CAP",
    "DEFAULT_TIME_LIMIT_S",
    "Forecast",
    "bradley_terry_draws",
    "posterior_draws",
    "fixed_draws",
    "run_forecast",
    "trial_duel_cap",
    "spread_summary",
]

DEFAULT_TRIALS = 200
DEFAULT_SPREAD = 0.5
DEFAULT_TRIAL_DUEL_CAP = 50_000
#: Pair-steps one trial may take (a step of dctas-pc scans every pair): caps the duels of a trial with many models.
TRIAL_PAIR_STEPS = 5_000_000
DEFAULT_TIME_LIMIT_S = 4.0
MAX_TRIALS = 1000


def bradley_terry_draws(L: int, spread: float, n: int, rng: np.random.Generator) -> np.ndarray:
    """``n`` matrices (n x L x L) of a Bradley-Terry model with ``N(0, spread^2)`` strengths."""
    if L < 2 or n < 1:
        raise ValueError("bradley_terry_draws needs L >= 2 and n >= 1")
    if not (math.isfinite(spread) and spread > 0):
        raise ValueError(f"spread must be a finite number > 0, got {spread!r}")
    theta = rng.normal(0.0, spread, size=(n, L))
    diff = theta[:, :, None] - theta[:, None, :]
    return _clip(1.0 / (1.0 + np.exp(-diff)))


def posterior_draws(wins: Any, counts: Any, n: int, rng: np.random.Generator) -> np.ndarray:
    """``n`` matrices with ``P_ij ~ Beta(1 + W_ij, 1 + W_ji)`` for each pair i < j (``W_ji = N_ij - W_ij``)."""
    W = np.asarray(wins, dtype=float)
    N = np.asarray(counts, dtype=float)
    L = W.shape[0]
    if W.shape != (L, L) or N.shape != (L, L) or L < 2:
        raise ValueError("wins and counts must be L x L matrices with L >= 2")
    out = np.full((n, L, L), 0.5)
    for i in range(L):
        for j in range(i + 1, L):
            a = 1.0 + max(0.0, W[i, j])
            b = 1.0 + max(0.0, N[i, j] - W[i, j])
            p = rng.beta(a, b, size=n)
            out[:, i, j] = p
            out[:, j, i] = 1.0 - p
    return _clip(out)


def fixed_draws(preference: Any, n: int) -> np.ndarray:
    """One known matrix, ``n`` times."""
    P = np.asarray(preference, dtype=float)
    return np.repeat(P[None, :, :], n, axis=0)


def _clip(P: np.ndarray) -> np.ndarray:
    """Entries kept off 0 and 1 (a duel that can never be won makes the statistics infinite), diagonal 1/2."""
    P = np.clip(P, 1e-6, 1 - 1e-6)
    idx = np.arange(P.shape[-1])
    P[..., idx, idx] = 0.5
    return P


def spread_summary(x: np.ndarray) -> dict[str, float]:
    """Mean, 10th percentile, median and 90th percentile."""
    if x.size == 0:
        return {"mean": math.nan, "p10": math.nan, "median": math.nan, "p90": math.nan}
    p10, med, p90 = np.quantile(x, [0.1, 0.5, 0.9])
    return {"mean": float(x.mean()), "p10": float(p10), "median": float(med), "p90": float(p90)}


def trial_duel_cap(L: int) -> int:
    """Duels one trial may take with ``L`` models: :data:`DEFAULT_TRIAL_DUEL_CAP`, fewer when the pairs are many.

    A step costs about one unit of work per pair, so the cap is
    ``min(DEFAULT_TRIAL_DUEL_CAP, TRIAL_PAIR_STEPS / (L (L - 1) / 2))``, at least 1000:
    50,000 duels up to 45 models' pairs, 2,480 at 64 models.
    """
    pairs = max(1, L * (L - 1) // 2)
    return max(1000, min(DEFAULT_TRIAL_DUEL_CAP, TRIAL_PAIR_STEPS // pairs))


@dataclass
class Forecast:
    """Per-trial results of :func:`run_forecast` (one trial per drawn matrix)."""

    algorithm: str
    delta: float
    costs: np.ndarray  # cost of each trial (models and judge)
    duels: np.ndarray  # duels of each trial
    certified: np.ndarray  # False: the trial hit duel_cap
    lower_bounds: list[float] = field(default_factory=list)  # c* log(1/(4 delta)) per matrix with a Condorcet winner
    requested: int = 0
    duel_cap: int = DEFAULT_TRIAL_DUEL_CAP
    timed_out: bool = False

    @property
    def trials(self) -> int:
        return int(self.costs.shape[0])

    def within(self, budget: float | None, max_duels: int | None) -> float | None:
        """The fraction of trials that certified within ``budget`` (USD) and ``max_duels``; None if neither is set."""
        if budget is None and max_duels is None:
            return None
        if self.trials == 0:
            return None
        ok = self.certified.copy()
        if budget is not None:
            ok &= self.costs <= budget
        if max_duels is not None:
            ok &= self.duels <= max_duels
        return float(ok.mean())

    def summary(self, budget: float | None = None, max_duels: int | None = None) -> dict[str, Any]:
        return {
            "trials": self.trials,
            "algorithm": self.algorithm,
            "delta": self.delta,
            "cost": spread_summary(self.costs),
            "duels": spread_summary(self.duels.astype(float)),
            "lower_bound": float(np.median(self.lower_bounds)) if self.lower_bounds else None,
            "within_budget": self.within(budget, max_duels),
            "unfinished": int((~self.certified).sum()),
            "duel_cap": self.duel_cap,
            "timed_out": self.timed_out,
        }


def run_forecast(
    matrices: np.ndarray,
    costs: Sequence[float],
    delta: float,
    algorithm: str = "dctas-pc",
    judge_cost: float = 0.0,
    seed: int = 0,
    duel_cap: int | None = None,
    time_limit_s: float = DEFAULT_TIME_LIMIT_S,
    clock: Callable[[], float] = time.perf_counter,
) -> Forecast:
    """One simulated campaign per matrix (in order) until all ran or ``time_limit_s`` passed.

    ``costs`` are the models' expected costs per query, ``judge_cost`` the judge's
    per duel (``c_J``); trial ``n`` uses simulator seed ``seed + n``; ``duel_cap``
    defaults to :func:`trial_duel_cap`.
    """
    n = int(matrices.shape[0])
    if n < 1 or n > MAX_TRIALS:
        raise ValueError(f"trials must be between 1 and {MAX_TRIALS}, got {n}")
    L = len(costs)
    duel_cap = trial_duel_cap(L) if duel_cap is None else int(duel_cap)
    names = [f"m{i}" for i in range(L)]
    start = clock()
    out_cost, out_duels, out_ok, bounds = [], [], [], []
    timed_out = False
    for k in range(n):
        if k > 0 and clock() - start > time_limit_s:
            timed_out = True
            break
        P = matrices[k]
        inst = Instance(names, list(costs), P, require_condorcet=False)
        res = simulate(inst, algorithm, delta, 1, seed=int(seed) + k, max_steps=int(duel_cap), judge_cost=judge_cost)
        out_cost.append(float(res.costs[0]))
        out_duels.append(int(res.pulls[0]))
        out_ok.append(bool(res.stopped[0]))
        if condorcet_winner(inst.preference) is not None:
            bounds.append(solve_oracle(inst, judge_cost=judge_cost).lower_bound(delta))
    return Forecast(
        algorithm=algorithm,
        delta=float(delta),
        costs=np.asarray(out_cost, dtype=float),
        duels=np.asarray(out_duels, dtype=np.int64),
        certified=np.asarray(out_ok, dtype=bool),
        lower_bounds=bounds,
        requested=n,
        duel_cap=int(duel_cap),
        timed_out=timed_out,
    )
