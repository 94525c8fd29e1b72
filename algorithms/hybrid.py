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

That is the ``"mixture"`` test, kept for the campaigns stored with it. The default,
``test="plugin"`` (``docs/algorithms.md``, *Hybrid*, "The plug-in test"), keeps (H1) with a
prediction ``f_b`` per judge-score bin ``b`` (the nearest of 0, 1/4, 1/2, 3/4, 1) instead of
``1/2 + lambda u``, shifted for each side against its alternative by the pair's estimated gap
(H6); bets ``min(gap_g / v_t, CAP / m_t)`` with ``v_t`` a plug-in second moment of the estimate
(H7) and ``m_t`` its one-sided range from the past; the active ``pi`` proportional to the root
of the human score's variance in the judge score's bin (H8); and each bin's lowest ``pi`` so far
(a running minimum, H9) as the range's ``pi``, so the range no longer pays for the floor. Its pairs are
chosen on a post-stratified estimate of each pair's preference (H10: the duels per judge-score bin times
the bins' predictions; ``alloc="strata"``), not on the mean of (H1), whose ``1 / pi`` weights make it noisy
over few duels; only the choice of pairs changes, so the validity argument is untouched.
"""

from __future__ import annotations

import math
from typing import Any, Iterable, Mapping, Sequence

import numpy as np
from numba import njit

from . import _kernels as kern
from .certificates import (
    PC_LEGACY_LEVEL,
    PC_UNION_LEVELS,
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
HYBRID_TESTS = ("plugin", "mixture")
DEFAULT_TEST = "plugin"
LEGACY_TEST = "mixture"  # the test of a stored state that names none
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
def hy_log_mix_with(ST, k, col, lpi):
    """``log sum_g exp(lpi[g] + ST[k, col + g])``: a mixture's log-wealth over the grid, the largest term first."""
    best = -1e300
    for g in range(MU_GRID):
        v = lpi[g] + ST[k, col + g]
        if v > best:
            best = v
    s = 0.0
    for g in range(MU_GRID):
        s += math.exp(lpi[g] + ST[k, col + g] - best)
    return best + math.log(s)


@njit(cache=True)
def hy_log_mix(ST, k, col):
    """``log sum_g pi_g exp(ST[k, col + g])``: the log-wealth of the mixture (H3) of one side of pair ``k``."""
    return hy_log_mix_with(ST, k, col, HY_LPI)


@njit(cache=True)
def hy_mean_wins(ST, k):
    """The plug-in win count the allocation reads, from the mean estimate: ``n clip(1/2 + mean(Y - 1/2), 0, 1)``
    (the mixture test, and the plug-in test with ``alloc="mean"``)."""
    n = ST[k, N_]
    return n * min(max(0.5 + ST[k, SY] / n, 0.0), 1.0)


@njit(cache=True)
def hy_close_record(k, wins, log_thr, ST, PI, PJ, c, T, G, S, AMAX, BEAT, CB, CW):
    """The end of recording a duel of pair ``k``, for either test (its count already raised): its plug-in win
    count ``wins``, the certificates its two wealths (``LA``, ``LB``) now pass at ``log_thr``, and the pair's
    refresh."""
    ST[k, WP] = wins
    i = PI[k]
    j = PJ[k]
    if ST[k, LA] >= log_thr and not BEAT[i, j]:
        kern.pc_set(i, j, BEAT, CB, CW)
    if ST[k, LB] >= log_thr and not BEAT[j, i]:
        kern.pc_set(j, i, BEAT, CB, CW)
    kern.refresh_pair(k, ST[:, N_], ST[:, WP], PI, PJ, c, T, G, S, AMAX)


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
    hy_close_record(k, hy_mean_wins(ST, k), log_thr, ST, PI, PJ, c, T, G, S, AMAX, BEAT, CB, CW)


# ---------------------------------------------------------------- the plug-in test (test="plugin", H6-H9)
NB = 5  # judge-score bins: nearest of 0, 1/4, 1/2, 3/4, 1 (arena-hard's five labels; a probability is binned)
BC = WG + 2 * MU_GRID  # first per-bin column; bin b holds BC + BW * b + (duels, votes, sum H, sum H^2, pi low)
BW = 5
B_N, B_V, B_S, B_S2, B_LO = range(BW)
NSTAT_PLUGIN = BC + BW * NB
F0 = 8.0  # prior weight (votes) of the linear prediction 1/2 + lambda u in a bin's prediction f_b (H6)
V0 = 0.2  # prior variance of a human score in a bin (H8) ...
W0 = 8.0  # ... with this weight in votes
G0 = 10.0  # prior weight (duels, at gap 0) of the estimated gap that shifts each side's predictions (H6)
CAP = 0.7  # every betting factor is >= 1 - CAP = 0.3


