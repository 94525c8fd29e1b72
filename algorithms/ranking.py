"""A readable ranking from a duel log: each model's win rate against the field, with bootstrap intervals.

The win rate of model i *against the field* is the mean, over the opponents j that
i met at least once, of its empirical win rate against j::

    r_i = mean_{j : N_ij > 0} W_ij / N_ij

(ties count half a win each). **choice**: averaging the pairwise rates, rather than
dividing i's wins by its duels, weighs every opponent equally: the sampling policies
spend most duels on the close pairs, so a raw share of wins would depend on which
opponents the policy happened to pick for i.

Confidence intervals are percentile bootstrap intervals (B. Efron and R. Tibshirani,
*An Introduction to the Bootstrap*, Chapman & Hall 1993, ch. 13), resampling whole
duels with replacement as Chatbot Arena does for its leaderboard intervals (W.-L.
Chiang et al., "Chatbot Arena", ICML 2024). A duel log is a sample of categorical
outcomes (which pair, which score), so one resample of n duels is one multinomial
draw of n over the observed categories: exact, and fast for any n. Seeded: the
same log and seed give the same intervals.

The bootstrap intervals describe the resampling variability of these estimates
only: a campaign stops when its certificate crosses, which biases them (measured:
docs/algorithms.md, *Ranking intervals*), so they are **descriptive**.

Anytime-valid intervals, simultaneous over the models (``interval="betting"``, what the service
shows): :func:`betting_field_intervals`, betting confidence sequences per pair whose wealths
multiply per model (docs/algorithms.md, *Ranking intervals*).

Anytime-valid intervals per model (``interval="anytime"``, wider): per pair,
the two-sided normal-mixture confidence sequence of a mean of scores in [0, 1]
(H. Robbins, "Statistical methods related to the law of the iterated logarithm",
Ann. Math. Statist. 1970; S. R. Howard, A. Ramdas, J. McAuliffe, J. Sekhon,
"Time-uniform, nonparametric, nonasymptotic confidence sequences", Ann. Statist.
2021)::

    |S_n - n p_ij| < sqrt(2 (n/4 + rho) log(sqrt((n/4 + rho) / rho) / alpha'))

holds for every ``n`` at once with probability at least ``1 - alpha'`` (Ville's
inequality on the mixture over ``lambda ~ N(0, 1/rho)`` of the supermartingales
``exp(lambda (S_n - n p_ij) - lambda^2 n / 8)``, Hoeffding's lemma), so also at the
campaign's stopping time, whatever rule chose the pairs. Model ``i``'s win rate
against the whole field ``(1/(L-1)) sum_j p_ij`` then lies between the means of its
``L - 1`` pair bounds (``[0, 1]`` for an opponent never met) with probability at
least ``1 - alpha`` when each pair uses ``alpha' = alpha / (L - 1)`` (union bound).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from .betting_bounds import field_bounds, pair_hulls

INTERVALS = ("betting", "anytime", "bootstrap")
#: Duels of a pair at which the anytime interval is tightest (any choice is valid).
ANYTIME_TUNED_AT = 100


@dataclass(frozen=True)
class Ranking:
    """Per-model estimates (index = model); ``order``: model indices, best first."""

    win_rate: npt.NDArray[np.float64]  # NaN for a model without any counted duel
    low: npt.NDArray[np.float64]
    high: npt.NDArray[np.float64]
    duels: npt.NDArray[np.int64]  # counted duels the model took part in
    order: list[int]
    level: float
    reps: int
    interval: str = "bootstrap"


def field_win_rates(wins: npt.ArrayLike, counts: npt.ArrayLike) -> npt.NDArray[np.float64]:
    """``r_i = mean_{j: N_ij > 0} W_ij / N_ij`` for one matrix (or a stack ``(..., L, L)``); NaN without data."""
    W = np.asarray(wins, dtype=float)
    N = np.asarray(counts, dtype=float)
    met = N > 0
    with np.errstate(invalid="ignore", divide="ignore"):
        rate = np.where(met, W / np.where(met, N, 1.0), 0.0)
        n_opp = met.sum(axis=-1)
        return np.where(n_opp > 0, rate.sum(axis=-1) / np.maximum(n_opp, 1), np.nan)


def mixture_radius(n: npt.ArrayLike, alpha: float, tuned_at: int = ANYTIME_TUNED_AT) -> npt.NDArray[np.float64]:
    """Half-width of the anytime-valid interval of a mean of ``n`` scores in [0, 1] at level ``alpha``.

    ``sqrt(2 (n/4 + rho) log(sqrt((n/4 + rho)/rho)/alpha)) / n`` with
    ``rho = m / (2 log(1/alpha) + log(1 + 2 log(1/alpha)))``, ``m = tuned_at / 4``: the
    bound is near its tightest at ``tuned_at`` duels. ``inf`` for ``n = 0``.
    """
    if not 0 < alpha < 1:
        raise ValueError("alpha must be in (0, 1)")
    n = np.asarray(n, dtype=float)
    ell = math.log(1.0 / alpha)
    rho = (tuned_at / 4.0) / (2.0 * ell + math.log(1.0 + 2.0 * ell))
    v = n / 4.0 + rho
    with np.errstate(divide="ignore", invalid="ignore"):
        r = np.sqrt(2.0 * v * np.log(np.sqrt(v / rho) / alpha)) / n
    return np.where(n > 0, r, np.inf)


def anytime_field_intervals(
    wins: npt.ArrayLike, counts: npt.ArrayLike, level: float = 0.95
) -> tuple[npt.NDArray[np.float64], npt.NDArray[np.float64]]:
    """Per model, an interval for its win rate against the whole field valid at any stopping time.

    ``wins[i][j]``: the sum of ``i``'s scores against ``j`` over ``counts[i][j]`` duels.
    Each pair's interval has level ``alpha / (L - 1)`` (module docstring), clipped
    to [0, 1]; the model's bounds are the means of its pair bounds.
    """
    W = np.asarray(wins, dtype=float)
    N = np.asarray(counts, dtype=float)
    L = W.shape[0]
    if L < 2 or W.shape != (L, L) or N.shape != (L, L):
        raise ValueError("wins and counts must be L x L matrices with L >= 2")
    if not 0 < level < 1:
        raise ValueError("level must be in (0, 1)")
    rad = mixture_radius(N, (1.0 - level) / (L - 1))
    with np.errstate(divide="ignore", invalid="ignore"):
        mean = np.where(N > 0, W / np.where(N > 0, N, 1.0), 0.5)
    lo = np.clip(mean - rad, 0.0, 1.0)
    hi = np.clip(mean + rad, 0.0, 1.0)
    off = ~np.eye(L, dtype=bool)
    low = np.array([lo[m][off[m]].mean() for m in range(L)])
    high = np.array([hi[m][off[m]].mean() for m in range(L)])
    return low, high


def _pair_rates(weights, starts, s_sorted, pair_lo, pair_hi, n_models):
    """Field win rates for each row of category ``weights`` (shape (B, C), sorted by pair).

    Per pair p: N_p and the lower model's wins W_p (sums over the pair's categories);
    then every model averages its rate over the pairs it met (sums by model over the pairs'
    lower and higher models: time linear in the pairs, :func:`_by_model`).
    """
    Np = np.add.reduceat(weights, starts, axis=1)
    Wp = np.add.reduceat(weights * s_sorted, starts, axis=1)
    met = Np > 0
    rate_lo = np.where(met, Wp / np.where(met, Np, 1.0), 0.0)
    rate_hi = np.where(met, 1.0 - rate_lo, 0.0)
    sums = _by_model(rate_lo, pair_lo, n_models) + _by_model(rate_hi, pair_hi, n_models)
    n_opp = _by_model(met.astype(float), pair_lo, n_models) + _by_model(met.astype(float), pair_hi, n_models)
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(n_opp > 0, sums / np.maximum(n_opp, 1.0), np.nan)


def _by_model(values, model, n_models):
    """``out[:, m] = sum of values[:, p] over the pairs p with model[p] == m`` (sorted, then np.add.reduceat)."""
    order = np.argsort(model, kind="stable")
    sm = model[order]
    starts = np.flatnonzero(np.r_[True, sm[1:] != sm[:-1]])
    out = np.zeros((values.shape[0], n_models))
    if len(order):
        out[:, sm[starts]] = np.add.reduceat(values[:, order], starts, axis=1)
    return out


def duels_from_counts(
    wins: npt.ArrayLike, counts: npt.ArrayLike
) -> tuple[list[int], list[int], list[float], list[int]]:
    """A counts-only record (``wins[i, j]`` of ``counts[i, j]`` duels of each pair ``i < j``, ties as half
    wins rounded to whole duels) as :func:`bootstrap_ranking`'s ``model_i``, ``model_j``, ``score_i`` and
    ``weights``: per pair, one row of ``i``'s wins and one of its losses."""
    W = np.asarray(wins, dtype=float)
    N = np.asarray(counts, dtype=float)
    a: list[int] = []
    b: list[int] = []
    s: list[float] = []
    w: list[int] = []
    for i in range(W.shape[0]):
        for j in range(i + 1, W.shape[0]):
            a += [i, i]
            b += [j, j]
            s += [1.0, 0.0]
            w += [int(round(W[i, j])), int(round(N[i, j] - W[i, j]))]
    return a, b, s, w


