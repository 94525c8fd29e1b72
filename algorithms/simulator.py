"""Fast Monte-Carlo simulator of the policies on a known instance.

``simulate(instance, algorithm, delta, trials, seed, jobs)`` runs independent
trials: each draws duel outcomes ``1{U < p_ij}`` from the instance's matrix (with a
tie matrix ``tau``: 1 if ``U < p_ij - tau_ij/2``, 1/2 if ``U < p_ij + tau_ij/2``, else 0,
one uniform per duel either way) and
runs the policy until it stops (or ``max_steps`` duels). The per-step logic is
the compiled kernels of :mod:`algorithms._kernels`, the same functions the
step-wise :mod:`algorithms.policies` call, so both make identical decisions given
identical outcomes (``tests/algorithms/test_simulator.py`` checks this on traces).

Reproducibility: trial ``n`` uses seed ``SeedSequence(seed).generate_state(trials)[n]``
for numba's Mersenne Twister, whatever the number of jobs.
"""

from __future__ import annotations

import math
import os
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass, field
from multiprocessing import get_context
from typing import Any

import numpy as np
from numba import njit

from . import _kernels as kern
from .certificates import (
    PC_DEFAULTS,
    certificate_test,
    explore_for,
    no_winner_log_level,
    resolve_pc_level,
    tie_cap_for,
    validate_pc_params,
)
from .instance import Instance
from .oracle import effective_costs, solve_oracle, solve_pc_oracle, validate_judge_cost
from .policies import ALGORITHMS, CW_ASSUMPTION, PAPER_ALGORITHMS, DPCAPolicy, PolicyError, pair_index_arrays
from .thresholds import beta_constant

__all__ = ["simulate", "SimulationResult", "trace_trial", "DEFAULT_MAX_STEPS", "kernels_cached"]

DEFAULT_MAX_STEPS = 50_000_000

# algorithm codes for the kernels
_TRACK, _CRR, _DPCA, _PC = 0, 1, 2, 3
NO_CW = -2  # recommended[] value of a trial that ended with the verdict "no Condorcet winner"