PG_LO, PG_HI = 3, 15  # prior "wide": mass MU_FOCUS on the gaps 0.5 * 0.8^g, g = 3..15 (0.018 to 0.26)
PG_HI_NARROW = 12  # prior "narrow" (the default): g = 3..12 (0.034 to 0.26)
HYBRID_PRIORS = ("narrow", "wide")
DEFAULT_PRIOR = "narrow"
LEGACY_PRIOR = "wide"  # the gap prior of a stored state that names none
# the allocation's estimate of a pair's preference under the plug-in test (H10): post-stratified by judge-score
# bin ("strata", the default) or the mean of (H1) ("mean": plug-in states stored before it, and the mixture test)
HYBRID_ALLOCS = ("strata", "mean")
DEFAULT_ALLOC = "strata"
LEGACY_ALLOC = "mean"


def _gap_tables(hi=None):
    hi = PG_HI if hi is None else hi
    gap = np.array([0.5 * MU_RATIO ** (g + 1) for g in range(MU_GRID)])
    inside = [PG_LO <= g + 1 <= hi for g in range(MU_GRID)]
    n_in = sum(inside)
    lpi = np.array(
        [
            math.log(MU_FOCUS / n_in) if inside[g] else math.log((1.0 - MU_FOCUS) / (MU_GRID - n_in))
            for g in range(MU_GRID)
        ]
    )
    return gap, lpi


HY_GAP, HY_GLPI = _gap_tables()
HY_GLPI_NARROW = _gap_tables(PG_HI_NARROW)[1]


@njit(cache=True)
def hy_bin(J):
    """The bin of judge score ``J``: the nearest of 0, 1/4, 1/2, 3/4, 1."""
    b = int(J * (NB - 1) + 0.5)
    if b < 0:
        return 0
    if b > NB - 1:
        return NB - 1
    return b


@njit(cache=True)
def hy_predict(ST, k, lam, f):
    """The prediction ``f_b`` of the human score in each bin (H6), into ``f``: the pair's mean human
    score in the bin, shrunk to ``1/2 + lambda (c_b - 1/2)`` (``c_b`` the bin's centre) with weight ``F0``."""
    for b in range(NB):
        c0 = BC + BW * b
        lin = 0.5 + lam * (b / (NB - 1.0) - 0.5)
        v = (ST[k, c0 + B_S] + F0 * lin) / (ST[k, c0 + B_V] + F0)
        f[b] = min(max(v, 0.0), 1.0)


@njit(cache=True)
def hy_rule(ST, k, b, rate, floor):
    """The active ``pi`` of bin ``b`` (H8): ``rate s_b / s_bar`` clipped to ``[floor, 1]``, with ``s_b`` the
    root of the pair's (shrunk) variance of the human score in the bin and ``s_bar`` its mean over the
    pair's duels, so the mean ``pi`` is about ``rate`` (Zrnic and Candes 2024: ``pi`` proportional to the
    root of the expected squared error of the best prediction given the judge's score)."""
    sb = 0.0
    num = 0.0
    den = 0.0
    for a in range(NB):
        c0 = BC + BW * a
        v = ST[k, c0 + B_V]
        q = ST[k, c0 + B_S2] - (ST[k, c0 + B_S] ** 2) / v if v > 0.0 else 0.0
        s = math.sqrt(max(q, 0.0) / (v + W0) + V0 * W0 / (v + W0))
        w = ST[k, c0 + B_N] + 1.0
        num += w * s
        den += w
        if a == b:
            sb = s
    p = rate * sb * den / num
    if p < floor:
        return floor
    if p > 1.0:
        return 1.0
    return p


@njit(cache=True)
def hy_pi_plugin(k, J, rate, floor, active, ST):
    """``pi`` of a duel of pair ``k`` with judge score ``J`` under the plug-in test: the fixed rate, or (H8)."""
    if not active:
        return rate
    return hy_rule(ST, k, hy_bin(J), rate, floor)


@njit(cache=True)
def hy_init_plugin(ST, rate, floor, active):
    """Each pair's lowest ``pi`` so far per bin (H9), at the start: the rule's value on no data."""
    for k in range(ST.shape[0]):
        for b in range(NB):
            ST[k, BC + BW * b + B_LO] = hy_pi_plugin(k, b / (NB - 1.0), rate, floor, active, ST)