def bootstrap_ranking(
    model_i: npt.ArrayLike,
    model_j: npt.ArrayLike,
    score_i: npt.ArrayLike,
    n_models: int,
    *,
    weights: npt.ArrayLike | None = None,
    reps: int = 1000,
    level: float = 0.95,
    seed: int = 0,
    interval: str = "bootstrap",
) -> Ranking:
    """Win rates against the field and their intervals: percentile bootstrap (descriptive) or ``anytime``.

    Duel k opposed ``model_i[k]`` and ``model_j[k]`` and scored ``score_i[k]`` for the
    first (1 win, 0.5 tie, 0 loss); ``weights[k]`` (whole numbers, default 1) says how many
    duels row k stands for, so a log aggregated by outcome gives the same result as the
    full log. ``reps`` resamples of all duels, seeded by ``seed`` (bootstrap only);
    ``interval="anytime"``: :func:`anytime_field_intervals` (valid under the campaign's stopping, per model);
    ``interval="betting"``: :func:`betting_field_intervals` (valid under the stopping, for every model at once).
    """
    if interval not in INTERVALS:
        raise ValueError(f"interval must be one of {INTERVALS}, got {interval!r}")
    if not 0 < level < 1:
        raise ValueError("level must be in (0, 1)")
    if reps < 1:
        raise ValueError("reps must be >= 1")
    a = np.asarray(model_i, dtype=np.int64).ravel()
    b = np.asarray(model_j, dtype=np.int64).ravel()
    s = np.asarray(score_i, dtype=float).ravel()
    w = np.ones(len(a), dtype=np.int64) if weights is None else np.asarray(weights, dtype=np.int64).ravel()
    if not (len(a) == len(b) == len(s) == len(w)):
        raise ValueError("model_i, model_j, score_i and weights must have the same length")
    if np.any(w < 0):
        raise ValueError("weights must be >= 0")
    if len(a) and (a.min() < 0 or b.min() < 0 or max(a.max(), b.max()) >= n_models or np.any(a == b)):
        raise ValueError("model indices must be distinct and in [0, n_models)")
    if np.any((s < 0) | (s > 1)) or not np.all(np.isfinite(s)):
        raise ValueError("scores must be in [0, 1]")
    # Categories: (lower index, higher index, score of the lower one).
    lo, hi = np.minimum(a, b), np.maximum(a, b)
    s_lo = np.where(a == lo, s, 1.0 - s)
    keys, inverse = np.unique(np.stack([lo, hi, s_lo], axis=1), axis=0, return_inverse=True)
    counts = np.bincount(inverse.ravel(), weights=w, minlength=len(keys)).astype(np.int64)
    keep = counts > 0
    keys, counts = keys[keep], counts[keep]
    cat_i, cat_j, cat_s = keys[:, 0].astype(int), keys[:, 1].astype(int), keys[:, 2]
    n = int(counts.sum())
    # np.unique sorts rows, so categories are already grouped by pair (lo, hi).
    new_pair = np.ones(len(keys), dtype=bool)
    new_pair[1:] = (cat_i[1:] != cat_i[:-1]) | (cat_j[1:] != cat_j[:-1])
    starts = np.flatnonzero(new_pair)
    pair_lo, pair_hi = cat_i[starts], cat_j[starts]
    duels = np.zeros(n_models, dtype=np.int64)
    np.add.at(duels, cat_i, counts)
    np.add.at(duels, cat_j, counts)
    low = np.full(n_models, np.nan)
    high = np.full(n_models, np.nan)
    if n == 0:
        rate = np.full(n_models, np.nan)
    elif interval in ("anytime", "betting"):
        rate = _pair_rates(counts[None, :].astype(float), starts, cat_s, pair_lo, pair_hi, n_models)[0]
        Wm = np.zeros((n_models, n_models))
        Nm = np.zeros((n_models, n_models))
        np.add.at(Wm, (cat_i, cat_j), counts * cat_s)
        np.add.at(Wm, (cat_j, cat_i), counts * (1.0 - cat_s))
        np.add.at(Nm, (cat_i, cat_j), counts)
        np.add.at(Nm, (cat_j, cat_i), counts)
        Tm = np.zeros((n_models, n_models))
        np.add.at(Tm, (cat_i, cat_j), counts * (cat_s == 0.5))
        Tm = Tm + Tm.T
        if n_models >= 2:
            if interval == "anytime":
                low, high = anytime_field_intervals(Wm, Nm, level)
            else:
                low, high = betting_field_intervals(Wm, Nm, level, ties=Tm)
        low = np.where(np.isfinite(rate), low, np.nan)
        high = np.where(np.isfinite(rate), high, np.nan)
    else:
        rate = _pair_rates(counts[None, :].astype(float), starts, cat_s, pair_lo, pair_hi, n_models)[0]
        rng = np.random.default_rng(seed)
        draws = rng.multinomial(n, counts / n, size=reps).astype(float)
        boot = _pair_rates(draws, starts, cat_s, pair_lo, pair_hi, n_models)  # (reps, L)
        alpha = (1.0 - level) / 2.0
        for m in range(n_models):
            col = boot[:, m]
            col = col[np.isfinite(col)]
            if len(col) and np.isfinite(rate[m]):
                low[m], high[m] = np.quantile(col, [alpha, 1.0 - alpha])
    order = sorted(range(n_models), key=lambda m: (-np.nan_to_num(rate[m], nan=-1.0), m))
    return Ranking(rate, low, high, duels, order, level, reps if interval == "bootstrap" else 0, interval)


