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
* :func:`posterior_draws`: each pair's ``P_ij ~ Beta(1 + W_ij, 1 + W_ji)`` (kept for
  callers that want a model-free posterior; the service's pilot uses the next one);
* :func:`pilot_posterior_strengths` (a pilot): the Bradley-Terry strengths'
  posterior given the duels counted so far (Laplace approximation under the same
  ``N(0, spread^2)`` prior), so every drawn matrix is consistent with what the pilot saw;
* :func:`fixed_draws`: one known matrix (a simulated judge's).

Campaigns that store answers and verdicts (reuse) or draw prompts without
replacement pay for what is not yet stored, never more than the every-answer-once
ceiling, and certify on a prompt set: :func:`run_prompt_forecast` draws, per trial,
strengths, then a prompt-level verdict table of the campaign's ``P`` prompts
(:func:`algorithms.prompt_level.bradley_terry_prompts`, per-prompt strength noise
``prompt_sd`` and a per-order tie probability ``tie_prob``) and runs the service's
own ``dctas-pc`` policy on it (:func:`algorithms.prompt_policy_sim.policy_campaign`,
modes ``reuse`` and ``wor``).

Bounded: each trial stops at ``duel_cap`` duels (:func:`trial_duel_cap`; a reuse
trial at :data:`REUSE_DUELS_PER_VERDICT` duels per verdict) (it then counts as not
certified: its cost is a lower bound of the real one). Every trial
asked for runs: there is no time limit (a smaller count is the caller's choice).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, Sequence

import numpy as np

from .instance import Instance, condorcet_winner
from .oracle import solve_oracle
from .prompt_level import bradley_terry_prompts
from .prompt_policy_sim import POLICY_MODES, policy_campaign
from .prompt_sim import CAPPED
from .rounds import planned_in_rounds
from .simulator import simulate

__all__ = [
    "DEFAULT_SPREAD",
    "DEFAULT_TRIALS",
    "DEFAULT_TRIAL_DUEL_CAP",
    "DEFAULT_TIE_PROB",
    "DEFAULT_PROMPT_SD",
    "Forecast",
    "bradley_terry_draws",
    "bradley_terry_strengths",
    "posterior_draws",
    "pilot_posterior_strengths",
    "prompt_level_preference",
    "fixed_draws",
    "run_forecast",
    "run_prompt_forecast",
    "trial_duel_cap",
    "spread_summary",
    "SPREAD_GRID",
    "spread_weights",
    "stored_spread_weights",
    "combine_spread_weights",
    "learned_strengths",
    "pilot_learned_strengths",
]

DEFAULT_TRIALS = 200
DEFAULT_SPREAD = 0.5
DEFAULT_TRIAL_DUEL_CAP = 50_000
#: Pair-steps one trial may take (a step of dctas-pc scans every pair): caps the duels of a trial with many models.
TRIAL_PAIR_STEPS = 5_000_000
MAX_TRIALS = 1000
#: A reuse trial stops at this many duels per (pair, prompt) verdict (at least 1000 duels): by then its duels
#: are almost all free (stored answers and verdicts), so its spend is close to final while its duels are not.
REUSE_DUELS_PER_VERDICT = 10
#: Probability that one judge order says "tie" (prompt-level forecasts; both orders are combined, a split is a tie).
DEFAULT_TIE_PROB = 0.1
#: Standard deviation of a model's per-prompt strength around its strength (prompt-level forecasts).
DEFAULT_PROMPT_SD = 0.5


def bradley_terry_strengths(L: int, spread: float, n: int, rng: np.random.Generator) -> np.ndarray:
    """``n`` strength vectors (n x L), ``theta_i ~ N(0, spread^2)``."""
    if L < 2 or n < 1:
        raise ValueError("bradley_terry_draws needs L >= 2 and n >= 1")
    if not (math.isfinite(spread) and spread > 0):
        raise ValueError(f"spread must be a finite number > 0, got {spread!r}")
    return rng.normal(0.0, spread, size=(n, L))


def bradley_terry_draws(L: int, spread: float, n: int, rng: np.random.Generator) -> np.ndarray:
    """``n`` matrices (n x L x L) of a Bradley-Terry model with ``N(0, spread^2)`` strengths."""
    theta = bradley_terry_strengths(L, spread, n, rng)
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


_GH_X, _GH_W = np.polynomial.hermite_e.hermegauss(24)
_GH_W = _GH_W / _GH_W.sum()


def _link(d: np.ndarray, prompt_sd: float, tie_prob: float) -> tuple[np.ndarray, np.ndarray]:
    """Prompt-set preference ``p(d)`` of two models ``d`` apart in strength, and ``dp/dd``.

    Under :func:`algorithms.prompt_level.bradley_terry_prompts` one order is won with
    probability ``q = sigmoid(d + sqrt(2) prompt_sd z)`` (``z`` standard normal: the
    prompt), tied with ``tie_prob``; combining the two orders (a split is a tie) gives
    ``E v = (1 - tie_prob^2) q + tie_prob^2 / 2``. The expectation over ``z`` is a
    24-node Gauss-Hermite quadrature.
    """
    x = np.asarray(d, dtype=float)[..., None] + math.sqrt(2.0) * prompt_sd * _GH_X
    q = 1.0 / (1.0 + np.exp(-x))
    a = 1.0 - tie_prob**2
    p = a * (q @ _GH_W) + tie_prob**2 / 2.0
    dp = a * ((q * (1.0 - q)) @ _GH_W)
    return np.clip(p, 1e-9, 1 - 1e-9), dp


def prompt_level_preference(theta: Any, prompt_sd: float = DEFAULT_PROMPT_SD, tie_prob: float = DEFAULT_TIE_PROB):
    """The expected prompt-set matrix (L x L) of strengths ``theta`` under the prompt-level model."""
    th = np.asarray(theta, dtype=float)
    P, _ = _link(th[:, None] - th[None, :], prompt_sd, tie_prob)
    idx = np.arange(th.size)
    P[idx, idx] = 0.5
    return P


def pilot_posterior_strengths(
    wins: Any,
    counts: Any,
    spread: float,
    n: int,
    rng: np.random.Generator,
    *,
    prompt_sd: float = 0.0,
    tie_prob: float = 0.0,
) -> np.ndarray:
    """``n`` strength vectors from the Bradley-Terry posterior given a pilot's counts (Laplace approximation).

    Prior ``theta ~ N(0, spread^2 I)``; each pair's ``W_ij`` (wins, halves for ties)
    out of ``N_ij`` duels is a quasi-binomial observation of ``p(theta_i - theta_j)``
    (:func:`prompt_level_preference`'s link; ``prompt_sd = tie_prob = 0`` is the plain
    Bradley-Terry link). The maximum a posteriori point ``theta_hat`` is found by
    L-BFGS; the draws are ``N(theta_hat, H^-1)`` with ``H`` the prior precision plus
    the Fisher information at ``theta_hat``. With no duels this is the prior.
    """
    W = np.asarray(wins, dtype=float)
    N = np.asarray(counts, dtype=float)
    L = W.shape[0] if W.ndim == 2 else 0
    if W.shape != (L, L) or N.shape != (L, L) or L < 2:
        raise ValueError("wins and counts must be L x L matrices with L >= 2")
    if n < 1:
        raise ValueError("n must be >= 1")
    if not (math.isfinite(spread) and spread > 0):
        raise ValueError(f"spread must be a finite number > 0, got {spread!r}")
    theta_hat, H, _ = _laplace(W, N, spread, prompt_sd, tie_prob)
    cov = np.linalg.inv(H)
    return rng.multivariate_normal(theta_hat, (cov + cov.T) / 2.0, size=n, method="cholesky")


def _laplace(
    W: np.ndarray, N: np.ndarray, spread: float, prompt_sd: float, tie_prob: float
) -> tuple[np.ndarray, np.ndarray, float]:
    """The Laplace approximation of the strengths' posterior under ``N(0, spread^2 I)``: the maximum a
    posteriori point, the precision ``H`` there, and the log evidence of the counts (up to a term that
    does not depend on ``spread``): ``loglik(theta_hat) - prec |theta_hat|^2 / 2 + (L/2) log prec - log det(H) / 2``."""
    L = W.shape[0]
    iu, ju = np.triu_indices(L, 1)
    n_pair = np.maximum(N[iu, ju], 0.0)
    w_pair = np.clip(W[iu, ju], 0.0, n_pair)
    prec = 1.0 / spread**2

    def objective(th: np.ndarray) -> tuple[float, np.ndarray]:
        p, dp = _link(th[iu] - th[ju], prompt_sd, tie_prob)
        nll = -(w_pair * np.log(p) + (n_pair - w_pair) * np.log1p(-p)).sum() + 0.5 * prec * (th @ th)
        g_pair = -(w_pair / p - (n_pair - w_pair) / (1.0 - p)) * dp
        grad = prec * th
        np.add.at(grad, iu, g_pair)
        np.add.at(grad, ju, -g_pair)
        return float(nll), grad

    from scipy.optimize import minimize  # here, not at import: scipy.optimize is ~0.5 s of CPU

    res = minimize(objective, np.zeros(L), jac=True, method="L-BFGS-B")
    theta_hat = res.x
    p, dp = _link(theta_hat[iu] - theta_hat[ju], prompt_sd, tie_prob)
    info = n_pair * dp**2 / (p * (1.0 - p))
    H = prec * np.eye(L)
    for k, (i, j) in enumerate(zip(iu, ju)):
        H[i, i] += info[k]
        H[j, j] += info[k]
        H[i, j] -= info[k]
        H[j, i] -= info[k]
    log_evidence = -float(res.fun) + 0.5 * L * math.log(prec) - 0.5 * float(np.linalg.slogdet(H)[1])
    return theta_hat, H, log_evidence


#: The strength spreads a learned prior weighs (log-spaced, 0.05 to 2; every one above the service's
#: smallest spread, 0.01): a uniform weight on this grid is the hyperprior, uniform in log(spread).
#: **choice**: not below 0.05, models within about one point of win rate of each other: a campaign's
#: counts hardly tell such spreads apart from 0.1, and a hyperprior reaching far below would put most
#: of the weight there (measured: the forecast then drifts to the ceiling, docs/service.md).
SPREAD_GRID = np.geomspace(0.05, 2.0, 20)


def _counts(wins: Any, counts: Any) -> tuple[np.ndarray, np.ndarray]:
    W = np.asarray(wins, dtype=float)
    N = np.asarray(counts, dtype=float)
    L = W.shape[0] if W.ndim == 2 else 0
    if W.shape != (L, L) or N.shape != (L, L) or L < 2:
        raise ValueError("wins and counts must be L x L matrices with L >= 2")
    return W, N


def spread_weights(
    wins: Any,
    counts: Any,
    *,
    prior: Any = None,
    prompt_sd: float = 0.0,
    tie_prob: float = 0.0,
    grid: np.ndarray = SPREAD_GRID,
) -> np.ndarray:
    """The posterior weights of the spreads of ``grid`` given one campaign's counts: ``prior`` (default
    uniform on the grid) times the Laplace evidence of the counts under ``N(0, spread^2)`` strengths
    (:func:`pilot_posterior_strengths`'s model). Without a counted duel this is the prior."""
    W, N = _counts(wins, counts)
    w = np.full(len(grid), 1.0 / len(grid)) if prior is None else np.asarray(prior, dtype=float)
    if w.shape != (len(grid),) or not np.all(np.isfinite(w)) or np.any(w < 0) or w.sum() <= 0:
        raise ValueError("prior must be nonnegative weights, one per spread of the grid")
    if N.sum() <= 0:
        return w / w.sum()
    logs = np.array([_laplace(W, N, float(s), prompt_sd, tie_prob)[2] for s in grid])
    with np.errstate(divide="ignore"):
        post = np.log(w) + logs
    post = np.exp(post - post.max())
    return post / post.sum()


def stored_spread_weights(
    campaigns: Sequence[tuple[Any, Any]],
    *,
    prompt_sd: float = 0.0,
    tie_prob: float = 0.0,
    grid: np.ndarray = SPREAD_GRID,
) -> np.ndarray | None:
    """The spread of a new campaign's models, learned from campaigns already run (``(wins, counts)``
    each), as weights over ``grid``.

    A hierarchical model: each campaign has its own spread, ``log spread ~ N(mu, tau^2)``, with ``mu``
    and ``tau`` unknown (uniform over a grid of ``mu`` across the log grid and of ``tau`` from 0.1 to
    2). Each campaign's counts weigh each spread by their Laplace evidence (:func:`spread_weights`); the
    weights returned are the predictive of one more campaign's spread, ``N(mu, tau^2)`` averaged over
    the posterior of ``(mu, tau)``. **choice**: between one pooled spread (the stored campaigns
    compared other models, so their spreads differ) and a plain mixture of their posteriors (which
    ignores what they say together). None: no campaign with a counted duel."""
    ev = [
        spread_weights(W, N, prompt_sd=prompt_sd, tie_prob=tie_prob, grid=grid)
        for W, N in campaigns
        if np.asarray(N, dtype=float).sum() > 0
    ]
    return combine_spread_weights(ev, grid)


def combine_spread_weights(ev: Sequence[Any], grid: np.ndarray = SPREAD_GRID) -> np.ndarray | None:
    """:func:`stored_spread_weights` from each campaign's :func:`spread_weights` (computed once per
    campaign and kept by the caller); None for no campaign."""
    if not ev:
        return None
    x = np.log(grid)
    mus = np.linspace(x[0], x[-1], 41)
    taus = np.geomspace(0.1, 2.0, 16)
    # k[m, t, g]: the density of log spread x_g under N(mu_m, tau_t^2), normalised over the grid
    k = np.exp(-0.5 * ((x[None, None, :] - mus[:, None, None]) / taus[None, :, None]) ** 2)
    k /= k.sum(axis=2, keepdims=True)
    # each campaign's weights are proportional to its evidence (uniform hyperprior on the grid)
    log_post = sum(np.log(np.maximum(k @ e, 1e-300)) for e in ev)
    post = np.exp(log_post - np.max(log_post))
    post /= post.sum()
    out = np.einsum("mt,mtg->g", post, k)
    return out / out.sum()


def learned_strengths(
    L: int, weights: Any, n: int, rng: np.random.Generator, grid: np.ndarray = SPREAD_GRID
) -> np.ndarray:
    """``n`` strength vectors: per vector a spread drawn from ``weights`` over ``grid``, then
    ``theta_i ~ N(0, spread^2)``."""
    w = np.asarray(weights, dtype=float)
    if L < 2 or n < 1 or w.shape != (len(grid),):
        raise ValueError("need L >= 2, n >= 1 and one weight per spread of the grid")
    s = grid[rng.choice(len(grid), size=n, p=w / w.sum())]
    return rng.normal(0.0, 1.0, size=(n, L)) * s[:, None]


def pilot_learned_strengths(
    wins: Any,
    counts: Any,
    n: int,
    rng: np.random.Generator,
    *,
    prior: Any = None,
    prompt_sd: float = 0.0,
    tie_prob: float = 0.0,
    grid: np.ndarray = SPREAD_GRID,
) -> np.ndarray:
    """:func:`pilot_posterior_strengths` with the spread learned too: per vector a spread drawn from its
    posterior given the pilot (:func:`spread_weights`, hyperprior ``prior``, default uniform on the log
    grid), then the strengths from their posterior at that spread."""
    W, N = _counts(wins, counts)
    if n < 1:
        raise ValueError("n must be >= 1")
    w = spread_weights(W, N, prior=prior, prompt_sd=prompt_sd, tie_prob=tie_prob, grid=grid)
    picks = np.bincount(rng.choice(len(grid), size=n, p=w), minlength=len(grid))
    parts = [
        pilot_posterior_strengths(W, N, float(grid[k]), int(c), rng, prompt_sd=prompt_sd, tie_prob=tie_prob)
        for k, c in enumerate(picks)
        if c > 0
    ]
    out = np.concatenate(parts, axis=0)
    return out[rng.permutation(n)]


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
    """Per-trial results of :func:`run_forecast` or :func:`run_prompt_forecast` (one trial per draw)."""

    algorithm: str
    delta: float
    costs: np.ndarray  # cost of each trial (models and judge)
    duels: np.ndarray  # duels of each trial
    certified: np.ndarray  # False: the trial hit duel_cap
    lower_bounds: list[float] = field(default_factory=list)  # c* log(1/(4 delta)) per matrix with a Condorcet winner
    requested: int = 0
    duel_cap: int = DEFAULT_TRIAL_DUEL_CAP
    mode: str = "fresh"  # fresh (every duel pays), reuse or wor (prompt-level, pays what is not yet stored)
    ceiling: float | None = None  # every answer once and every pair judged once on every prompt (reuse, wor)
    rounds: np.ndarray | None = None  # run in rounds (a batch campaign): rounds of each trial
    extra_duels: np.ndarray | None = None  # ... and the duels each trial planned past its stop (paid, in ``costs``)

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
            "mode": self.mode,
            "cost": spread_summary(self.costs),
            "duels": spread_summary(self.duels.astype(float)),
            "lower_bound": float(np.median(self.lower_bounds)) if self.lower_bounds else None,
            "within_budget": self.within(budget, max_duels),
            "unfinished": int((~self.certified).sum()),
            "duel_cap": self.duel_cap,
            "ceiling": self.ceiling,
            **(
                {"rounds": spread_summary(self.rounds.astype(float)), "extra_duels": spread_summary(self.extra_duels)}
                if self.rounds is not None and self.extra_duels is not None
                else {}
            ),
        }


def _in_rounds(
    cost: float, duels: int, rounds: dict[str, Any], out_rounds: list[int], out_extra: list[float]
) -> tuple[float, int]:
    """A trial's (cost, duels) when its campaign runs in ``rounds``: the duels its rounds plan
    (:func:`algorithms.rounds.planned_in_rounds`), the extra ones at the trial's mean cost per duel."""
    planned, k = planned_in_rounds(duels, rounds)
    out_rounds.append(k)
    out_extra.append(float(planned - duels))
    return (cost * planned / duels if duels else cost), planned


def _check_trials(n: int) -> None:
    if n < 1 or n > MAX_TRIALS:
        raise ValueError(f"trials must be between 1 and {MAX_TRIALS}, got {n}")


def run_forecast(
    matrices: np.ndarray,
    costs: Sequence[float],
    delta: float,
    algorithm: str = "dctas-pc",
    judge_cost: float = 0.0,
    seed: int = 0,
    duel_cap: int | None = None,
    rounds: dict[str, Any] | None = None,
) -> Forecast:
    """One simulated campaign per matrix (in order), every duel paying its answers and judge (``fresh``).

    ``costs`` are the models' expected costs per query, ``judge_cost`` the judge's
    per duel (``c_J``); trial ``n`` uses simulator seed ``seed + n``; ``duel_cap``
    defaults to :func:`trial_duel_cap`. Every matrix is simulated. With ``rounds`` (a batch
    campaign's ``round_size``, ``growth``, ``max_round_size``) each trial also pays the duels its
    rounds plan past its stop (:func:`_in_rounds`, counted in ``duels``): an upper bound of a running
    campaign's, whose later rounds are cut to the stopping rule's forecast; the policy itself is not
    simulated in rounds (``llmduel simulate --round-size`` does that).
    """
    n = int(matrices.shape[0])
    _check_trials(n)
    L = len(costs)
    duel_cap = trial_duel_cap(L) if duel_cap is None else int(duel_cap)
    names = [f"m{i}" for i in range(L)]
    out_cost, out_duels, out_ok, bounds = [], [], [], []
    out_rounds: list[int] = []
    out_extra: list[float] = []
    for k in range(n):
        P = matrices[k]
        inst = Instance(names, list(costs), P, require_condorcet=False)
        res = simulate(inst, algorithm, delta, 1, seed=int(seed) + k, max_steps=int(duel_cap), judge_cost=judge_cost)
        cost, duels = float(res.costs[0]), int(res.pulls[0])
        if rounds is not None:
            cost, duels = _in_rounds(cost, duels, rounds, out_rounds, out_extra)
        out_cost.append(cost)
        out_duels.append(duels)
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
        rounds=np.asarray(out_rounds, dtype=np.int64) if rounds is not None else None,
        extra_duels=np.asarray(out_extra, dtype=float) if rounds is not None else None,
    )


