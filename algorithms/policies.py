"""Sampling policies behind one step-wise interface.

=========  ====================================================  ==============
name       sampling rule                                          stopping rule
=========  ====================================================  ==============
``dctas``  cost-aware tracking of the oracle allocation (Alg. 1)  GLR > beta
``tas``    the same with unit costs (cost-unaware)                GLR > beta
``crr``    ``argmin (c_i + c_j) N_ij`` (Appendix B)               GLR > beta
``dctac``  as ``dctas``                                           Hoeffding
``dpca``   explore, then verify each arm vs its adversary         Hoeffding
=========  ====================================================  ==============

Interface (see ``docs/architecture.md``)::

    policy = make_policy("dctas", costs=[4, 1, 1], delta=0.05)
    i, j = policy.next_pair(pending=[...])   # in-flight duels count as pulled
    policy.record(i, j, score)                # 1.0 i won, 0.0 j won, 0.5 half each
    policy.stopped, policy.recommendation(), policy.summary()
    state = policy.to_state(); policy_from_state(state)  # exact JSON round trip

Decisions never depend on anything but the recorded outcomes (and the pending
pairs passed in), so a persisted state continues with identical decisions.
``record`` evaluates the stopping rule; stopping is sticky (the certified
winner and the time of certification are kept even if late results arrive).

Time ``t`` counts every judged duel, initialisation included. The C-tracking
sum ``sum_s alpha(s)`` adds the allocation computed from the estimate *before*
each recorded duel (once every pair has a duel); with no duel in flight this is
exactly the paper's rule, and with duels in flight it keeps the state a function
of the ordered log of results, so replaying the log rebuilds it exactly.
"""

from __future__ import annotations

import math
from typing import Any, Iterable, Mapping, Sequence

import numpy as np

from . import _kernels as kern
from .certificates import (
    PC_DEFAULTS,
    PC_LEGACY_LEVEL,
    PC_LEGACY_THRESHOLD,
    certificate_log_level,
    certificate_log_stat,
    certificate_test,
    explore_for,
    no_winner_log_level,
    resolve_pc_level,
    tie_cap_for,
    validate_pc_params,
)
from .instance import COST_MAX, cost_ok
from .leaderboard import (
    GOAL_TOP_K,
    GOAL_WINNER,
    Tier,
    blocking_pairs,
    certified_tiers,
    cost_weighted_pick,
    goal_delta_divisor,
    goal_reached,
    relevant_pairs,
    top_k_set,
    validate_goal,
)
from .oracle import effective_costs, validate_judge_cost
from .thresholds import beta_constant, delta_problem
from .vocabulary import ALGORITHMS, PAPER_ALGORITHMS

__all__ = [
    "ALGORITHMS",
    "Policy",
    "PolicyError",
    "TrackingPolicy",
    "CRRPolicy",
    "DPCAPolicy",
    "PCPolicy",
    "PAPER_ALGORITHMS",
    "NO_CONDORCET_WINNER",
    "UNDECIDABLE",
    "NoPairAvailable",
    "make_policy",
    "policy_from_state",
    "state_params",
    "pair_index_arrays",
]

NO_CONDORCET_WINNER = "no_condorcet_winner"
UNDECIDABLE = "undecidable"  # dctas-pc without replacement: no winner can be decided on this prompt set
CW_ASSUMPTION = "the paper's stopping rule assumes a Condorcet winner exists; without one its certificate is not valid"
STATE_VERSION = 1


def _state_numbers(a: np.ndarray) -> list:
    """``a`` as nested lists for a stored state: integer-valued entries as ``int``, the others as
    ``float`` (what the state has always held). One vectorised pass when every entry is an integer
    (counts; a 128-model checkpoint has 81,280 of them), entry by entry otherwise."""
    a = np.asarray(a, dtype=float)
    if a.size and np.isfinite(a).all() and np.abs(a).max() < 2.0**53:
        whole = a.astype(np.int64)
        if (whole == a).all():
            return whole.tolist()
    if a.ndim == 1:
        return [int(x) if float(x).is_integer() else float(x) for x in a]
    return [_state_numbers(row) for row in a]


class PolicyError(ValueError):
    """Bad input to a policy (unknown pair, score out of range, malformed state)."""


class NoPairAvailable(PolicyError):
    """dctas-pc without replacement: every useful pair has used up the prompt set counting the duels
    in flight. Nothing is wrong; ask again once one of them is recorded (the service retries later)."""