#: the grid of candidate means of :func:`betting_field_intervals`
BET_GRID = np.linspace(0.0, 1.0, 1001)
#: its constant bets, as the Fisher distances ``z = 2 |asin(sqrt(q)) - asin(sqrt(p))|`` between the candidate
#: mean ``p`` and the mean ``q`` a bet backs (a bet on ``q`` gains ``n z^2 / 2`` nats over ``n`` scores of mean ``q``)
BET_DISTANCES = 0.85 * 0.8 ** np.arange(14)
#: the largest fraction of the wealth a bet may lose on one score (every factor stays >= 0.01)
BET_CAP = 0.99


def _bet_tables() -> tuple[npt.NDArray[np.float64], ...]:
    """The per-score logs of :func:`pair_log_wealth`'s factors on :data:`BET_GRID` x :data:`BET_DISTANCES`.

    A bet above ``p`` backs ``q = sin^2(asin(sqrt(p)) + z / 2)``: ``lambda = f / p`` with
    ``f = min((q - p) / (1 - p), BET_CAP)``, factors ``1 + f (1 - p) / p`` on a score of 1 and ``1 - f`` on 0;
    a bet below backs ``q = sin^2(asin(sqrt(p)) - z / 2)``: ``f = min((p - q) / p, BET_CAP)``, factors
    ``1 + f p / (1 - p)`` on 0 and ``1 - f`` on 1; on a tie, the mean of the two. Returns
    ``(up, up_loss, up_tie, down, down_loss, down_tie)``, each ``(G, K)``.
    """
    m = BET_GRID[:, None]
    z = BET_DISTANCES[None, :]
    theta = np.arcsin(np.sqrt(m))
    q_up = np.sin(np.minimum(theta + z / 2.0, np.pi / 2.0)) ** 2
    q_down = np.sin(np.maximum(theta - z / 2.0, 0.0)) ** 2
    f_up = np.clip((q_up - m) / np.maximum(1.0 - m, 1e-12), 0.0, BET_CAP)
    f_down = np.clip((m - q_down) / np.maximum(m, 1e-12), 0.0, BET_CAP)
    up = np.log1p(f_up / np.maximum(m, 1e-12) * (1.0 - m))
    down = np.log1p(f_down / np.maximum(1.0 - m, 1e-12) * m)
    # a tie (score 1/2): the factor is the mean of the factors on 1 and on 0 (it is linear in the score)
    up_tie = np.log(0.5 * np.exp(up) + 0.5 * (1.0 - f_up))
    down_tie = np.log(0.5 * np.exp(down) + 0.5 * (1.0 - f_down))
    return up, np.log1p(-f_up), up_tie, down, np.log1p(-f_down), down_tie