@njit(cache=True)
def _run_trials(
    code,
    P,
    TIE,
    c_true,
    c_pol,
    hoeffding,
    beta_const,
    log_num,
    delta,
    delta_explore,
    k1,
    pc_rule,
    pc_c0,
    pc_stick,
    pc_tie_cap,
    pc_explore,
    pc_explore_frac,
    pc_nocw,
    seeds,
    max_steps,
    out_cost,
    out_pulls,
    out_rec,
    out_pp,
    out_stopped,
    trace_k,
    trace_s,
):
    L = P.shape[0]
    K = L * (L - 1) // 2
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
    CUM = np.zeros(K)
    alpha = np.zeros(K)
    zero = np.zeros(K)
    T = np.zeros((L, L))
    G = np.zeros((L, L))
    S = np.zeros(L)
    AMAX = np.zeros(L)
    FLAG = np.zeros(K, dtype=np.int64)
    WINS = np.zeros(L, dtype=np.int64)
    META = np.zeros(4, dtype=np.int64)
    n = np.zeros(K)
    s = np.zeros(K)
    ACT = np.zeros((L, L), dtype=np.bool_)
    ADV = -np.ones(L, dtype=np.int64)
    INA = np.zeros(L, dtype=np.bool_)
    BEAT = np.zeros((L, L), dtype=np.bool_)
    CB = np.zeros(L, dtype=np.int64)
    CW = np.zeros(L, dtype=np.int64)
    LEAD = -np.ones(1, dtype=np.int64)
    H = np.zeros((K, 2 * kern.PC_LEVELS))
    betting = code == 3 and pc_rule == kern.PC_BETTING
    portfolio = code == 3 and pc_rule == kern.PC_PORTFOLIO
    PV = np.zeros((L, L))
    PG = np.zeros(L + 1)
    tracing = trace_k.shape[0] > 0
    for trial in range(seeds.shape[0]):
        np.random.seed(seeds[trial])
        N[:] = 0.0
        W[:] = 0.0
        CUM[:] = 0.0
        alpha[:] = 0.0
        T[:, :] = 0.0
        G[:, :] = 0.0
        S[:] = 0.0
        AMAX[:] = 0.0
        FLAG[:] = 0
        WINS[:] = 0
        BEAT[:, :] = False
        CB[:] = 0
        CW[:] = 0
        LEAD[0] = -1
        if betting or portfolio:
            H[:, :] = 0.0
        if portfolio:
            kern.pc_port_init(PV, PG, kern.PC_PORT_RHO)
        META[0] = 1
        META[2] = -1
        META[3] = 0
        kern.dpca_start_explore(META, n, s, ACT)
        nz = 0
        nocw_wait = False  # every arm beaten at alpha, not yet each at beta (stays so: certificates are kept)
        cost = 0.0
        rec = -1
        steps = 0
        while steps < max_steps:
            # --- choose
            if code == 0:
                if nz == K:
                    kern.pull_allocation(G, S, AMAX, c_pol, PI, PJ, PK, alpha)
                k = kern.tracking_choose(N, alpha, CUM)
            elif code == 3:
                a = kern.pc_lead(CB, AMAX, LEAD, pc_stick)
                k = -1
                if nocw_wait and steps % 2 == 0:
                    k = kern.pc_nocw_choose(N, W, H, PI, PJ, BEAT, betting, pc_nocw)
                if k < 0:
                    k = kern.pc_choose(
                        N,
                        float(steps),
                        a,
                        G,
                        AMAX,
                        c_pol,
                        PI,
                        PJ,
                        PK,
                        BEAT,
                        CB,
                        alpha,
                        pc_tie_cap,
                        pc_explore,
                        pc_explore_frac,
                    )
            elif code == 1:
                k = kern.crr_choose(N, c_true, PI, PJ)
            else:
                k = kern.dpca_choose(META, n, ACT, ADV, INA, PK, zero)
            i = PI[k]
            j = PJ[k]
            score = kern.draw_score(P[i, j], TIE[i, j])
            if tracing:
                trace_k[steps] = k
                trace_s[steps] = score
            # --- record
            if code == 0 and nz == K:
                for q in range(K):
                    CUM[q] += alpha[q]
            N[k] += 1.0
            W[k] += score
            if N[k] == 1.0:
                nz += 1
            kern.refresh_pair(k, N, W, PI, PJ, c_pol, T, G, S, AMAX)
            cost += c_true[i] + c_true[j]
            steps += 1
            # --- stop
            if code == 3 and portfolio:
                if kern.pc_port_record(k, score, N, W, H, PI, PJ, PV, pc_c0, BEAT, CB, CW):
                    v = kern.pc_verdict(CB, CW)
                    if v != -1:
                        rec = v
                        break
                if pc_stick > 0.0:
                    kern.pc_track_leader(CB, AMAX, T, LEAD, pc_stick)
                a = kern.pc_lead(CB, AMAX, LEAD, pc_stick)
                if kern.pc_port_pay(a, T, N, W, PI, PK, PV, PG, kern.PC_PORT_RHO, kern.PC_PORT_Z0, pc_c0, BEAT, CB, CW):
                    v = kern.pc_verdict(CB, CW)
                    if v != -1:
                        rec = v
                        break
            elif code == 3:
                # the verdict can only change when a certificate is issued
                if betting:
                    kern.pc_hist_add(k, score, H)
                issued = (
                    kern.pc_update_bet(k, N, W, H, PI, PJ, pc_c0, BEAT, CB, CW)
                    if betting
                    else kern.pc_update(k, N, W, PI, PJ, pc_rule, pc_c0, BEAT, CB, CW)
                )
                # at the product level "no Condorcet winner" may wait for wealth, not a certificate:
                # once every arm is beaten, look again after every duel
                if issued or nocw_wait:
                    v = kern.pc_verdict_strict(CB, CW, N, W, H, PI, PJ, BEAT, betting, pc_nocw)
                    if v != -1:
                        rec = v
                        break
                    nocw_wait = pc_nocw > 0.0 and kern.pc_verdict(CB, CW) == -2
                if pc_stick > 0.0:
                    kern.pc_track_leader(CB, AMAX, T, LEAD, pc_stick)
            elif code == 2:
                kern.dpca_record(k, score, META, n, s, ACT, ADV, INA, PI, PJ, PK, c_true, delta, delta_explore, k1)
                if META[3] == 1:
                    rec = META[2]
                    break
            elif hoeffding:
                kern.dctac_update(k, N, W, PI, PJ, log_num, FLAG, WINS)
                w = kern.dctac_winner(WINS)
                if w >= 0:
                    rec = w
                    break
            else:
                a, z = kern.leader_and_Z(S)
                if z > kern.beta_at(float(steps), L, beta_const):
                    rec = a
                    break
        out_cost[trial] = cost
        out_pulls[trial] = steps
        out_stopped[trial] = rec >= 0 or rec == -2
        if rec == -1:
            rec, _ = kern.leader_and_Z(S)
        out_rec[trial] = rec
        for q in range(K):
            out_pp[trial, q] = N[q]


