"""Human votes amplified by an LLM judge: the hybrid per-pair test and its step-wise policy.

What is certified is the **human** preference ``p_ij = E[H_ij]``. Every duel gets the
judge's score ``J`` in ``[0, 1]`` (the score of the first arm of the pair); a human
votes on it with probability ``pi_t``, chosen before the human vote is seen (from the
past and, for ``human_rate="active"``, from ``J``), with ``pi_t >= pi_min``. Writing
``u = J - 1/2``, ``h = H - 1/2`` and ``xi`` for "a human voted", each duel gives

.. math::  Y_t - 1/2 = \\lambda_t u_t + (h_t - \\lambda_t u_t)\\, \\xi_t / \\pi_t    \\qquad (H1)

with ``lambda_t`` in ``[-1, 1]`` computed from the pair's past duels only. Given the
past and ``J_t``, ``E[xi_t / pi_t] = 1``, so ``E[Y_t | past] = p_ij`` whatever the judge
does (prediction-powered inference, Angelopoulos et al. 2023; active inference, Zrnic
and Candes 2024). The range of (H1) (``docs/algorithms.md``, *Hybrid*) is

.. math::  |Y_t - 1/2| \\le M_t = \\tfrac12 \\big(1/\\pi_{min} + |\\lambda_t| (1/\\pi_{min} - 1)\\big)   \\qquad (H2)

and each pair runs two one-sided tests, mixtures of betting martingales (Waudby-Smith and
Ramdas 2024) on the normalised estimate ``z_t = (Y_t - 1/2) / (2 M_t)`` in ``[-1/2, 1/2]``:

.. math::  K^{\\pm}_n = \\sum_g w_g \\prod_{t \\le n} \\big(1 \\pm \\mu_g z_t\\big),
   \\quad \\mu_g = 1.8 \\cdot 0.8^g,\\ g < 24                                      \\qquad (H3)

``M_t`` uses the past only (``lambda_t`` and ``pi_min``, never ``J_t``), so every bet
is predictable and every factor is at least ``1 - 0.9 > 0``. Under ``p_ij <= 1/2`` each
product of ``K^+`` is a non-negative supermartingale, so ``K^+`` is one; Ville's
inequality bounds the chance it ever reaches ``L / delta`` by ``delta / L`` (``level``;
a stored state that names no level keeps ``delta / (L - 1)``, the level it was made with):
that issues the certificate "j is beaten by i" (and ``K^-`` "i is beaten by j"). The union
over the ``L`` models that could be named bounds every verdict's error by delta, exactly
equal models included (``docs/algorithms.md``, dctas-pc *Validity*). With
``pi = 1``, ``z`` is the human score minus 1/2, so a tie is a factor 1 for every bet, as
in dctas-pc's default ``betting`` test. The stopping rule, the sampling rule (with the
default test's near-tie cap and exploration) and the union bound are dctas-pc's
(:class:`algorithms.policies.PCPolicy`). ``lambda_t`` is the PPI++ power tuning (H4)
estimated on past duels of every pair; ``pi_t`` is fixed or active (H5).
"""

from __future__ import annotations

import math
from typing import Any, Iterable, Mapping, Sequence

import numpy as np
from numba import njit

from . import _kernels as kern
from .certificates import (
    PC_DEFAULTS,
    PC_LEGACY_LEVEL,
    certificate_log_level,
    explore_for,
    tie_cap_for,
    validate_pc_level,
)
from .oracle import effective_costs
from .policies import (
    NO_CONDORCET_WINNER,
    PolicyError,
    _validate_costs,
    _validate_delta,
    _validate_judge_cost,
    pair_index_arrays,
)
from .policies import policy_from_state as _plain_policy_from_state
from .restricted import RestrictedPolicy, is_restricted_state

__all__ = [
    "HYBRID",
    "HybridPolicy",
    "hy_lambda",
    "hy_pi",
    "hy_range",
    "hy_record",
    "hy_y",
    "hybrid_state_params",
    "policy_from_state",
]