@njit(cache=True)
def hy_ranges(ST, k, f):
    """``(m-, m+)`` of (H9): ``-m- <= Y - 1/2 <= m+`` for every score, vote and ``pi >= `` the bin's lowest."""
    lo = 0.0
    hi = 0.0
    for b in range(NB):
        pl = ST[k, BC + BW * b + B_LO]
        a = f[b] * (1.0 / pl - 1.0) + 0.5
        c = (1.0 - f[b]) / pl + f[b] - 0.5
        if a > lo:
            lo = a
        if c > hi:
            hi = c
    return lo, hi


@njit(cache=True)
def hy_moment(ST, k, f, m, rate, floor, active):
    """The plug-in second moment ``v`` of ``Y - 1/2`` (H7) for the predictions ``f``, from the bins'
    statistics of the past: ``sum_b w_b (a_b^2 + 2 a_b (m_b - f_b) + (s_b^2 + (m_b - f_b)^2) / pi_b) / sum_b w_b``
    with ``a_b = f_b - 1/2``, ``m_b`` the bin's estimated mean human score, ``w_b`` its duels (plus
    one), ``s_b^2`` its shrunk variance of the human score (H8) and ``pi_b`` the rule's current ``pi``
    (the rate when fixed): the expected square over the coin, not the realised squares, so one
    rare vote with a large weight does not swing it."""
    num = 0.0
    den = 0.0
    for b in range(NB):
        c0 = BC + BW * b
        nv = ST[k, c0 + B_V]
        q = ST[k, c0 + B_S2] - (ST[k, c0 + B_S] ** 2) / nv if nv > 0.0 else 0.0
        s2 = max(q, 0.0) / (nv + W0) + V0 * W0 / (nv + W0)
        p = hy_pi_plugin(k, b / (NB - 1.0), rate, floor, active, ST)
        w = ST[k, c0 + B_N] + 1.0
        a = f[b] - 0.5
        e = m[b] - f[b]
        num += w * (a * a + 2.0 * a * e + (s2 + e * e) / p)
        den += w
    return num / den


@njit(cache=True)
def hy_strata_wins(ST, k):
    """The plug-in win count the allocation reads with ``alloc="strata"`` (H10): ``sum_b n_b f_b``, the pair's
    duels in each judge-score bin times the bin's prediction (H6, unshifted): a post-stratified estimate of
    the human preference, which counts every duel's judge score and the human votes only through the bins'
    means, without the ``1 / pi`` weights that make the mean of (H1) noisy over few duels."""
    f = np.empty(NB)
    hy_predict(ST, k, hy_pair_lambda(ST, k), f)
    w = 0.0
    for b in range(NB):
        w += ST[k, BC + BW * b + B_N] * f[b]
    return min(max(w, 0.0), ST[k, N_])


@njit(cache=True)
def hy_record_plugin(
    k, J, H, human, pi, rate, floor, active, log_thr, ST, PI, PJ, c, T, G, S, AMAX, BEAT, CB, CW, narrow, strata
):  # fmt: skip
    """Record one duel of pair ``k`` under the plug-in test (H6-H9).

    From the past only: ``lambda`` (H4), the bins' predictions ``f`` (H6), the plug-in second
    moment ``v`` of ``Y - 1/2`` (H7) and the one-sided ranges (H9); then ``Y`` (H1 with ``f``),
    every component's two log-wealths, the statistics, each bin's lowest ``pi`` (H9) and the
    certificates at ``log_thr``; the allocation's win count from the pair's statistics after the duel:
    post-stratified (``strata``, H10) or the mean of (H1).
    """
    n = ST[k, N_]
    lam = hy_pair_lambda(ST, k)
    f = np.empty(NB)
    hy_predict(ST, k, lam, f)
    b = hy_bin(J)
    y = f[b] - 0.5
    if human:
        y += (H - f[b]) / pi
    # each side's predictions shifted against its alternative by the estimated gap (H6)
    gap = ST[k, SY] / (n + G0)
    fp = np.empty(NB)
    fm = np.empty(NB)
    for a in range(NB):
        fp[a] = min(max(f[a] - max(gap, 0.0), 0.0), 1.0)
        fm[a] = min(max(f[a] + max(-gap, 0.0), 0.0), 1.0)
    yp = fp[b] - 0.5
    ym = fm[b] - 0.5
    if human:
        yp += (H - fp[b]) / pi
        ym += (H - fm[b]) / pi
    lo = hy_ranges(ST, k, fp)[0]
    hi = hy_ranges(ST, k, fm)[1]
    vp = hy_moment(ST, k, fp, f, rate, floor, active)
    vm = hy_moment(ST, k, fm, f, rate, floor, active)
    for g in range(MU_GRID):
        if yp != 0.0:
            ST[k, WG + g] += math.log1p(min(HY_GAP[g] / vp, CAP / lo) * yp)
        if ym != 0.0:
            ST[k, WG + MU_GRID + g] += math.log1p(-min(HY_GAP[g] / vm, CAP / hi) * ym)
    u = J - 0.5
    c0 = BC + BW * b
    ST[k, c0 + B_N] += 1.0
    if human:
        h = H - 0.5
        r = h - lam * u
        ST[k, NUM] += h * u / pi
        ST[k, RES] += r * r / pi
        ST[k, NH] += 1.0
        ST[k, c0 + B_V] += 1.0
        ST[k, c0 + B_S] += H
        ST[k, c0 + B_S2] += H * H
    ST[k, DEN] += u * u
    ST[k, LA] = hy_log_mix_plugin(ST, k, WG, narrow)
    ST[k, LB] = hy_log_mix_plugin(ST, k, WG + MU_GRID, narrow)
    ST[k, N_] = n + 1.0
    ST[k, SY] += y
    ST[k, SY2] += y * y
    ST[k, SPI] += pi
    if active:
        for a in range(NB):
            p = hy_rule(ST, k, a, rate, floor)
            if p < ST[k, BC + BW * a + B_LO]:
                ST[k, BC + BW * a + B_LO] = p
    wins = hy_strata_wins(ST, k) if strata else hy_mean_wins(ST, k)
    hy_close_record(k, wins, log_thr, ST, PI, PJ, c, T, G, S, AMAX, BEAT, CB, CW)