@dataclass
class SimulationResult:
    """Per-trial results of :func:`simulate`.

    ``costs``, ``pulls``, ``recommended`` (arm index), ``stopped`` (False when a
    trial hit ``max_steps``; its recommendation is then the empirical leader)
    and ``pair_pulls`` (trials x K, canonical pair order).
    """

    instance: Instance
    algorithm: str
    delta: float
    seed: int
    costs: np.ndarray
    pulls: np.ndarray
    recommended: np.ndarray
    stopped: np.ndarray
    pair_pulls: np.ndarray
    params: dict = field(default_factory=dict)

    @property
    def judge_cost(self) -> float:
        """``c_J``, included in ``costs`` once per duel."""
        return float(self.params.get("judge_cost", 0.0))

    @property
    def trials(self) -> int:
        return int(self.costs.shape[0])

    @property
    def errors(self) -> np.ndarray:
        """Wrong answers: not the Condorcet winner; with no Condorcet winner, every trial that named a winner."""
        cw = self.instance.condorcet_winner
        if cw is None:
            return self.recommended >= 0
        return self.recommended != cw

    @property
    def no_condorcet_winner(self) -> np.ndarray:
        """Trials that ended with the verdict "no Condorcet winner" (dctas-pc only)."""
        return self.recommended == NO_CW

    def summary(self) -> dict[str, Any]:
        """Mean cost with a 95% normal CI half-width, error rate, mean pulls, the lower bound and the ratio."""
        n = self.trials
        mean_cost = float(self.costs.mean())
        sd = float(self.costs.std(ddof=1)) if n > 1 else 0.0
        has_cw = self.instance.condorcet_winner is not None
        lb = solve_oracle(self.instance, judge_cost=self.judge_cost).lower_bound(self.delta) if has_cw else None
        pc_lb = solve_pc_oracle(self.instance, judge_cost=self.judge_cost).lower_bound(self.delta) if has_cw else None
        pairs = self.instance.pairs()
        paper = self.algorithm in PAPER_ALGORITHMS
        level = None
        if self.algorithm == "dctas-pc":  # the certificates' level the trials ran at (validated by simulate)
            p = {**PC_DEFAULTS, **self.params}
            level = resolve_pc_level(p["level"], threshold=p["threshold"], population=None)
        return {
            "algorithm": self.algorithm,
            "assumes_condorcet_winner": paper,
            "note": CW_ASSUMPTION if paper else None,
            "instance_has_condorcet_winner": has_cw,
            "no_condorcet_winner_rate": float(self.no_condorcet_winner.mean()),
            "delta": self.delta,
            "judge_cost": self.judge_cost,
            "trials": n,
            "seed": self.seed,
            "mean_cost": mean_cost,
            "ci95": 1.959963984540054 * sd / math.sqrt(n) if n > 1 else 0.0,
            "error_rate": float(self.errors.mean()),
            "errors": int(self.errors.sum()),
            "unfinished": int((~self.stopped).sum()),
            "mean_pulls": float(self.pulls.mean()),
            "lower_bound": lb,
            "cost_over_lower_bound": mean_cost / lb if lb else None,
            "pc_lower_bound": pc_lb,
            "cost_over_pc_lower_bound": mean_cost / pc_lb if pc_lb else None,
            "instance_has_ties": self.instance.ties is not None,
            "certificate_level": level,
            "pull_fractions": [
                {"pair": [self.instance.names[i], self.instance.names[j]], "fraction": float(f)}
                for (i, j), f in zip(pairs, self.pair_pulls.sum(axis=0) / max(1.0, self.pulls.sum()))
            ],
        }