def run_prompt_forecast(
    strengths: np.ndarray,
    costs: Sequence[float],
    delta: float,
    n_prompts: int,
    mode: str,
    judge_cost: float = 0.0,
    seed: int = 0,
    duel_cap: int | None = None,
    prompt_sd: float = DEFAULT_PROMPT_SD,
    tie_prob: float = DEFAULT_TIE_PROB,
    rounds: dict[str, Any] | None = None,
) -> Forecast:
    """One ``dctas-pc`` campaign per strength vector on a drawn prompt-level table (module docstring).

    Trial ``k`` draws its verdict table of ``n_prompts`` prompts from
    ``strengths[k]`` with seed ``seed + k`` and runs
    :func:`algorithms.prompt_policy_sim.policy_campaign` in ``mode`` (``reuse`` or
    ``wor``) with the same seed; ``duel_cap`` defaults to :func:`trial_duel_cap`, for
    ``reuse`` at most :data:`REUSE_DUELS_PER_VERDICT` duels per (pair, prompt) verdict
    (at least 1000). ``judge_cost`` is ``c_J``, the judge's cost of one
    verdict (both orders). A trial never spends more than the every-answer-once
    ceiling ``P sum_i c_i + L (L - 1) / 2 P c_J`` (what it pays is never paid twice).
    With ``rounds`` (a batch campaign's round sizes) each trial also pays the duels the rounds
    plan past its stop, at its own mean cost per duel (:func:`_in_rounds`; at most the ceiling).
    """
    if mode not in POLICY_MODES:
        raise ValueError(f"mode must be one of {POLICY_MODES}, got {mode!r}")
    th = np.asarray(strengths, dtype=float)
    n = int(th.shape[0])
    _check_trials(n)
    L = len(costs)
    if th.ndim != 2 or th.shape[1] != L or L < 2:
        raise ValueError(f"strengths must be an n x L array with L = {L} >= 2, got shape {th.shape}")
    if int(n_prompts) < 1:
        raise ValueError(f"n_prompts must be >= 1, got {n_prompts!r}")
    if duel_cap is None:
        duel_cap = trial_duel_cap(L)
        if mode == "reuse":
            duel_cap = min(duel_cap, max(1000, REUSE_DUELS_PER_VERDICT * L * (L - 1) // 2 * int(n_prompts)))
    duel_cap = int(duel_cap)
    out_cost, out_duels, out_ok = [], [], []
    out_rounds: list[int] = []
    out_extra: list[float] = []
    ceiling = 0.0
    for k in range(n):
        inst = bradley_terry_prompts(
            th[k],
            int(n_prompts),
            costs=list(costs),
            judge_cost=judge_cost / 2.0,
            prompt_sd=prompt_sd,
            tie_prob=tie_prob,
            seed=int(seed) + k,
        )
        ceiling = inst.every_answer_once_bound()
        r = policy_campaign(inst, mode, delta, int(seed) + k, max_duels=int(duel_cap))
        spend, duels = float(r.spend), int(r.duels)
        if rounds is not None:
            spend, duels = _in_rounds(spend, duels, rounds, out_rounds, out_extra)
            spend = min(spend, inst.every_answer_once_bound())
        out_cost.append(spend)
        out_duels.append(duels)
        out_ok.append(r.outcome != CAPPED)
    return Forecast(
        algorithm="dctas-pc",
        delta=float(delta),
        costs=np.asarray(out_cost, dtype=float),
        duels=np.asarray(out_duels, dtype=np.int64),
        certified=np.asarray(out_ok, dtype=bool),
        requested=n,
        duel_cap=int(duel_cap),
        mode=mode,
        ceiling=ceiling,
        rounds=np.asarray(out_rounds, dtype=np.int64) if rounds is not None else None,
        extra_duels=np.asarray(out_extra, dtype=float) if rounds is not None else None,
    )