HYBRID = "dctas-pc-hybrid"
DEFAULT_RATE = 0.2
DEFAULT_FLOOR = 0.1
HYBRID_STATE_VERSION = 2
# the mixture of bets (H3): component g bets mu_g = MU_MAX * MU_RATIO**g on z = (Y - 1/2) / (2 M)
MU_GRID = 24
MU_MAX = 1.8  # every betting factor is >= 1 - MU_MAX / 2 = 0.1
MU_RATIO = 0.8
MU_FOCUS = 0.98  # prior mass on the components g < MU_FOCUS_G (bets mu_g from MU_MAX down to 0.19)
MU_FOCUS_G = 11
POOL = 1.0  # weight of the other pairs' duels in a pair's lambda (H4)
# per-pair statistics, columns of the K x NSTAT array ``ST``; columns WG.. hold the log-wealth of
# each component, MU_GRID for "the first arm wins" (K+) then MU_GRID for "the second arm wins" (K-)
N_, WP, SY, SY2, LA, LB, NUM, DEN, RES, NH, SPI = range(11)
WG = 11
NSTAT = WG + 2 * MU_GRID


def _mu_tables():
    mu = np.array([MU_MAX * MU_RATIO**g for g in range(MU_GRID)])
    lpi = np.array(
        [
            math.log(MU_FOCUS / MU_FOCUS_G) if g < MU_FOCUS_G else math.log((1.0 - MU_FOCUS) / (MU_GRID - MU_FOCUS_G))
            for g in range(MU_GRID)
        ]
    )
    return mu, lpi


HY_MU, HY_LPI = _mu_tables()
# dctas-pc's sampling with its default (betting) test: bounded near-tie weight, half-rate exploration
TIE_CAP = tie_cap_for("betting")
EXPLORE, EXPLORE_FRAC = explore_for("betting")


@njit(cache=True)
def hy_lambda(num, den):
    """PPI++ power tuning (H4): ``lambda = num / (den + 1)`` clipped to ``[-1, 1]``.

    ``num = sum_{human} h u / pi`` and ``den = sum_{all} u^2`` over the pair's past duels
    estimate ``E[h u]`` and ``E[u^2]`` (inverse-probability weighting makes ``num``
    unbiased); with a fixed ``pi`` their ratio minimises the variance of (H1). The ``+ 1``
    shrinks it to 0 while data are few.
    """
    lam = num / (den + 1.0)
    if lam > 1.0:
        return 1.0
    if lam < -1.0:
        return -1.0
    return lam


@njit(cache=True)
def hy_pair_lambda(ST, k):
    """``lambda`` (H4) of pair ``k``: the pair's own sums plus ``POOL`` times the other pairs' sums.

    ``h u`` and ``u^2`` do not change sign when a pair's arms swap, so the sums of every
    pair estimate the same judge-human covariance when the judge is equally good on
    every pair; the pair's own sums keep it pair-specific as they grow.
    """
    num = (1.0 - POOL) * ST[k, NUM] + POOL * ST[:, NUM].sum()
    den = (1.0 - POOL) * ST[k, DEN] + POOL * ST[:, DEN].sum()
    return hy_lambda(num, den)


@njit(cache=True)
def hy_range(lam, pi_min):
    """``M`` of (H2): the bound on ``|Y - 1/2|`` for any ``J, H`` in ``[0, 1]`` and ``pi >= pi_min``."""
    inv = 1.0 / pi_min
    return 0.5 * (inv + abs(lam) * (inv - 1.0))


@njit(cache=True)
def hy_y(lam, J, H, human, pi):
    """``Y - 1/2`` of (H1): ``lam u + (h - lam u) xi / pi`` with ``u = J - 1/2``, ``h = H - 1/2``."""
    u = J - 0.5
    y = lam * u
    if human:
        y += (H - 0.5 - lam * u) / pi
    return y


@njit(cache=True)
def hy_pi(k, J, rate, floor, ST):
    """Active human probability (H5) for a duel of pair ``k`` with judge score ``J``.

    ``pi = clip(rate sqrt(rho / 0.125), floor, 1)`` with ``rho = r_k (1/2 + 1 - |2J - 1|)``,
    ``r_k`` the pair's inverse-probability-weighted mean squared residual ``(h - lambda u)^2``
    (prior 1/4 with weight one duel): more human votes where the judge has disagreed with
    humans so far and where its own score is uncertain (Zrnic and Candes 2024: the variance-
    optimal ``pi`` is proportional to the root of the conditional residual). A fixed rate is
    ``floor = rate``, handled by the caller.
    """
    r = (0.25 + ST[k, RES]) / (1.0 + ST[k, N_])
    rho = r * (1.5 - abs(2.0 * J - 1.0))
    p = rate * math.sqrt(rho / 0.125)
    if p < floor:
        return floor
    if p > 1.0:
        return 1.0
    return p