_BET_TABLES = _bet_tables()
_BET_UP, _BET_UP_LOSS, _BET_UP_TIE, _BET_DOWN, _BET_DOWN_LOSS, _BET_DOWN_TIE = _BET_TABLES
#: The prior weight :func:`betting_field_intervals` puts on the bets against the side of the bound it
#: computes (the rest keeps the wealth from collapsing on the other side of the estimate).
BET_SIDE_WEIGHT = 0.99
#: The union of :func:`betting_field_intervals` over the ``2 L`` one-sided sets gives each side of model ``m`` the share
#: ``alpha w(r_m) / 2`` of ``alpha``, ``w(r) = ((1 - ALPHA_TILT) + 2 ALPHA_TILT r) / L`` at its true win rate ``r_m``
#: against the field (the shares sum to ``alpha`` since the win rates sum to ``L / 2``): the models near the top,
#: the ones a certificate names, get up to ``1.9 / L`` of it, a model that loses every duel ``0.1 / L``.
ALPHA_TILT = 0.9


def pair_log_wealth(score_sum: float, n: float, up_weight: float = 0.5, ties: float = 0) -> npt.NDArray[np.float64]:
    """``log M(p)`` on :data:`BET_GRID`: a two-sided mixture of constant bets against the mean ``p`` of ``n``
    scores in [0, 1] summing to ``score_sum``, ``ties`` of them exactly 1/2.

    ``up_weight`` of the prior weight bets on scores above ``p``, the rest below, each evenly over the
    distances of :data:`BET_DISTANCES` (:func:`_bet_tables`); each factor ``1 + lambda (y - p)`` is positive
    and has mean 1 when the mean is ``p``. By concavity of ``log(1 + lambda (y - p))`` in ``y`` the wealth is
    at least the value computed from the sum alone (the chord between ``y = 0`` and ``y = 1``), which is what
    this returns for the scores other than the ties, whose factors are exact. The grid and the bets are
    symmetric, so the opponent's wealth is this one reversed (``score_sum``, ``p`` and the sides mirrored).
    """
    if not 0.0 < up_weight < 1.0:
        raise ValueError(f"up_weight must be in (0, 1), got {up_weight!r}")
    if n <= 0:
        return np.zeros_like(BET_GRID)
    T = float(ties)
    S, F = float(score_sum) - 0.5 * T, float(n) - float(score_sum) - 0.5 * T
    k = len(BET_DISTANCES)
    X = np.concatenate(
        [
            S * _BET_UP + F * _BET_UP_LOSS + T * _BET_UP_TIE + math.log(up_weight / k),
            S * _BET_DOWN_LOSS + F * _BET_DOWN + T * _BET_DOWN_TIE + math.log((1.0 - up_weight) / k),
        ],
        axis=1,
    )
    top = X.max(axis=1, keepdims=True)
    return np.log(np.exp(X - top).sum(axis=1)) + top[:, 0]