def _kernel_args(instance: Instance, algorithm: str, delta: float, params: dict) -> tuple:
    algorithm = algorithm.lower()
    if algorithm not in ALGORITHMS:
        raise PolicyError(f"unknown algorithm {algorithm!r}; choose one of {', '.join(ALGORITHMS)}")
    if not (0 < delta < 1):
        raise PolicyError(f"delta must be in (0, 1), got {delta!r}")
    L = instance.L
    params = dict(params)
    try:
        judge_cost = validate_judge_cost(params.pop("judge_cost", 0.0))
    except ValueError as exc:
        raise PolicyError(str(exc)) from None
    # c_i + c_J/2: the kernels charge c_true[i] + c_true[j] = c_i + c_j + c_J per duel
    c_true = effective_costs(instance.costs, judge_cost)
    c_pol = np.ones(L) if algorithm == "tas" else c_true
    code = {"dctas": _TRACK, "tas": _TRACK, "dctac": _TRACK, "crr": _CRR, "dpca": _DPCA, "dctas-pc": _PC}[algorithm]
    K = L * (L - 1) // 2
    defaults: dict[str, Any] = {"delta_explore": 0.1, "k1": 10.0} if algorithm == "dpca" else {}
    if algorithm == "dctas-pc":
        defaults = dict(PC_DEFAULTS)
    unknown = set(params) - set(defaults)
    if unknown:
        raise PolicyError(f"unknown parameter(s) for {algorithm}: {', '.join(sorted(unknown))}")
    p = {**defaults, **params}
    if algorithm == "dpca":
        DPCAPolicy(c_true, delta, **p)  # validates the parameters
    pc_rule, pc_c0, pc_stick, pc_tie_cap, pc_explore, pc_explore_frac = 0, 0.0, 0.0, 0.0, 0, 1.0
    pc_nocw = 0.0
    if algorithm == "dctas-pc":
        try:
            threshold, pc_stick = validate_pc_params(p["threshold"], p["stick"])
            level = resolve_pc_level(p["level"], threshold=threshold, population=None)
        except ValueError as exc:
            raise PolicyError(str(exc)) from None
        pc_rule, pc_c0 = certificate_test(threshold, delta, L, level)
        pc_nocw = no_winner_log_level(delta, L, level)
        pc_tie_cap = tie_cap_for(threshold)
        pc_explore, pc_explore_frac = explore_for(threshold)
    return (
        code,
        np.ascontiguousarray(instance.preference, dtype=float),
        np.ascontiguousarray(instance.tie_matrix(), dtype=float),
        c_true,
        c_pol,
        algorithm == "dctac",
        beta_constant(delta, L),
        math.log(2 * math.pi**2 * K / (6 * delta)),
        float(delta),
        float(p.get("delta_explore", 0.1)),
        float(p.get("k1", 10.0)),
        int(pc_rule),
        float(pc_c0),
        float(pc_stick),
        float(pc_tie_cap),
        int(pc_explore),
        float(pc_explore_frac),
        float(pc_nocw),
    )


def _run_chunk(args: tuple, seeds: np.ndarray, max_steps: int) -> tuple[np.ndarray, ...]:
    n = seeds.shape[0]
    K = args[1].shape[0] * (args[1].shape[0] - 1) // 2
    cost = np.zeros(n)
    pulls = np.zeros(n, dtype=np.int64)
    rec = np.zeros(n, dtype=np.int64)
    pp = np.zeros((n, K))
    stopped = np.zeros(n, dtype=np.bool_)
    empty_k = np.zeros(0, dtype=np.int64)
    empty_s = np.zeros(0)
    _run_trials(*args, seeds, max_steps, cost, pulls, rec, pp, stopped, empty_k, empty_s)
    return cost, pulls, rec, pp, stopped