@njit(cache=True)
def hy_log_mix_plugin(ST, k, col, narrow):
    """``log sum_g w_g exp(ST[k, col + g])`` with the plug-in test's gap prior: ``narrow`` (mass
    ``MU_FOCUS`` on the gaps 0.034 to 0.26, the default) or wide (0.018 to 0.26, stored states before it)."""
    return hy_log_mix_with(ST, k, col, HY_GLPI_NARROW if narrow else HY_GLPI)


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
    test : ``"plugin"`` (default: the binned prediction, the plug-in bets and, for
        ``human_rate="active"``, the binned rule H8, docs/algorithms.md *Hybrid*) or ``"mixture"``
        (the linear prediction, bets normalised by the range at ``pi_min``, rule H5; states
        stored before the plug-in test).
    prior : the plug-in test's gap prior, ``"narrow"`` (default: mass 0.98 on the gaps 0.034 to 0.26)
        or ``"wide"`` (0.018 to 0.26; plug-in states stored before the narrow prior).
    alloc : the plug-in test's estimate of each pair's preference for choosing pairs (H10), ``"strata"``
        (default: post-stratified by judge-score bin) or ``"mean"`` (the mean of H1; plug-in states stored
        before it). The mixture test always uses the mean. Either way only the choice of pairs changes.

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
        level: str = "delta/L",
        test: str = DEFAULT_TEST,
        prior: str = DEFAULT_PRIOR,
        alloc: str = DEFAULT_ALLOC,
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
            # the product level rests on per-pair tests of the pair's outcomes alone; the AIPW tests are not
            level = validate_pc_level(level, PC_UNION_LEVELS)
            self.level = "delta/L" if level == "auto" else level
        except ValueError as exc:
            raise PolicyError(str(exc)) from None
        if test not in HYBRID_TESTS:
            raise PolicyError(f"unknown hybrid test {test!r}; choose one of {', '.join(HYBRID_TESTS)}")
        self.test = test
        self.plugin = test == "plugin"
        if prior not in HYBRID_PRIORS:
            raise PolicyError(f"unknown hybrid gap prior {prior!r}; choose one of {', '.join(HYBRID_PRIORS)}")
        self.prior = prior
        self.narrow = prior == "narrow"  # the plug-in test's gap prior (H7); the mixture test has its own (H3)
        if alloc not in HYBRID_ALLOCS:
            raise PolicyError(f"unknown hybrid allocation estimate {alloc!r}; choose one of {', '.join(HYBRID_ALLOCS)}")
        self.alloc = alloc
        self.strata = self.plugin and alloc == "strata"  # the allocation's estimate (H10)
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
        self.ST = np.zeros((self.K, NSTAT_PLUGIN if self.plugin else NSTAT))
        if self.plugin:
            hy_init_plugin(self.ST, float(self.rate), float(self.floor), self.active)
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
        """``pi`` for this duel: the fixed rate, or the active rule (H8; H5 for the mixture test) from
        the judge's score of ``i``."""
        k = self.pair_index(i, j)
        J = _unit(judge_score, "judge_score")
        if not self.active:
            return float(self.human_rate)
        if i > j:
            J = 1.0 - J
        return self.pi_of_row(self.ST[k], J)

    def pi_of_row(self, row: Any, J: float) -> float:
        """The active ``pi`` for judge score ``J`` (of the pair's first arm) from one pair's statistics
        ``row`` (a replay recomputes a stored ``pi`` from the pair's row when it was drawn)."""
        st = np.asarray(row, dtype=float).reshape(1, -1)
        if self.plugin:
            return float(hy_pi_plugin(0, J, float(self.rate), float(self.floor), self.active, st))
        return float(hy_pi(0, J, self.rate, self.floor, st))

    def lowest_pi(self, i: int, j: int, judge_score: Any) -> float:
        """The smallest ``pi`` :meth:`record` accepts for this duel: ``pi_min``, or for the plug-in
        test with the active rule the lowest ``pi`` its rule has given in the bin of ``J`` (H9)."""
        k = self.pair_index(i, j)
        J = _unit(judge_score, "judge_score")
        if not (self.plugin and self.active):
            return float(self.pi_min)
        if i > j:
            J = 1.0 - J
        return float(self.ST[k, BC + BW * int(hy_bin(J)) + B_LO])

    def record(self, i: int, j: int, judge_score: Any, human_score: Any, pi: Any) -> None:
        """Record a duel: the judge's score of ``i``, the human's score of ``i`` and the probability
        ``pi`` (``pi_min <= pi <= 1``) with which a human was asked. ``human_score`` is None
        exactly when the coin said "no human": the estimate (H1) is unbiased only if every
        asked human's vote is recorded."""
        k = self.pair_index(i, j)
        J = _unit(judge_score, "judge_score")
        human = human_score is not None
        H = _unit(human_score, "human_score") if human else 0.5
        lo = self.lowest_pi(i, j, J)
        try:
            p = float(pi)
        except (TypeError, ValueError):
            raise PolicyError(f"pi must be a number in [{lo}, 1], got {pi!r}") from None
        if not (lo <= p <= 1.0):
            raise PolicyError(
                f"pi must be in [{lo}, 1] (the smallest human probability this test's range allows), got {pi!r}"
            )
        if i > j:
            J, H = 1.0 - J, 1.0 - H
        if self.plugin:
            hy_record_plugin(
                k, J, H, human, p, float(self.rate), float(self.floor), self.active, self._log_thr, self.ST,
                self.PI, self.PJ, self._c, self._T, self._G, self._S, self._AMAX, self.BEAT, self._CB, self._CW,
                self.narrow, self.strata,
            )  # fmt: skip
        else:
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
        if self.test != LEGACY_TEST:  # a state without "test" was made with the mixture test
            out["test"] = self.test
        if self.prior != LEGACY_PRIOR:  # a state without "prior" was made with the wide gap prior
            out["prior"] = self.prior
        if self.alloc != LEGACY_ALLOC:  # a state without "alloc" chose pairs on the mean of (H1)
            out["alloc"] = self.alloc
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
        if ST.shape != p.ST.shape or B.shape != (p.L, p.L) or not np.all(np.isfinite(ST)):
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
    """The options a stored hybrid state was made with: its ``params``, ``level = "delta/(L-1)"``
    when it names none (every hybrid state stored before the level ``delta / L``) and
    ``test = "mixture"`` when it names none (before the plug-in test), the wide gap prior and the
    allocation on the mean of (H1) when it names none (before the narrow prior, before H10), so it loads,
    continues and replays with its own decisions."""
    out = dict(state.get("params") or {})  # a malformed params: TypeError or ValueError for the caller
    out.setdefault("level", PC_LEGACY_LEVEL)
    out.setdefault("test", LEGACY_TEST)
    out.setdefault("prior", LEGACY_PRIOR)
    out.setdefault("alloc", LEGACY_ALLOC)
    return out


def policy_from_state(state: Mapping[str, Any]) -> Any:
    """Rebuild any policy from its state: hybrid states here, the others by :mod:`algorithms.policies`."""
    if isinstance(state, Mapping) and state.get("algorithm") == HYBRID:
        return HybridPolicy.from_state(state)
    if is_restricted_state(state):  # some models disabled (algorithms/restricted.py)
        return RestrictedPolicy.from_state(state)
    return _plain_policy_from_state(state)