def pair_log_wealth_at(
    index: int, score_sums: npt.ArrayLike, counts: npt.ArrayLike, up_weight: float = 0.5, ties: npt.ArrayLike = 0
) -> npt.NDArray[np.float64]:
    """:func:`pair_log_wealth` at the one candidate mean ``BET_GRID[index]``, for arrays of score sums, duel
    counts and ties (any shape, element by element)."""
    if not 0.0 < up_weight < 1.0:
        raise ValueError(f"up_weight must be in (0, 1), got {up_weight!r}")
    T = np.asarray(ties, dtype=float)[..., None]
    S = np.asarray(score_sums, dtype=float)[..., None] - 0.5 * T
    F = np.asarray(counts, dtype=float)[..., None] - S - T
    k = len(BET_DISTANCES)
    X = np.concatenate(
        [
            S * _BET_UP[index] + F * _BET_UP_LOSS[index] + T * _BET_UP_TIE[index] + math.log(up_weight / k),
            S * _BET_DOWN_LOSS[index]
            + F * _BET_DOWN[index]
            + T * _BET_DOWN_TIE[index]
            + math.log((1.0 - up_weight) / k),
        ],
        axis=-1,
    )
    top = X.max(axis=-1, keepdims=True)
    return np.log(np.exp(X - top).sum(axis=-1)) + top[..., 0]