@njit(cache=True)
def hy_log_mix(ST, k, col):
    """``log sum_g pi_g exp(ST[k, col + g])``: the log-wealth of the mixture (H3) of one side of pair ``k``."""
    best = -1e300
    for g in range(MU_GRID):
        v = HY_LPI[g] + ST[k, col + g]
        if v > best:
            best = v
    s = 0.0
    for g in range(MU_GRID):
        s += math.exp(HY_LPI[g] + ST[k, col + g] - best)
    return best + math.log(s)


@njit(cache=True)
def hy_record(k, J, H, human, pi, pi_min, log_thr, ST, PI, PJ, c, T, G, S, AMAX, BEAT, CB, CW):
    """Record one duel of pair ``k``: judge score ``J``, human score ``H`` (used when ``human``), ``pi``.

    ``lambda`` (H4) and the range ``M`` (H2) from the pair's past, then ``Y`` (H1), the
    normalised ``z = (Y - 1/2) / (2 M)`` in ``[-1/2, 1/2]``, every component's two
    log-wealths (H3), the certificates at ``log_thr = log(L / delta)`` (the policy's level), and the
    plug-in statistics the allocation of :func:`algorithms._kernels.pc_choose` reads.
    """
    n = ST[k, N_]
    lam = hy_pair_lambda(ST, k)
    M = hy_range(lam, pi_min)
    u = J - 0.5
    y = hy_y(lam, J, H, human, pi)
    z = y / (2.0 * M)
    if human:
        h = H - 0.5
        r = h - lam * u
        ST[k, NUM] += h * u / pi
        ST[k, RES] += r * r / pi
        ST[k, NH] += 1.0
    ST[k, DEN] += u * u
    if z != 0.0:
        for g in range(MU_GRID):
            ST[k, WG + g] += math.log1p(HY_MU[g] * z)
            ST[k, WG + MU_GRID + g] += math.log1p(-HY_MU[g] * z)
    ST[k, LA] = hy_log_mix(ST, k, WG)
    ST[k, LB] = hy_log_mix(ST, k, WG + MU_GRID)
    ST[k, N_] = n + 1.0
    ST[k, SY] += y
    ST[k, SY2] += y * y
    ST[k, SPI] += pi
    m = 0.5 + ST[k, SY] / (n + 1.0)
    ST[k, WP] = (n + 1.0) * min(max(m, 0.0), 1.0)
    i = PI[k]
    j = PJ[k]
    if ST[k, LA] >= log_thr and not BEAT[i, j]:
        kern.pc_set(i, j, BEAT, CB, CW)
    if ST[k, LB] >= log_thr and not BEAT[j, i]:
        kern.pc_set(j, i, BEAT, CB, CW)
    kern.refresh_pair(k, ST[:, N_], ST[:, WP], PI, PJ, c, T, G, S, AMAX)


@njit(cache=True)
def hy_choose(NEFF, ST, PI, PJ, PK, G, AMAX, c, BEAT, CB, alpha):
    """dctas-pc's pair choice (:func:`algorithms._kernels.pc_choose`) on the hybrid plug-in means."""
    a = kern.pc_leader(CB, AMAX)
    return kern.pc_choose(NEFF, NEFF.sum(), a, G, AMAX, c, PI, PJ, PK, BEAT, CB, alpha, TIE_CAP, EXPLORE, EXPLORE_FRAC)


def _unit(x: Any, what: str) -> float:
    try:
        v = float(x)
    except (TypeError, ValueError):
        raise PolicyError(f"{what} must be a number in [0, 1], got {x!r}") from None
    if not (0.0 <= v <= 1.0):
        raise PolicyError(f"{what} must be in [0, 1], got {v!r}")
    return v