def simulate(
    instance: Instance,
    algorithm: str,
    delta: float,
    trials: int,
    seed: int = 0,
    jobs: int = 1,
    max_steps: int = DEFAULT_MAX_STEPS,
    **params: Any,
) -> SimulationResult:
    """Run ``trials`` independent trials of ``algorithm`` on ``instance`` at confidence ``1 - delta``.

    Parameters
    ----------
    instance : Instance
    algorithm : {"dctas", "tas", "crr", "dctac", "dpca"}
    delta : float in (0, 1)
    trials : int >= 1
    seed : int >= 0
        Trial ``n`` always gets the same random stream, whatever ``jobs``.
    jobs : int >= 1
        Worker processes (0 means all cores).
    max_steps : int
        Per-trial cap on the number of duels; a capped trial counts as not stopped.
    params : extra policy parameters: ``judge_cost`` (``c_J >= 0``, charged once per duel;
        default 0) for every algorithm, ``delta_explore`` and ``k1`` for DPCA, ``threshold``
        (``"betting"`` (default), ``"mixture"``, ``"kk"``, ``"stitched"``), ``stick`` (nats >= 0)
        and ``level`` (``"auto"`` (default: ``"product"`` for the betting and mixture tests, else ``"delta/L"``), ``"product"``, ``"delta/L"``, ``"delta/(L-1)"``) for dctas-pc. An instance with ``ties`` draws win / tie / loss (scores 1, 1/2, 0).
    """
    if not isinstance(trials, (int, np.integer)) or trials < 1:
        raise PolicyError(f"trials must be a positive integer, got {trials!r}")
    if not isinstance(seed, (int, np.integer)) or seed < 0:
        raise PolicyError(f"seed must be a non-negative integer, got {seed!r}")
    if not isinstance(jobs, (int, np.integer)) or jobs < 0:
        raise PolicyError(f"jobs must be a non-negative integer, got {jobs!r}")
    if not isinstance(max_steps, (int, np.integer)) or max_steps < 1:
        raise PolicyError(f"max_steps must be a positive integer, got {max_steps!r}")
    args = _kernel_args(instance, algorithm, float(delta), params)
    seeds = np.random.SeedSequence(int(seed)).generate_state(int(trials), dtype=np.uint32).astype(np.int64)
    jobs = (os.cpu_count() or 1) if jobs == 0 else int(jobs)
    jobs = max(1, min(jobs, int(trials)))
    if jobs == 1:
        parts = [_run_chunk(args, seeds, max_steps)]
    else:
        chunks = np.array_split(seeds, jobs * 4 if trials >= jobs * 4 else jobs)
        with ProcessPoolExecutor(max_workers=jobs, mp_context=get_context("fork")) as ex:
            parts = list(ex.map(_run_chunk, [args] * len(chunks), chunks, [max_steps] * len(chunks)))
    cost, pulls, rec, pp, stopped = (np.concatenate([p[q] for p in parts]) for q in range(5))
    params = dict(params)
    if not params.get("judge_cost", 0.0):
        params.pop("judge_cost", None)
    return SimulationResult(instance, algorithm.lower(), float(delta), int(seed), cost, pulls, rec, stopped, pp, params)


def trace_trial(
    instance: Instance, algorithm: str, delta: float, seed: int, max_steps: int = 1_000_000, **params: Any
) -> dict[str, Any]:
    """Run one trial with numba seed ``seed`` and return its duel-by-duel trace.

    Returns ``{"pairs": [(i, j), ...], "scores": [...], "recommended": int, "stopped": bool, "cost": float}``.
    """
    args = _kernel_args(instance, algorithm, float(delta), params)
    K = instance.n_pairs
    cost = np.zeros(1)
    pulls = np.zeros(1, dtype=np.int64)
    rec = np.zeros(1, dtype=np.int64)
    pp = np.zeros((1, K))
    stopped = np.zeros(1, dtype=np.bool_)
    tk = np.zeros(max_steps, dtype=np.int64)
    ts = np.zeros(max_steps)
    _run_trials(*args, np.array([seed], dtype=np.int64), max_steps, cost, pulls, rec, pp, stopped, tk, ts)
    PI, PJ, _ = pair_index_arrays(instance.L)
    n = int(pulls[0])
    return {
        "pairs": [(int(PI[k]), int(PJ[k])) for k in tk[:n]],
        "scores": ts[:n].tolist(),
        "recommended": int(rec[0]),
        "stopped": bool(stopped[0]),
        "cost": float(cost[0]),
    }


def kernels_cached() -> bool | None:
    """Whether the compiled simulator is already in numba's on-disk cache (``None``: cannot tell).

    Reads numba's cache index the way numba does (an index whose source stamp no longer
    matches counts as empty); used by the CLI to announce the one-off compilation.
    """
    try:
        return bool(_run_trials._cache._cache_file._load_index())
    except Exception:  # numba internals moved: unknown
        return None