def pair_index_arrays(L: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``(PI, PJ, PK)``: pair k is ``(PI[k], PJ[k])``, ``PK[i, j]`` its index (-1 on the diagonal)."""
    pairs = [(i, j) for i in range(L) for j in range(i + 1, L)]
    PI = np.array([p[0] for p in pairs], dtype=np.int64)
    PJ = np.array([p[1] for p in pairs], dtype=np.int64)
    PK = -np.ones((L, L), dtype=np.int64)
    for k, (i, j) in enumerate(pairs):
        PK[i, j] = PK[j, i] = k
    return PI, PJ, PK


def _validate_costs(costs: Any) -> np.ndarray:
    try:
        c = np.array(costs, dtype=float)
    except (TypeError, ValueError):
        raise PolicyError("costs must be a list of numbers") from None
    if c.ndim != 1 or c.shape[0] < 2:
        raise PolicyError(f"costs must be a list of at least 2 numbers, got shape {c.shape}")
    if not all(cost_ok(float(x)) for x in c):
        raise PolicyError(f"costs must be finite and > 0, at most {COST_MAX:g}")
    return c


def _validate_delta(delta: Any) -> float:
    try:
        d = float(delta)
    except (TypeError, ValueError):
        raise PolicyError(f"delta must be a number in (0, 1), got {delta!r}") from None
    problem = delta_problem(d)
    if problem:
        raise PolicyError(problem)
    return d


def _validate_judge_cost(judge_cost: Any) -> float:
    try:
        return validate_judge_cost(judge_cost)
    except ValueError as exc:
        raise PolicyError(str(exc)) from None


class Policy:
    """Common state and interface; use :func:`make_policy` to build one."""

    name: str = ""
    stopping_rule: str = "glr"

    def __init__(self, costs: Sequence[float], delta: float, *, judge_cost: Any = 0.0, **params: Any) -> None:
        self.costs = _validate_costs(costs)
        self.delta = _validate_delta(delta)
        self.judge_cost = _validate_judge_cost(judge_cost)
        self.L = int(self.costs.shape[0])
        self.K = self.L * (self.L - 1) // 2
        self.params: dict[str, Any] = dict(params)
        if self.judge_cost:
            self.params["judge_cost"] = self.judge_cost
        # c_i + c_J/2: pair sums are the full cost c_i + c_j + c_J of one duel (algorithms/oracle.py)
        self.duel_costs = effective_costs(self.costs, self.judge_cost)
        self.PI, self.PJ, self.PK = pair_index_arrays(self.L)
        self.N = np.zeros(self.K, dtype=float)
        self.W = np.zeros(self.K, dtype=float)
        self._policy_costs = self._costs_for_sampling()
        self._T = np.zeros((self.L, self.L))
        self._G = np.zeros((self.L, self.L))
        self._S = np.zeros(self.L)
        self._AMAX = np.zeros(self.L)
        self._beta_const = beta_constant(self.delta, self.L)
        self.stopped = False
        self.winner: int | None = None
        self.stop_t: int | None = None

    # ---------------------------------------------------------------- helpers
    def _costs_for_sampling(self) -> np.ndarray:
        return self.duel_costs

    def pairs(self) -> list[tuple[int, int]]:
        return list(zip(self.PI.tolist(), self.PJ.tolist()))

    def pair_index(self, i: int, j: int) -> int:
        for v in (i, j):
            if not isinstance(v, (int, np.integer)) or isinstance(v, bool) or not (0 <= v < self.L):
                raise PolicyError(f"arm index must be an integer in [0, {self.L - 1}], got {v!r}")
        if i == j:
            raise PolicyError(f"a duel needs two different arms, got ({i}, {j})")
        return int(self.PK[i, j])

    def _pending_counts(self, pending: Iterable[Sequence[int]]) -> np.ndarray:
        counts = np.zeros(self.K, dtype=float)
        for p in pending:
            if len(p) != 2:
                raise PolicyError(f"a pending duel is a pair of arm indices, got {p!r}")
            counts[self.pair_index(int(p[0]), int(p[1]))] += 1
        return counts

    @property
    def t(self) -> int:
        """Number of judged duels (initialisation included)."""
        return int(self.N.sum())

    @property
    def initialised(self) -> bool:
        return bool(np.all(self.N >= 1))

    def _rebuild(self) -> None:
        kern.rebuild(self.N, self.W, self.PI, self.PJ, self._policy_costs, self._T, self._G, self._S, self._AMAX)

    # ---------------------------------------------------------------- interface
    def next_pair(self, pending: Iterable[Sequence[int]] = ()) -> tuple[int, int]:
        """The pair to duel next, counting ``pending`` (assigned, not yet judged) duels as pulled."""
        k = self._choose(self._pending_counts(pending))
        return int(self.PI[k]), int(self.PJ[k])

    def set_costs(self, costs: Sequence[float], judge_cost: Any = None) -> bool:
        """Use new per-arm costs (and judge cost ``c_J``, unchanged when None) from now on.

        For costs that change during a campaign, e.g. the marginal cost of a duel
        given answers already paid for. Counts, wins and the stopping statistics are
        kept; the cost-dependent caches are rebuilt. Returns False (and changes
        nothing) when the costs are the ones in use, so a policy whose costs never
        change behaves exactly as before.
        """
        c = _validate_costs(costs)
        if c.shape != self.costs.shape:
            raise PolicyError(f"costs must have {self.L} entries, got {c.shape[0]}")
        jc = self.judge_cost if judge_cost is None else _validate_judge_cost(judge_cost)
        if np.array_equal(c, self.costs) and jc == self.judge_cost:
            return False
        self.costs, self.judge_cost = c, jc
        if jc:
            self.params["judge_cost"] = jc
        else:
            self.params.pop("judge_cost", None)
        self.duel_costs = effective_costs(self.costs, self.judge_cost)
        self._policy_costs = self._costs_for_sampling()
        self._rebuild()
        return True

    def record(self, i: int, j: int, score: float) -> None:
        """Record a judged duel: ``score`` is the score of arm ``i`` (1 win, 0 loss, 0.5 half)."""
        k = self.pair_index(i, j)
        try:
            s = float(score)
        except (TypeError, ValueError):
            raise PolicyError(f"score must be a number in [0, 1], got {score!r}") from None
        if not (0.0 <= s <= 1.0):
            raise PolicyError(f"score must be in [0, 1], got {s!r}")
        if i > j:
            s = 1.0 - s
        self._record(k, s)
        if not self.stopped:
            w = self._stop_winner()
            if w is not None:
                self.stopped, self.winner, self.stop_t = True, int(w), self.t

    def should_stop(self) -> bool:
        return self.stopped

    def leader(self) -> int:
        a, _ = kern.leader_and_Z(self._S)
        return int(a)

    def recommendation(self) -> int:
        """The certified winner once stopped, else the current empirical leader (smallest evidence)."""
        return self.winner if self.stopped else self.leader()

    def Z(self) -> float:
        return float(kern.leader_and_Z(self._S)[1])

    def beta(self) -> float:
        return float(kern.beta_at(float(self.t), self.L, self._beta_const))

    def counts_matrix(self) -> np.ndarray:
        M = np.zeros((self.L, self.L))
        M[self.PI, self.PJ] = self.N
        M[self.PJ, self.PI] = self.N
        return M

    def wins_matrix(self) -> np.ndarray:
        M = np.zeros((self.L, self.L))
        M[self.PI, self.PJ] = self.W
        M[self.PJ, self.PI] = self.N - self.W
        return M

    def summary(self) -> dict[str, Any]:
        """A JSON-safe snapshot: counts, wins, evidence S, Z, beta, leader, stop status."""
        return {
            "algorithm": self.name,
            "stopping_rule": self.stopping_rule,
            "t": self.t,
            "N": self.counts_matrix().astype(int).tolist(),
            "W": self.wins_matrix().tolist(),
            "S": [float(x) for x in self._S],
            "Z": self.Z(),
            "beta": self.beta(),
            "leader": self.leader(),
            "stopped": self.stopped,
            "winner": self.winner,
            "stop_t": self.stop_t,
        }

    # ---------------------------------------------------------------- state
    def to_state(self) -> dict[str, Any]:
        state = {
            "version": STATE_VERSION,
            "algorithm": self.name,
            "costs": [float(x) for x in self.costs],
            "delta": self.delta,
            "params": dict(self.params),
            "N": _state_numbers(self.N),
            "W": [float(x) for x in self.W],
            "stopped": self.stopped,
            "winner": self.winner,
            "stop_t": self.stop_t,
        }
        state.update(self._extra_state())
        return state

    def _extra_state(self) -> dict[str, Any]:
        return {}

    def _load_extra(self, state: Mapping[str, Any]) -> None:
        pass

    # ---------------------------------------------------------------- subclass hooks
    def _choose(self, pend: np.ndarray) -> int:
        raise NotImplementedError

    def _record(self, k: int, s: float) -> None:
        self.N[k] += 1.0
        self.W[k] += s
        kern.refresh_pair(
            k, self.N, self.W, self.PI, self.PJ, self._policy_costs, self._T, self._G, self._S, self._AMAX
        )

    def _stop_winner(self) -> int | None:
        a, z = kern.leader_and_Z(self._S)
        if z > kern.beta_at(float(self.t), self.L, self._beta_const):
            return int(a)
        return None


class TrackingPolicy(Policy):
    """DCTAS (cost-aware), TAS (unit costs) and DCTAC (Hoeffding stop): forced exploration + C-tracking."""

    def __init__(
        self,
        costs: Sequence[float],
        delta: float,
        *,
        cost_aware: bool = True,
        stopping_rule: str = "glr",
        name: str = "dctas",
        judge_cost: Any = 0.0,
    ) -> None:
        self.name = name
        self.cost_aware = bool(cost_aware)
        if stopping_rule not in ("glr", "hoeffding"):
            raise PolicyError(f"unknown stopping rule {stopping_rule!r}")
        self.stopping_rule = stopping_rule
        super().__init__(costs, delta, judge_cost=judge_cost)
        self.CUM = np.zeros(self.K)
        self._alpha = np.zeros(self.K)
        K = self.K
        self._log_num = math.log(2 * math.pi**2 * K / (6 * self.delta))
        self._FLAG = np.zeros(K, dtype=np.int64)
        self._WINS = np.zeros(self.L, dtype=np.int64)

    def _costs_for_sampling(self) -> np.ndarray:
        return self.duel_costs if self.cost_aware else np.ones_like(self.costs)

    def _allocation(self) -> np.ndarray:
        if self.initialised:
            kern.pull_allocation(
                self._G, self._S, self._AMAX, self._policy_costs, self.PI, self.PJ, self.PK, self._alpha
            )
        else:
            self._alpha[:] = 0.0
        return self._alpha

    def target_allocation(self) -> np.ndarray:
        """The pull fractions ``alpha(t)`` for the current estimate (zeros before every pair has a duel)."""
        return self._allocation().copy()

    def _choose(self, pend: np.ndarray) -> int:
        return int(kern.tracking_choose(self.N + pend, self._allocation(), self.CUM))

    def _record(self, k: int, s: float) -> None:
        if self.initialised:
            self.CUM += self._allocation()
        super()._record(k, s)
        if self.stopping_rule == "hoeffding":
            kern.dctac_update(k, self.N, self.W, self.PI, self.PJ, self._log_num, self._FLAG, self._WINS)

    def _stop_winner(self) -> int | None:
        if self.stopping_rule == "glr":
            return super()._stop_winner()
        w = kern.dctac_winner(self._WINS)
        return int(w) if w >= 0 else None

    def _extra_state(self) -> dict[str, Any]:
        return {"CUM": [float(x) for x in self.CUM]}

    def _load_extra(self, state: Mapping[str, Any]) -> None:
        self.CUM = _float_array(state, "CUM", self.K)
        if self.stopping_rule == "hoeffding":
            kern.dctac_recount(self.N, self.W, self.PI, self.PJ, self._log_num, self._FLAG, self._WINS)


class CRRPolicy(Policy):
    """Cost-aware round robin: pull ``argmin (c_i + c_j) N_ij``; GLR stop (Appendix B, Algorithm 2)."""

    name = "crr"

    def _choose(self, pend: np.ndarray) -> int:
        return int(kern.crr_choose(self.N + pend, self.duel_costs, self.PI, self.PJ))


class DPCAPolicy(Policy):
    """Dual Phase Cost Aware (Appendix B, Algorithms 3-5), restarting round r with ``delta / r^2``.

    Parameters: ``delta_explore`` (confidence of the exploration phase, default 0.1,
    shrunk as ``delta_explore / r^2`` in round r) and ``k1`` (default 10).
    """

    name = "dpca"
    stopping_rule = "hoeffding"

    def __init__(
        self,
        costs: Sequence[float],
        delta: float,
        *,
        delta_explore: float = 0.1,
        k1: float = 10.0,
        judge_cost: Any = 0.0,
    ) -> None:
        de = _validate_delta(delta_explore)
        if not (float(k1) > 1):
            raise PolicyError(f"k1 must be > 1, got {k1!r}")
        super().__init__(costs, delta, judge_cost=judge_cost, delta_explore=de, k1=float(k1))
        self.META = np.array([1, 0, -1, 0], dtype=np.int64)
        self.n = np.zeros(self.K)
        self.s = np.zeros(self.K)
        self.ACT = np.zeros((self.L, self.L), dtype=np.bool_)
        self.ADV = -np.ones(self.L, dtype=np.int64)
        self.INA = np.zeros(self.L, dtype=np.bool_)
        kern.dpca_start_explore(self.META, self.n, self.s, self.ACT)

    @property
    def round(self) -> int:
        return int(self.META[0])

    @property
    def phase(self) -> str:
        return "verify" if self.META[1] == 1 else "explore"

    def _choose(self, pend: np.ndarray) -> int:
        return int(kern.dpca_choose(self.META, self.n, self.ACT, self.ADV, self.INA, self.PK, pend))

    def _record(self, k: int, s: float) -> None:
        super()._record(k, s)
        kern.dpca_record(
            k,
            s,
            self.META,
            self.n,
            self.s,
            self.ACT,
            self.ADV,
            self.INA,
            self.PI,
            self.PJ,
            self.PK,
            self.duel_costs,
            self.delta,
            self.params["delta_explore"],
            self.params["k1"],
        )

    def _stop_winner(self) -> int | None:
        return int(self.META[2]) if self.META[3] == 1 else None

    def summary(self) -> dict[str, Any]:
        out = super().summary()
        out.update(
            {"round": self.round, "phase": self.phase, "candidate": int(self.META[2]) if self.META[1] == 1 else None}
        )
        return out

    def _extra_state(self) -> dict[str, Any]:
        return {
            "META": [int(x) for x in self.META],
            "n": [float(x) for x in self.n],
            "s": [float(x) for x in self.s],
            "ACT": self.ACT.astype(int).tolist(),
            "ADV": [int(x) for x in self.ADV],
            "INA": [bool(x) for x in self.INA],
        }

    def _load_extra(self, state: Mapping[str, Any]) -> None:
        try:
            self.META = np.array(state["META"], dtype=np.int64)
            self.n = _float_array(state, "n", self.K)
            self.s = _float_array(state, "s", self.K)
            self.ACT = np.array(state["ACT"], dtype=np.bool_)
            self.ADV = np.array(state["ADV"], dtype=np.int64)
            self.INA = np.array(state["INA"], dtype=np.bool_)
        except (KeyError, TypeError, ValueError) as exc:
            raise PolicyError(f"malformed DPCA state: {exc}") from None
        if (
            self.META.shape != (4,)
            or self.ACT.shape != (self.L, self.L)
            or self.ADV.shape != (self.L,)
            or self.INA.shape != (self.L,)
        ):
            raise PolicyError("malformed DPCA state: array shapes do not match the number of arms")


class PCPolicy(Policy):
    """dctas-pc: pairwise certificates, the default (not from the paper; see ``docs/algorithms.md``).

    A certificate "m is beaten by k" is issued when the test chosen by ``threshold``
    (:mod:`algorithms.certificates`; by default the betting test of
    :func:`algorithms._kernels.pc_bet_log_wealth`; a stored
    state that names no test uses the mixture test, the default before it) rejects
    ``p_mk >= 1/2`` at its level (``level``, resolved by
    :func:`algorithms.certificates.resolve_pc_level`: ``auto`` is ``product``, ``alpha`` of
    :func:`algorithms.certificates.product_levels`, with replacement and the betting or mixture
    test, and ``delta / L`` otherwise; a stored state that names no level keeps ``delta / (L - 1)``,
    the level it was made with), so that every verdict is wrong with probability at most ``delta``
    (docs/algorithms.md, "Validity", "The product level"); at the product level "no Condorcet
    winner" also needs every arm beaten at ``beta``. :meth:`certificate_log_wealth` gives each test's current log-wealth. Stop with winner ``a`` when ``a`` holds a certificate against every
    other arm; stop with the verdict "no Condorcet winner" when every arm is certified
    beaten. Sampling: :func:`algorithms._kernels.pc_choose`, for the plug-in leader or,
    with ``stick > 0`` (nats), a sticky one (:func:`algorithms._kernels.pc_track_leader`).

    **Without replacement** (``population=P``, docs/reuse.md, "The service's policy without
    replacement"): pair ``(i, j)``'s ``n``-th recorded outcome is its value on prompt
    ``perm[n]`` of one secret uniformly random permutation of the campaign's ``P`` prompts,
    shared by all pairs; the preference certified is the prompt-set mean (R1). Each pair
    runs two one-sided without-replacement betting tests (R3, R4) with ``N = P`` at level
    ``alpha = delta / L`` (``level``), one per direction (:func:`algorithms._kernels.pc_wor_bet`,
    the bet of :func:`algorithms.prompt_level.bet_size`), plus exact certificates when the
    pair's sum already decides the prompt-set mean (``2 W > P``;
    :func:`algorithms._kernels.pc_wor_update`); the ``threshold`` tests (for i.i.d.
    outcomes) are not used. A pair is never given more than ``P`` outcomes. Besides the
    two verdicts above, the campaign stops with ``verdict = "undecidable"`` (winner None)
    when no useful pair is left (:func:`algorithms._kernels.pc_wor_useful`): no model can
    be the prompt-set Condorcet winner unless a certificate is wrong. ``next_pair`` picks
    among useful pairs not exhausted counting the pending duels, with per-pair marginal
    costs (:func:`algorithms._kernels.pc_wor_choose`), and raises :class:`NoPairAvailable`
    when every useful pair is exhausted counting the pending duels.
    """

    name = "dctas-pc"
    stopping_rule = "certificates"

    def __init__(
        self,
        costs: Sequence[float],
        delta: float,
        *,
        judge_cost: Any = 0.0,
        threshold: str | None = None,
        stick: float = PC_DEFAULTS["stick"],
        population: int | None = None,
        level: str = PC_DEFAULTS["level"],
        goal: str = GOAL_WINNER,
        k: int | None = None,
    ) -> None:
        explicit = threshold is not None
        try:
            goal, k = validate_goal(goal, k, len(costs) if hasattr(costs, "__len__") else 0)
        except ValueError as exc:
            raise PolicyError(str(exc)) from None
        try:
            threshold, stick = validate_pc_params(PC_DEFAULTS["threshold"] if threshold is None else threshold, stick)
            level = resolve_pc_level(level, threshold=threshold, population=population, goal=goal)
        except ValueError as exc:
            raise PolicyError(str(exc)) from None
        # the state names the test unless it is the legacy one (a state without "threshold" is a
        # mixture-test state, as every state written before "betting" became the default)
        opts: dict[str, Any] = {}
        if threshold != PC_LEGACY_THRESHOLD and (population is None or explicit):
            opts["threshold"] = threshold
        if stick != PC_DEFAULTS["stick"]:
            opts["stick"] = stick
        if population is not None:
            population = _validate_population(population)
            if opts:
                raise PolicyError(
                    "population (sampling without replacement) uses its own certificate test and leader; "
                    f"it cannot be combined with {' or '.join(sorted(opts))}"
                )
            opts["population"] = population
        if level != PC_LEGACY_LEVEL:  # a state without "level" was made with delta / (L - 1)
            opts["level"] = level
        if goal != GOAL_WINNER:
            opts["goal"] = goal
            if k is not None:
                opts["k"] = k
        if threshold == "portfolio" and goal != GOAL_WINNER:
            raise PolicyError("threshold portfolio certifies a winner only; a leaderboard goal needs another test")
        super().__init__(costs, delta, judge_cost=judge_cost, **opts)
        self.goal, self.k = goal, k
        # a leaderboard certifies claims on any of the L (L - 1) ordered pairs (algorithms/leaderboard.py)
        self._goal_div = 1 if goal == GOAL_WINNER else goal_delta_divisor(goal, self.L) // (self.L - 1)
        self.goal_verdict: str | None = None
        self.threshold, self.stick, self.level = threshold, stick, level
        # the winner goal tests each certificate at delta / L (level); a leaderboard at delta / (L (L - 1))
        self._level_eff = level if goal == GOAL_WINNER else PC_LEGACY_LEVEL
        self.population: int | None = population
        self.BEAT = np.zeros((self.L, self.L), dtype=np.bool_)
        self._CB = np.zeros(self.L, dtype=np.int64)
        self._CW = np.zeros(self.L, dtype=np.int64)
        self._LEAD = -np.ones(1, dtype=np.int64)
        self._alpha = np.zeros(self.K)
        self._rule, self._c0 = certificate_test(threshold, self.delta / self._goal_div, self.L, self._level_eff)
        # the verdict "no Condorcet winner" at the product level also needs every model beaten at beta
        self._nocw_thr = no_winner_log_level(self.delta, self.L, self._level_eff)
        self._tie_cap = tie_cap_for(threshold) if population is None else 0.0
        self._explore, self._explore_frac = explore_for(threshold) if population is None else (0, 1.0)
        self._betting = population is None and self._rule == kern.PC_BETTING
        self._portfolio = population is None and self._rule == kern.PC_PORTFOLIO
        # the betting test's score counts on the quarter grid (kern.pc_hist_add): K x 10
        self._H = np.zeros((self.K, 2 * kern.PC_LEVELS))
        # the portfolio test: PV[a, m] candidate a's wealth on "a beats m"; PG[:L] cash paid, PG[L] the pool
        self._PV = np.zeros((self.L, self.L))
        self._PG = np.zeros(self.L + 1)
        if self._portfolio:
            kern.pc_port_init(self._PV, self._PG, kern.PC_PORT_RHO)
        self.verdict: str | None = None
        if population is not None:
            self._LA = np.zeros(self.K)  # log K_t (R4): "PJ[k] beaten by PI[k]"
            self._LB = np.zeros(self.K)  # log K_t (R4) on 1 - x: "PI[k] beaten by PJ[k]"
            self._SQ = np.zeros(self.K)  # sum of squared scores of PI[k]
            # log(1/alpha), alpha = delta / L (a leaderboard: delta / (L (L - 1)))
            self._log_thr = certificate_log_level(self.delta / self._goal_div, self.L, self._level_eff)
            self._CK = np.zeros(self.K)
            self._GW = np.zeros((self.L, self.L))
            self._AW = np.zeros(self.L)
            self._OK = np.zeros(self.K, dtype=np.bool_)

    # ---------------------------------------------------------------- sampling
    def next_pair(self, pending: Iterable[Sequence[int]] = ()) -> tuple[int, int]:
        """The pair to duel next, counting ``pending`` (assigned, not yet judged) duels as pulled.

        A leaderboard goal (``top_k``, ``ranking``): :meth:`_choose_goal`. Without replacement: never a pair that is not useful or has ``N_k + pending_k >= P``;
        :class:`NoPairAvailable` when every useful pair is exhausted counting ``pending``,
        :class:`PolicyError` once the campaign has stopped (no pair is useful then).
        """
        if self.population is None or self.goal != GOAL_WINNER:
            if self.population is not None and self.stopped:
                raise PolicyError("the campaign has stopped (without replacement no pair is useful any more)")
            k = self._choose(self._pending_counts(pending))
            if k < 0:
                raise NoPairAvailable(
                    f"every pair still open has used up the {self.population} prompts counting the duels in "
                    "flight; retry when one of them is recorded"
                )
            return int(self.PI[k]), int(self.PJ[k])
        if self.stopped:
            raise PolicyError("the campaign has stopped (without replacement no pair is useful any more)")
        k = self._choose_wor(self._pending_counts(pending))
        if k < 0:
            raise NoPairAvailable(
                f"every useful pair has used up the {self.population} prompts counting the duels in flight; "
                "retry when one of them is recorded"
            )
        return int(self.PI[k]), int(self.PJ[k])

    def _choose_wor(self, pend: np.ndarray) -> int:
        assert self.population is not None
        return int(
            kern.pc_wor_choose(
                self.N + pend,
                self.N,
                self.W,
                self.costs,
                self.judge_cost,
                self.PI,
                self.PJ,
                self.PK,
                self.BEAT,
                self._CB,
                float(self.population),
                self._GW,
                self._AW,
                self._CK,
                self._OK,
                self._alpha,
            )
        )

    def _choose(self, pend: np.ndarray) -> int:
        if self.goal != GOAL_WINNER:
            return self._choose_goal(pend)
        if self.population is not None:
            return self._choose_wor(pend)
        neff = self.N + pend
        if int(neff.sum()) % 2 == 0 and self.no_winner_waits():
            # every model is beaten but not yet each at beta: every other duel tops up a certificate
            k = int(
                kern.pc_nocw_choose(self.N, self.W, self._H, self.PI, self.PJ, self.BEAT, self._betting, self._nocw_thr)
            )
            if k >= 0:
                return k
        return int(
            kern.pc_choose(
                neff,
                float(neff.sum()),
                kern.pc_lead(self._CB, self._AMAX, self._LEAD, self.stick),
                self._G,
                self._AMAX,
                self._policy_costs,
                self.PI,
                self.PJ,
                self.PK,
                self.BEAT,
                self._CB,
                self._alpha,
                self._tie_cap,
                self._explore,
                self._explore_frac,
            )
        )

    # ---------------------------------------------------------------- recording
    def _record(self, k: int, s: float) -> None:
        if self.population is None:
            super()._record(k, s)
            if self._portfolio:
                self._record_portfolio(k, s)
                return
            if self._betting:
                kern.pc_hist_add(k, s, self._H)
                kern.pc_update_bet(
                    k, self.N, self.W, self._H, self.PI, self.PJ, self._c0, self.BEAT, self._CB, self._CW
                )
            else:
                kern.pc_update(k, self.N, self.W, self.PI, self.PJ, self._rule, self._c0, self.BEAT, self._CB, self._CW)
            if self.stick > 0.0:
                kern.pc_track_leader(self._CB, self._AMAX, self._T, self._LEAD, self.stick)
            return
        P = float(self.population)
        if self.N[k] >= P:
            raise PolicyError(
                f"pair ({int(self.PI[k])}, {int(self.PJ[k])}) already has an outcome for each of the "
                f"{self.population} prompts; without replacement it cannot have more"
            )
        kern.pc_wor_bet(k, s, self.N, self.W, self._SQ, self._LA, self._LB, P)
        super()._record(k, s)
        kern.pc_wor_update(
            k, self.N, self.W, self.PI, self.PJ, P, self._LA, self._LB, self._log_thr, self.BEAT, self._CB, self._CW
        )

    def _record_portfolio(self, k: int, s: float) -> None:
        """The portfolio test: move the pair's two bets, then pay the leader (kern.pc_port_pay)."""
        c0 = self._c0
        issued = kern.pc_port_record(
            k, s, self.N, self.W, self._H, self.PI, self.PJ, self._PV, c0, self.BEAT, self._CB, self._CW
        )
        if issued and kern.pc_verdict(self._CB, self._CW) != -1:
            return  # the verdict is in (the simulator stops here too)
        if self.stick > 0.0:
            kern.pc_track_leader(self._CB, self._AMAX, self._T, self._LEAD, self.stick)
        a = kern.pc_lead(self._CB, self._AMAX, self._LEAD, self.stick)
        kern.pc_port_pay(
            a, self._T, self.N, self.W, self.PI, self.PK, self._PV, self._PG, kern.PC_PORT_RHO,
            kern.PC_PORT_Z0, c0, self.BEAT, self._CB, self._CW,
        )  # fmt: skip

    # ---------------------------------------------------------------- leaderboard goals
    def exact_ties(self) -> np.ndarray:
        """``T[u, v]``: the pair is known to be exactly tied (without replacement: every prompt used, mean 1/2)."""
        T = np.zeros((self.L, self.L), dtype=np.bool_)
        if self.population is not None and np.any(self.N >= float(self.population)):
            P = float(self.population)
            for k in range(self.K):
                if self.N[k] >= P and 2.0 * float(self.W[k]) == P:
                    T[self.PI[k], self.PJ[k]] = T[self.PJ[k], self.PI[k]] = True
        return T

    def tiers(self) -> list[Tier]:
        """The certified tiers, best first (:func:`algorithms.leaderboard.certified_tiers`)."""
        return self._tiers_resolved()[0]

    def _tiers_resolved(self) -> tuple[list[Tier], np.ndarray]:
        """The tiers and the resolved pairs, recomputed only when a certificate or an exact tie is added."""
        T = self.exact_ties()
        key = self.BEAT.tobytes() + T.tobytes()
        cached = getattr(self, "_tier_cache", None)
        if cached is None or cached[0] != key:
            cached = (key, certified_tiers(self.BEAT, T), self.BEAT | self.BEAT.T | T)
            self._tier_cache = cached
        return cached[1], cached[2]

    def _choose_goal(self, pend: np.ndarray) -> int:
        """A leaderboard goal's next pair (-1: none available without replacement).

        Forced exploration first: an unresolved pair that matters for the goal (inside an open tier; for
        ``top_k`` inside the tier holding position ``k``) with ``N_k < sqrt(t)/2 - K/2`` duels, fewest
        first. Else cost-aware round robin (:func:`algorithms.leaderboard.cost_weighted_pick`) over the
        pairs that block the goal on the plug-in estimate (:func:`algorithms.leaderboard.blocking_pairs`),
        then over those that matter, then over every pair.
        """
        neff = self.N + pend
        tiers, resolved = self._tiers_resolved()
        pair_cost = self._policy_costs[self.PI] + self._policy_costs[self.PJ]
        cap = math.inf if self.population is None else float(self.population)

        def ok(pairs: list[tuple[int, int]]) -> list[tuple[int, int]]:
            return pairs if cap == math.inf else [(u, v) for u, v in pairs if neff[self.PK[u, v]] < cap]

        matters = ok(relevant_pairs(tiers, self.goal, self.k, resolved))
        t = float(neff.sum())
        floor = 0.5 * math.sqrt(t) - 0.5 * self.K
        starved = [(u, v) for u, v in matters if neff[self.PK[u, v]] < floor]
        if starved:
            return int(min((int(self.PK[u, v]) for u, v in starved), key=lambda kk: (neff[kk], kk)))
        P = None
        if self.goal == GOAL_TOP_K:  # the plug-in estimate splits the tier holding position k
            phat = np.where(self.N > 0, self.W / np.maximum(self.N, 1.0), 0.5)
            P = np.full((self.L, self.L), 0.5)
            P[self.PI, self.PJ] = phat
            P[self.PJ, self.PI] = 1.0 - phat
        for cands in (ok(blocking_pairs(tiers, self.goal, self.k, P, resolved)), matters, ok(self.pairs())):
            if cands:
                return cost_weighted_pick(cands, neff, pair_cost, self.PK)
        return -1

    def _goal_stop(self) -> None:
        """Stop once the goal's certificate holds (:func:`algorithms.leaderboard.goal_reached`)."""
        tiers = self.tiers()
        reached = goal_reached(tiers, self.goal, self.k)
        if reached is None:
            return
        self.stopped, self.stop_t, self.goal_verdict = True, self.t, reached
        top = tiers[0]
        self.winner = top.models[0] if len(top.models) == 1 else None
        if self.goal == GOAL_TOP_K and reached == "undecidable":
            self.verdict = UNDECIDABLE

    def leaderboard(self) -> dict[str, Any]:
        """The certified tiers (``ranking``: lists of model indices, best first, and each tier's ``status``)
        and, for ``top_k``, the certified top set (``top_k``: exactly ``k`` models once certified)."""
        tiers = self.tiers()
        out: dict[str, Any] = {
            "goal": self.goal,
            "ranking": [list(t.models) for t in tiers],
            "tiers": [{"models": list(t.models), "status": t.status} for t in tiers],
            "goal_verdict": self.goal_verdict,
        }
        if self.goal == GOAL_TOP_K:
            assert self.k is not None
            out["k"] = self.k
            out["top_k"] = top_k_set(tiers, self.k)
        return out

    def useful_pairs(self) -> list[tuple[int, int]]:
        """Without replacement: the useful pairs on the recorded data (undecided, ``N < P``,
        one model not yet beaten); every pair otherwise."""
        if self.population is None:
            return self.pairs()
        kern.pc_wor_useful(self.N, self.PI, self.PJ, self.BEAT, self._CB, float(self.population), self._OK)
        return [(int(self.PI[k]), int(self.PJ[k])) for k in range(self.K) if self._OK[k]]

    def record(self, i: int, j: int, score: float) -> None:
        super().record(i, j, score)
        if self.goal != GOAL_WINNER:
            if not self.stopped:
                self._goal_stop()
            return
        if not self.stopped and self._verdict_code() == -2:
            self.stopped, self.stop_t, self.verdict = True, self.t, NO_CONDORCET_WINNER
        if self.population is not None and not self.stopped and not self.useful_pairs():
            # decided on recorded data only, so never while useful pairs are merely in flight
            self.stopped, self.stop_t, self.verdict = True, self.t, UNDECIDABLE

    def _stop_winner(self) -> int | None:
        if self.goal != GOAL_WINNER:
            return None  # record() decides with the goal's test
        v = self._verdict_code()
        return v if v >= 0 else None

    def _verdict_code(self) -> int:
        """:func:`algorithms._kernels.pc_verdict`: an arm named, ``-2`` no Condorcet winner, ``-1`` go on; at the
        product level "no Condorcet winner" also needs every arm beaten at beta (``pc_verdict_strict``)."""
        if self._nocw_thr <= 0.0:
            return int(kern.pc_verdict(self._CB, self._CW))
        return int(
            kern.pc_verdict_strict(
                self._CB, self._CW, self.N, self.W, self._H, self.PI, self.PJ, self.BEAT, self._betting, self._nocw_thr
            )
        )

    @property
    def certificate_test_name(self) -> str:
        """The test behind each certificate: ``without_replacement`` or the ``threshold`` option."""
        return "without_replacement" if self.population is not None else self.threshold

    def pair_evidence(self) -> list[dict[str, Any]]:
        """Per ordered pair (loser ``m``, winner ``k``, ``m != k``): the evidence that ``m`` is beaten by ``k``.

        Each item: ``loser``, ``winner`` (arm indices), ``n`` (duels of the pair), ``log_stat``
        (the certificate test's statistic on a log scale: the log-wealth of the mixture martingale
        or of the without-replacement betting test, or the log-scale forms of the ``kk`` and
        ``stitched`` boundaries, :func:`algorithms.certificates.certificate_log_stat`),
        ``log_threshold`` (the certificate is issued when ``log_stat`` reaches it; ``log(L/delta)``
        for the betting, mixture and without-replacement tests, :attr:`certificate_log_threshold`), ``certified`` (the certificate is held) and
        ``exact`` (without replacement: certified because the pair's sum already decides the
        prompt-set mean, whatever ``log_stat`` says).
        """
        M = self.wins_matrix()
        out: list[dict[str, Any]] = []
        for k in range(self.K):
            i, j = int(self.PI[k]), int(self.PJ[k])
            n = float(self.N[k])
            for loser, winner in ((i, j), (j, i)):
                exact = False
                if self.population is not None:
                    stat = float(self._LB[k] if loser == i else self._LA[k])
                    thr = self._log_thr
                    won = n - float(M[loser, winner])  # the winner's score against the loser
                    exact = bool(self.BEAT[winner, loser]) and 2.0 * won > float(self.population)
                elif self._portfolio:
                    stat = _log_or_floor(float(self._PV[winner, loser]))
                    thr = float(self._c0)
                elif self._betting:  # log of a mixture whose weights sum to 1: exactly 0 before any duel
                    stat = float(kern.pc_bet_log_wealth(self._H, k, 0 if loser == i else 1)) if n > 0 else 0.0
                    thr = float(self._c0)
                else:
                    stat = certificate_log_stat(n, float(M[loser, winner]), self._rule)
                    thr = float(self._c0)
                out.append(
                    {
                        "loser": loser,
                        "winner": winner,
                        "n": int(n) if n.is_integer() else n,
                        "log_stat": stat,
                        "log_threshold": thr,
                        "certified": bool(self.BEAT[winner, loser]),
                        "exact": exact,
                    }
                )
        return out

    @property
    def certificate_log_threshold(self) -> float:
        """``log(L / delta)`` (``log(1 / alpha)`` at the product level; ``log((L - 1) / delta)`` at the legacy level; a leaderboard goal:
        ``log(L (L - 1) / delta)``; the portfolio test: ``log(1 / delta)``): a certificate is issued
        when its test's log-wealth reaches it."""
        if self._portfolio:
            return float(self._c0)
        return certificate_log_level(self.delta / self._goal_div, self.L, self._level_eff)

    @property
    def no_winner_log_threshold(self) -> float | None:
        """At the product level with four models or more: ``log(1/beta)``, the log-wealth at which every model
        must be beaten for the verdict "no Condorcet winner"; None where the certificates' own level suffices."""
        return self._nocw_thr if self._nocw_thr > 0.0 else None

    def no_winner_waits(self) -> bool:
        """Every model holds a certificate against it, but not yet each at ``beta``: the verdict "no Condorcet
        winner" waits (the product level; :meth:`no_winner_log_threshold`)."""
        if self.stopped or self._nocw_thr <= 0.0 or self.goal != GOAL_WINNER:
            return False
        return int(kern.pc_verdict(self._CB, self._CW)) == -2

    def certificate_log_wealth(self) -> np.ndarray | None:
        """``LW[m, k]``: the current log-wealth of the test "m is beaten by k" (0 on the diagonal).

        For the ``betting`` and ``mixture`` tests (and the without-replacement tests), the
        log of the nonnegative supermartingale that issues the certificate when it reaches
        :attr:`certificate_log_threshold`; None for ``kk`` and ``stitched`` (no wealth).
        Only a side that is behind (mean score below 1/2) can be certified; a pair already
        certified keeps showing its wealth.
        """
        LW = np.zeros((self.L, self.L))
        for k in range(self.K):
            i, j = int(self.PI[k]), int(self.PJ[k])
            if self.population is not None:
                LW[j, i], LW[i, j] = self._LA[k], self._LB[k]
            elif self._portfolio:
                LW[i, j] = _log_or_floor(float(self._PV[j, i]))
                LW[j, i] = _log_or_floor(float(self._PV[i, j]))
            elif self._betting:
                LW[i, j] = kern.pc_bet_log_wealth(self._H, k, 0)
                LW[j, i] = kern.pc_bet_log_wealth(self._H, k, 1)
            elif self._rule == kern.PC_MIXTURE:
                n, x = float(self.N[k]), float(self.W[k])
                LW[i, j] = kern.pc_log_mixture(n, x)
                LW[j, i] = kern.pc_log_mixture(n, n - x)
            else:
                return None
        return LW

    def leader(self) -> int:
        a = int(kern.pc_lead(self._CB, self._AMAX, self._LEAD, self.stick))
        return a if a >= 0 else super().leader()

    def summary(self) -> dict[str, Any]:
        """The base summary plus the certificates, the Copeland winner and the top cycle.

        Computed on plain Python lists (L is small; this runs on every recorded vote):
        ``P[m][n] = W[m][n] / N[m][n]`` (1/2 for a pair never compared); the Copeland
        winner has the most ``P[m][n] > 1/2`` (ties to the lowest index); the top cycle is
        the set of arms that reach every arm by a path of ``P >= 1/2`` edges (Warshall's
        transitive closure on bit masks).
        """
        out = super().summary()
        L = self.L
        N, W = out["N"], out["W"]
        P = [[W[m][n] / N[m][n] if N[m][n] > 0 else 0.5 for n in range(L)] for m in range(L)]
        best, copeland_winner = -1, 0
        for m in range(L):
            wins = sum(1 for n in range(L) if P[m][n] > 0.5)
            if wins > best:
                best, copeland_winner = wins, m
        # reach[m]: bit n set when m reaches n by "beats or ties" edges (itself included)
        reach = [sum(1 << n for n in range(L) if n == m or P[m][n] >= 0.5) for m in range(L)]
        for q in range(L):
            bit, rq = 1 << q, reach[q]
            for m in range(L):
                if reach[m] & bit:
                    reach[m] |= rq
        everyone = (1 << L) - 1
        out.update(
            {
                "verdict": self.verdict if self.verdict else ("winner" if self.stopped else None),
                "certificates": np.argwhere(self.BEAT).tolist(),
                "certified_beaten": np.flatnonzero(self.BEAT.any(axis=0)).tolist(),
                "copeland_winner": copeland_winner,
                "top_cycle": [m for m in range(L) if reach[m] == everyone],
            }
        )
        if self.goal != GOAL_WINNER:
            out.update(self.leaderboard())
            if self.stopped and self.verdict is None:
                out["verdict"] = self.goal_verdict
        if self.population is not None:
            n_pop = self.population
            out["population"] = n_pop
            # exhausted pairs: p_ij is the exact prompt-set mean (R1)
            out["exact"] = [
                [int(self.PI[k]), int(self.PJ[k]), float(self.W[k]) / n_pop]
                for k in range(self.K)
                if self.N[k] >= n_pop
            ]
        return out

    # ---------------------------------------------------------------- state
    def _extra_state(self) -> dict[str, Any]:
        out: dict[str, Any] = {"BEAT": self.BEAT.astype(int).tolist(), "verdict": self.verdict}
        if self.goal != GOAL_WINNER:
            out["goal_verdict"] = self.goal_verdict
        if self.stick > 0.0:
            out["lead"] = int(self._LEAD[0])
        if self._betting or self._portfolio:
            out["hist"] = _state_numbers(self._H)
        if self._portfolio:
            out["portfolio"] = {
                "wealth": _state_numbers(self._PV),
                "paid": _state_numbers(self._PG[: self.L]),
                "pool": float(self._PG[self.L]),
            }
        if self.population is not None:
            out["wor"] = {
                "log_wealth": [[float(a), float(b)] for a, b in zip(self._LA, self._LB)],
                "sums": [float(x) for x in self.W],
                "sumsq": [float(x) for x in self._SQ],
            }
        return out

    def _load_extra(self, state: Mapping[str, Any]) -> None:
        try:
            B = np.array(state["BEAT"], dtype=np.bool_)
        except (KeyError, TypeError, ValueError):
            raise PolicyError("malformed dctas-pc state: BEAT must be an L x L matrix of 0/1") from None
        if B.shape != (self.L, self.L):
            raise PolicyError("malformed dctas-pc state: BEAT must be an L x L matrix of 0/1")
        self.BEAT = B
        kern.pc_recount(self.BEAT, self._CB, self._CW)
        lead = state.get("lead", -1)
        if isinstance(lead, bool) or not isinstance(lead, int) or not (-1 <= lead < self.L):
            raise PolicyError(f"malformed dctas-pc state: lead must be an arm index or -1, got {lead!r}")
        self._LEAD[0] = lead
        v = state.get("verdict")
        wor = self.population is not None or self.goal != GOAL_WINNER
        allowed = (None, NO_CONDORCET_WINNER, UNDECIDABLE) if wor else (None, NO_CONDORCET_WINNER)
        if v not in allowed:
            raise PolicyError(f"malformed dctas-pc state: unknown verdict {v!r}")
        self.verdict = v
        gv = state.get("goal_verdict")
        if gv not in (None, "certified", "undecidable") or (gv is not None and self.goal == GOAL_WINNER):
            raise PolicyError(f"malformed dctas-pc state: unknown goal_verdict {gv!r}")
        self.goal_verdict = gv
        if self.population is not None:
            self._load_wor(state)
        if self._betting or self._portfolio:
            self._load_hist(state)
        if self._portfolio:
            self._load_portfolio(state)

    def _load_portfolio(self, state: Mapping[str, Any]) -> None:
        port = state.get("portfolio")
        if not isinstance(port, Mapping):
            raise PolicyError("malformed dctas-pc state: the portfolio test needs 'portfolio'")
        try:
            PV = np.array(port["wealth"], dtype=float)
            paid = np.array(port["paid"], dtype=float)
            pool = float(port["pool"])
        except (KeyError, TypeError, ValueError):
            raise PolicyError("malformed dctas-pc state: portfolio needs wealth (L x L), paid (L) and pool") from None
        ok = PV.shape == (self.L, self.L) and paid.shape == (self.L,)
        if not ok or not (np.all(np.isfinite(PV)) and np.all(np.isfinite(paid)) and math.isfinite(pool)):
            raise PolicyError("malformed dctas-pc state: portfolio needs wealth (L x L), paid (L) and pool, finite")
        if np.any(PV < 0) or np.any(paid < 0) or pool < 0 or pool + paid.sum() > 1.0 + 1e-9:
            raise PolicyError("malformed dctas-pc state: portfolio wealth and cash must be >= 0, cash at most 1")
        self._PV = PV
        self._PG = np.append(paid, pool)

    def _load_hist(self, state: Mapping[str, Any]) -> None:
        try:
            H = np.array(state["hist"], dtype=float)
        except (KeyError, TypeError, ValueError):
            raise PolicyError("malformed dctas-pc state: the betting test needs 'hist' (K rows of 10 counts)") from None
        if H.shape != self._H.shape or not np.all(np.isfinite(H)) or np.any(H < 0):
            raise PolicyError("malformed dctas-pc state: 'hist' must be K rows of 10 counts >= 0")
        half = kern.PC_LEVELS
        if not (np.array_equal(H[:, :half].sum(axis=1), self.N) and np.array_equal(H[:, half:].sum(axis=1), self.N)):
            raise PolicyError("malformed dctas-pc state: 'hist' counts must add up to N")
        self._H = H

    def _load_wor(self, state: Mapping[str, Any]) -> None:
        wor = state.get("wor")
        if not isinstance(wor, Mapping):
            raise PolicyError("malformed dctas-pc state: population is set but 'wor' is missing")
        try:
            LW = np.array(wor["log_wealth"], dtype=float)
        except (KeyError, TypeError, ValueError):
            raise PolicyError("malformed dctas-pc state: wor.log_wealth must be K pairs of numbers") from None
        if LW.shape != (self.K, 2) or not np.all(np.isfinite(LW)):
            raise PolicyError("malformed dctas-pc state: wor.log_wealth must be K pairs of finite numbers")
        sums = _float_array(wor, "sums", self.K)
        SQ = _float_array(wor, "sumsq", self.K)
        if not np.array_equal(sums, self.W):
            raise PolicyError("malformed dctas-pc state: wor.sums must equal W")
        P = float(self.population or 0)
        if np.any(self.N > P) or np.any(SQ < 0) or np.any(SQ > self.W + 1e-9 * (1.0 + self.N)):
            raise PolicyError("malformed dctas-pc state: inconsistent without-replacement counts")
        self._LA = LW[:, 0].copy()
        self._LB = LW[:, 1].copy()
        self._SQ = SQ


def _log_or_floor(v: float) -> float:
    """``log v``, and a very negative number for a wealth of 0 (a bet never paid for)."""
    return math.log(v) if v > 0.0 else -1e300


def _validate_population(population: Any) -> int:
    """The prompt-set size for sampling without replacement: an integer >= 1."""
    if isinstance(population, bool) or not isinstance(population, (int, np.integer)):
        raise PolicyError(f"population must be an integer >= 1 (the number of prompts), got {population!r}")
    if int(population) < 1:
        raise PolicyError(f"population must be an integer >= 1 (the number of prompts), got {population!r}")
    return int(population)


def _float_array(state: Mapping[str, Any], key: str, size: int) -> np.ndarray:
    try:
        a = np.array(state[key], dtype=float)
    except KeyError:
        raise PolicyError(f"policy state is missing {key!r}") from None
    except (TypeError, ValueError):
        raise PolicyError(f"policy state {key!r} must be a list of numbers") from None
    if a.shape != (size,) or not np.all(np.isfinite(a)):
        raise PolicyError(f"policy state {key!r} must be {size} finite numbers")
    return a


def make_policy(algorithm: str, costs: Sequence[float], delta: float, **params: Any) -> Policy:
    """Build a policy by name: one of ``dctas-pc`` (default elsewhere), ``dctas``, ``tas``, ``crr``, ``dctac``, ``dpca``."""
    name = str(algorithm).lower()
    if name != "dctas-pc" and "population" in params:
        if params["population"] is not None:
            raise PolicyError(f"population (sampling without replacement) is supported by dctas-pc only, not {name!r}")
        params = {k: v for k, v in params.items() if k != "population"}
    if name == "dctas-pc":
        return PCPolicy(costs, delta, **params)
    if name == "dctas":
        return TrackingPolicy(costs, delta, cost_aware=True, stopping_rule="glr", name="dctas", **params)
    if name == "tas":
        return TrackingPolicy(costs, delta, cost_aware=False, stopping_rule="glr", name="tas", **params)
    if name == "dctac":
        return TrackingPolicy(costs, delta, cost_aware=True, stopping_rule="hoeffding", name="dctac", **params)
    if name == "crr":
        return CRRPolicy(costs, delta, **params)
    if name == "dpca":
        return DPCAPolicy(costs, delta, **params)
    raise PolicyError(f"unknown algorithm {algorithm!r}; choose one of {', '.join(ALGORITHMS)}")


def state_params(state: Mapping[str, Any]) -> dict[str, Any]:
    """The policy parameters a stored state was made with (for :func:`make_policy`).

    A dctas-pc state that names no ``threshold`` (and no ``population``) was written when the
    mixture test was the default: it gets ``threshold = "mixture"``; one that names no ``level``
    was written when each certificate was at level ``delta / (L - 1)``: it gets that level. So
    stored campaigns load, continue and replay exactly under their own rule.
    """
    params = dict(state.get("params") or {}) if isinstance(state, Mapping) else {}
    if (
        isinstance(state, Mapping)
        and str(state.get("algorithm", "")).lower() == "dctas-pc"
        and "threshold" not in params
        and params.get("population") is None
    ):
        params["threshold"] = PC_LEGACY_THRESHOLD
    if isinstance(state, Mapping) and str(state.get("algorithm", "")).lower() == "dctas-pc" and "level" not in params:
        params["level"] = PC_LEGACY_LEVEL
    return params


def policy_from_state(state: Mapping[str, Any]) -> Policy:
    """Rebuild a policy from :meth:`Policy.to_state`; it continues with identical decisions."""
    if not isinstance(state, Mapping):
        raise PolicyError("policy state must be a JSON object")
    if state.get("version") != STATE_VERSION:
        raise PolicyError(f"unsupported policy state version {state.get('version')!r}")
    try:
        policy = make_policy(state["algorithm"], state["costs"], state["delta"], **state_params(state))
    except KeyError as exc:
        raise PolicyError(f"policy state is missing {exc.args[0]!r}") from None
    policy.N = _float_array(state, "N", policy.K)
    policy.W = _float_array(state, "W", policy.K)
    if np.any(policy.N < 0) or np.any(policy.W < 0) or np.any(policy.W > policy.N):
        raise PolicyError("policy state has inconsistent counts (need 0 <= W <= N)")
    policy._rebuild()
    policy.stopped = bool(state.get("stopped", False))
    policy.winner = None if state.get("winner") is None else int(state["winner"])
    policy.stop_t = None if state.get("stop_t") is None else int(state["stop_t"])
    policy._load_extra(state)
    return policy