def _validate_rate(rate: Any, floor: Any) -> tuple[float | str, float]:
    try:
        fl = float(floor)
    except (TypeError, ValueError):
        raise PolicyError(f"floor must be a number in (0, 1], got {floor!r}") from None
    if not (0.0 < fl <= 1.0):
        raise PolicyError(f"floor must be in (0, 1], got {floor!r}")
    if rate == "active":
        return "active", fl
    if isinstance(rate, bool):
        raise PolicyError(f"human_rate must be a number in (0, 1] or 'active', got {rate!r}")
    try:
        r = float(rate)
    except (TypeError, ValueError):
        raise PolicyError(f"human_rate must be a number in (0, 1] or 'active', got {rate!r}") from None
    if not (0.0 < r <= 1.0):
        raise PolicyError(f"human_rate must be in (0, 1] or 'active', got {rate!r}")
    if not math.isfinite(1.0 / r):  # a subnormal rate: the range (H2) overflows and the test turns NaN
        raise PolicyError(f"human_rate {rate!r} is too small: the range 1/human_rate of (H2) overflows")
    return r, fl


class HybridPolicy:
    """dctas-pc with an LLM judge on every duel and human votes on a random fraction.

    Parameters
    ----------
    costs : per-arm cost of one answer.
    delta : error probability of the certified winner (of the human preference).
    judge_cost : cost of one judge verdict (every duel).
    human_fee : fee of one human vote.
    human_rate : ``pi`` in ``(0, 1]`` for a fixed rate, or ``"active"`` (H5).
    floor : the smallest ``pi`` the active rule may use (bounds the range (H2)); ignored
        for a fixed rate, whose ``pi_min`` is the rate.
    level : each certificate's error level, ``"delta/L"`` (default: every verdict is wrong with
        probability at most delta) or ``"delta/(L-1)"`` (states stored before that default).

    Use: ``i, j = p.next_pair(pending)``; ``pi = p.human_probability(i, j, J)``; ask a
    human with probability ``pi``; ``p.record(i, j, J, H or None, pi)``. The allocation is
    dctas-pc's with the cost of a duel ``c_i + c_j + judge_cost + human_fee * rate``.
    """

    name = HYBRID
    stopping_rule = "certificates"

    def __init__(
        self,
        costs: Sequence[float],
        delta: float,
        *,
        judge_cost: Any = 0.0,
        human_fee: Any = 1.0,
        human_rate: Any = DEFAULT_RATE,
        floor: Any = DEFAULT_FLOOR,
        level: str = PC_DEFAULTS["level"],
    ) -> None:
        self.costs = _validate_costs(costs)
        self.delta = _validate_delta(delta)
        self.judge_cost = _validate_judge_cost(judge_cost)
        try:
            self.human_fee = _validate_judge_cost(human_fee)
        except PolicyError:
            raise PolicyError(f"human_fee must be a finite number >= 0, got {human_fee!r}") from None
        self.human_rate, self.floor = _validate_rate(human_rate, floor)
        try:
            self.level = validate_pc_level(level)
        except ValueError as exc:
            raise PolicyError(str(exc)) from None
        self.active = self.human_rate == "active"
        self.pi_min = self.floor if self.active else float(self.human_rate)
        self.rate = DEFAULT_RATE if self.active else float(self.human_rate)
        if self.active:
            self.rate = max(self.floor, DEFAULT_RATE)
        self.L = int(self.costs.shape[0])
        self.K = self.L * (self.L - 1) // 2
        self.PI, self.PJ, self.PK = pair_index_arrays(self.L)
        # the expected cost of a duel: both answers, the judge, and the human fee times the rate
        self._c = effective_costs(self.costs, self.judge_cost + self.human_fee * self.rate)
        self.ST = np.zeros((self.K, NSTAT))
        self._T = np.zeros((self.L, self.L))
        self._G = np.zeros((self.L, self.L))
        self._S = np.zeros(self.L)
        self._AMAX = np.zeros(self.L)
        self.BEAT = np.zeros((self.L, self.L), dtype=np.bool_)
        self._CB = np.zeros(self.L, dtype=np.int64)
        self._CW = np.zeros(self.L, dtype=np.int64)
        self._alpha = np.zeros(self.K)
        self._log_thr = certificate_log_level(self.delta, self.L, self.level)
        self.stopped = False
        self.winner: int | None = None
        self.stop_t: int | None = None
        self.verdict: str | None = None

    # ---------------------------------------------------------------- helpers
    def pair_index(self, i: int, j: int) -> int:
        for v in (i, j):
            if not isinstance(v, (int, np.integer)) or isinstance(v, bool) or not (0 <= v < self.L):
                raise PolicyError(f"arm index must be an integer in [0, {self.L - 1}], got {v!r}")
        if i == j:
            raise PolicyError(f"a duel needs two different arms, got ({i}, {j})")
        return int(self.PK[i, j])

    @property
    def t(self) -> int:
        return int(self.ST[:, N_].sum())

    @property
    def human_votes(self) -> int:
        return int(self.ST[:, NH].sum())

    # ---------------------------------------------------------------- interface
    def next_pair(self, pending: Iterable[Sequence[int]] = ()) -> tuple[int, int]:
        """The pair to duel next, counting ``pending`` duels as pulled (dctas-pc's rule)."""
        neff = self.ST[:, N_].copy()
        for p in pending:
            if len(p) != 2:
                raise PolicyError(f"a pending duel is a pair of arm indices, got {p!r}")
            neff[self.pair_index(int(p[0]), int(p[1]))] += 1.0
        k = int(
            hy_choose(
                neff, self.ST, self.PI, self.PJ, self.PK, self._G, self._AMAX, self._c, self.BEAT, self._CB, self._alpha
            )
        )
        return int(self.PI[k]), int(self.PJ[k])

    def human_probability(self, i: int, j: int, judge_score: Any) -> float:
        """``pi`` for this duel: the fixed rate, or the active rule (H5) from the judge's score of ``i``."""
        k = self.pair_index(i, j)
        J = _unit(judge_score, "judge_score")
        if not self.active:
            return float(self.human_rate)
        if i > j:
            J = 1.0 - J
        return float(hy_pi(k, J, self.rate, self.floor, self.ST))

    def record(self, i: int, j: int, judge_score: Any, human_score: Any, pi: Any) -> None:
        """Record a duel: the judge's score of ``i``, the human's score of ``i`` and the probability
        ``pi`` (``pi_min <= pi <= 1``) with which a human was asked. ``human_score`` is None
        exactly when the coin said "no human": the estimate (H1) is unbiased only if every
        asked human's vote is recorded."""
        k = self.pair_index(i, j)
        J = _unit(judge_score, "judge_score")
        human = human_score is not None
        H = _unit(human_score, "human_score") if human else 0.5
        try:
            p = float(pi)
        except (TypeError, ValueError):
            raise PolicyError(f"pi must be a number in [{self.pi_min}, 1], got {pi!r}") from None
        if not (self.pi_min <= p <= 1.0):
            raise PolicyError(
                f"pi must be in [{self.pi_min}, 1] (the smallest human probability this test's range allows), got {pi!r}"
            )
        if i > j:
            J, H = 1.0 - J, 1.0 - H
        hy_record(
            k, J, H, human, p, self.pi_min, self._log_thr, self.ST, self.PI, self.PJ, self._c,
            self._T, self._G, self._S, self._AMAX, self.BEAT, self._CB, self._CW,
        )  # fmt: skip
        if not self.stopped:
            v = int(kern.pc_verdict(self._CB, self._CW))
            if v >= 0:
                self.stopped, self.winner, self.stop_t = True, v, self.t
            elif v == -2:
                self.stopped, self.stop_t, self.verdict = True, self.t, NO_CONDORCET_WINNER

    def should_stop(self) -> bool:
        return self.stopped

    def leader(self) -> int:
        a = int(kern.pc_leader(self._CB, self._AMAX))
        return a if a >= 0 else int(kern.leader_and_Z(self._S)[0])

    def recommendation(self) -> int:
        """The certified winner once stopped, else the current leader."""
        return self.winner if self.winner is not None else self.leader()

    def lambdas(self) -> list[float]:
        """The current ``lambda`` (H4) of each pair, canonical pair order."""
        return [float(hy_pair_lambda(self.ST, k)) for k in range(self.K)]

    def summary(self) -> dict[str, Any]:
        """JSON-safe snapshot: duels and human votes per pair, estimates, wealth, certificates."""
        n = self.ST[:, N_]
        est = [float(0.5 + self.ST[k, SY] / n[k]) if n[k] > 0 else None for k in range(self.K)]
        return {
            "algorithm": self.name,
            "stopping_rule": self.stopping_rule,
            "t": self.t,
            "human_votes": self.human_votes,
            "pairs": [[int(a), int(b)] for a, b in zip(self.PI, self.PJ)],
            "duels": [int(x) for x in n],
            "pair_human_votes": [int(x) for x in self.ST[:, NH]],
            "estimate": est,
            "lambda": self.lambdas(),
            "log_wealth": [[float(self.ST[k, LA]), float(self.ST[k, LB])] for k in range(self.K)],
            "log_threshold": self._log_thr,
            "certificates": np.argwhere(self.BEAT).tolist(),
            "leader": self.leader(),
            "stopped": self.stopped,
            "winner": self.winner,
            "verdict": self.verdict if self.verdict else ("winner" if self.stopped else None),
            "stop_t": self.stop_t,
        }

    # ---------------------------------------------------------------- state
    def params(self) -> dict[str, Any]:
        out = {
            "judge_cost": self.judge_cost,
            "human_fee": self.human_fee,
            "human_rate": self.human_rate,
            "floor": self.floor,
        }
        if self.level != PC_LEGACY_LEVEL:  # a state without "level" was made at delta / (L - 1)
            out["level"] = self.level
        return out

    def to_state(self) -> dict[str, Any]:
        """JSON-safe state; :func:`policy_from_state` continues with identical decisions."""
        return {
            "version": HYBRID_STATE_VERSION,
            "algorithm": self.name,
            "costs": [float(x) for x in self.costs],
            "delta": self.delta,
            "params": self.params(),
            "stats": [[float(x) for x in row] for row in self.ST],
            "BEAT": self.BEAT.astype(int).tolist(),
            "stopped": self.stopped,
            "winner": self.winner,
            "stop_t": self.stop_t,
            "verdict": self.verdict,
        }

    @classmethod
    def from_state(cls, state: Mapping[str, Any]) -> "HybridPolicy":
        if not isinstance(state, Mapping) or state.get("version") != HYBRID_STATE_VERSION:
            raise PolicyError("unsupported hybrid policy state (need a JSON object with version 2)")
        try:
            p = cls(state["costs"], state["delta"], **hybrid_state_params(state))
            ST = np.array(state["stats"], dtype=float)
            B = np.array(state["BEAT"], dtype=np.bool_)
        except KeyError as exc:
            raise PolicyError(f"hybrid policy state is missing {exc.args[0]!r}") from None
        except (TypeError, ValueError):
            raise PolicyError(
                "malformed hybrid policy state: params must be the policy's options, stats and BEAT numeric matrices"
            ) from None
        if ST.shape != (p.K, NSTAT) or B.shape != (p.L, p.L) or not np.all(np.isfinite(ST)):
            raise PolicyError("malformed hybrid policy state: array shapes do not match the number of arms")
        if np.any(ST[:, N_] < 0) or np.any(ST[:, NH] > ST[:, N_]):
            raise PolicyError("malformed hybrid policy state: inconsistent counts")
        p.ST, p.BEAT = ST, B
        kern.pc_recount(p.BEAT, p._CB, p._CW)
        kern.rebuild(p.ST[:, N_].copy(), p.ST[:, WP].copy(), p.PI, p.PJ, p._c, p._T, p._G, p._S, p._AMAX)
        p.stopped = bool(state.get("stopped", False))
        p.winner = None if state.get("winner") is None else int(state["winner"])
        p.stop_t = None if state.get("stop_t") is None else int(state["stop_t"])
        v = state.get("verdict")
        if v not in (None, NO_CONDORCET_WINNER):
            raise PolicyError(f"malformed hybrid policy state: unknown verdict {v!r}")
        p.verdict = v
        return p


def hybrid_state_params(state: Mapping[str, Any]) -> dict[str, Any]:
    """The options a stored hybrid state was made with: its ``params``, and ``level = "delta/(L-1)"``
    when it names none (every hybrid state stored before the level ``delta / L``), so it loads,
    continues and replays with its own decisions."""
    out = dict(state.get("params") or {})  # a malformed params: TypeError or ValueError for the caller
    out.setdefault("level", PC_LEGACY_LEVEL)
    return out


def policy_from_state(state: Mapping[str, Any]) -> Any:
    """Rebuild any policy from its state: hybrid states here, the others by :mod:`algorithms.policies`."""
    if isinstance(state, Mapping) and state.get("algorithm") == HYBRID:
        return HybridPolicy.from_state(state)
    if is_restricted_state(state):  # some models disabled (algorithms/restricted.py)
        return RestrictedPolicy.from_state(state)
    return _plain_policy_from_state(state)