def betting_field_intervals(
    wins: npt.ArrayLike, counts: npt.ArrayLike, level: float = 0.95, ties: npt.ArrayLike | None = None
) -> tuple[npt.NDArray[np.float64], npt.NDArray[np.float64]]:
    """Per model, an interval for its win rate against the field, valid at any stopping time and
    **simultaneously for every model** at ``level`` (docs/algorithms.md, *Ranking intervals*).
    ``ties[i][j]``: how many of the pair's duels scored exactly 1/2 (symmetric; none if ``None``): their
    factors are taken exactly, the other scores through the chord, so knowing the ties narrows the intervals.

    For each model ``m`` and each side of its interval, its ``L - 1`` pair wealths
    (:func:`pair_log_wealth`, :data:`BET_SIDE_WEIGHT` of the prior on the bets against that side)
    multiply into one nonnegative martingale of the vector ``(p_mj)_j`` (a duel changes one factor);
    Ville's inequality at ``alpha w(r_m) / 2`` (:data:`ALPHA_TILT`: a share that grows with the model's true win
    rate ``r_m``, the shares summing to ``alpha``) and the union over the ``2 L`` processes give the confidence
    sets ``sum_j log M_j(p_mj) < log(2 / (alpha w(mean_j p_mj)))``, and each bound is the extreme of
    ``mean_j p_mj`` over its set, bounded through weak duality and a fixed point in the candidate mean
    (:mod:`algorithms.betting_bounds`: exact on the grid's cells, compiled). A pair never compared is free in
    [0, 1].
    """
    W = np.asarray(wins, dtype=float)
    N = np.asarray(counts, dtype=float)
    L = W.shape[0]
    T = np.zeros_like(N) if ties is None else np.asarray(ties, dtype=float)
    if L < 2 or W.shape != (L, L) or N.shape != (L, L) or T.shape != (L, L):
        raise ValueError("wins, counts and ties must be L x L matrices with L >= 2")
    if not 0 < level < 1:
        raise ValueError("level must be in (0, 1)")
    if np.any(T < 0) or np.any(T > N) or np.any(0.5 * T > W + 1e-9) or np.any(W > N - 0.5 * T + 1e-9):
        raise ValueError("ties must be between 0 and the duels, and the wins must count them as halves")
    # Ordered pair (a, b): a's score, against a mean of it too high (a's upper bound, b's lower bound):
    # mostly the bets on scores below the mean. Its hull depends on (W[a, b], T[a, b], N[a, b]) only.
    off_diag = ~np.eye(L, dtype=bool)
    met = (N > 0) & off_diag
    key_of = np.full((L, L), -1, dtype=np.int64)
    if met.any():
        pairs = np.stack([W[met], T[met], N[met]], axis=1)
        uniq, inverse = np.unique(pairs, axis=0, return_inverse=True)
        key_of[met] = inverse.ravel()
        xs, ys, off = pair_hulls(
            np.ascontiguousarray(uniq[:, 0]),
            np.ascontiguousarray(uniq[:, 1]),
            np.ascontiguousarray(uniq[:, 2]),
            BET_GRID,
            _BET_TABLES,
            math.log(1.0 - BET_SIDE_WEIGHT),
            math.log(BET_SIDE_WEIGHT),
        )
    else:
        xs, ys, off = np.zeros(0), np.zeros(0), np.zeros(1, dtype=np.int64)
    return field_bounds(key_of, xs, ys, off, 1.0 - level, ALPHA_TILT)
