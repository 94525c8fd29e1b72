"""Compiled (numba) kernels shared by the step-wise policies and the simulator.

Every decision a policy makes goes through these functions, both when a live
campaign asks for its next pair and when the simulator runs millions of steps,
so the two make identical decisions given identical outcomes by construction.

Pair ``k`` is ``(PI[k], PJ[k])`` with ``PI[k] < PJ[k]`` in lexicographic order;
``PK[i, j]`` is the pair index of ``{i, j}`` (-1 on the diagonal).
Per-pair state: ``N[k]`` judged duels, ``W[k]`` score of ``PI[k]`` (1 a win, 0.5 half).
Derived arrays (pure functions of ``N`` and ``W``, rebuilt on load):
``T[i, j] = N_ij d(phat_ij, 1/2) 1{phat_ij < 1/2}`` (evidence terms),
``G[i, j] = d(phat_ij, 1/2) 1{phat_ij < 1/2} / (c_i + c_j)`` (the oracle's g),
``S[i] = sum_j T[i, j]`` and ``AMAX[i] = max_j G[i, j]``.
"""

from __future__ import annotations

import math

import numpy as np
from numba import njit

from .prompt_level import log_wealth_step
from .reuse_costs import COST_FLOOR as PC_WOR_COST_FLOOR  # a duel already paid for still counts 1% of a fresh one

GAMMA_RTOL = 1e-9  # relative tolerance when collecting the argmax set Gamma_m


@njit(cache=True)
def kl_half(x):
    """``d(x, 1/2)`` if ``x < 1/2`` else 0."""
    if x >= 0.5:
        return 0.0
    r = (1.0 - x) * math.log(2.0 * (1.0 - x))
    if x > 0.0:
        r += x * math.log(2.0 * x)
    return r


@njit(cache=True)
def draw_score(p, tau):
    """One duel's score from one uniform: 1 below ``p - tau/2``, 1/2 up to ``p + tau/2``, else 0.

    With ``tau = 0`` this is the Bernoulli draw ``1{U < p}`` to the bit (the simulator's draw
    before ties existed).
    """
    u = np.random.random()
    if u < p - 0.5 * tau:
        return 1.0
    if u < p + 0.5 * tau:
        return 0.5
    return 0.0


@njit(cache=True)
def refresh_pair(k, N, W, PI, PJ, c, T, G, S, AMAX):
    """Recompute the derived entries touched by pair ``k`` (rows ``PI[k]`` and ``PJ[k]``)."""
    i = PI[k]
    j = PJ[k]
    n = N[k]
    if n == 0:
        di = 0.0
        dj = 0.0
    else:
        p = W[k] / n
        di = kl_half(p)
        dj = kl_half(1.0 - p)
    T[i, j] = n * di
    T[j, i] = n * dj
    cs = c[i] + c[j]
    G[i, j] = di / cs
    G[j, i] = dj / cs
    row_stats(i, T, G, S, AMAX)
    row_stats(j, T, G, S, AMAX)


@njit(cache=True)
def row_stats(a, T, G, S, AMAX):
    """``S[a] = sum_b T[a, b]`` (fixed order, so identical however reached) and ``AMAX[a] = max_b G[a, b]``."""
    s = 0.0
    m = 0.0
    for b in range(S.shape[0]):
        s += T[a, b]
        if G[a, b] > m:
            m = G[a, b]
    S[a] = s
    AMAX[a] = m


@njit(cache=True)
def rebuild(N, W, PI, PJ, c, T, G, S, AMAX):
    T[:, :] = 0.0
    G[:, :] = 0.0
    for k in range(N.shape[0]):
        refresh_pair(k, N, W, PI, PJ, c, T, G, S, AMAX)
    for a in range(S.shape[0]):
        row_stats(a, T, G, S, AMAX)


@njit(cache=True)
def leader_and_Z(S):
    """``(argmin S, Z)`` where ``Z = max_i min_{j != i} (S_j - S_i)`` = second smallest minus smallest."""
    L = S.shape[0]
    a = 0
    for i in range(1, L):
        if S[i] < S[a]:
            a = i
    second = np.inf
    for i in range(L):
        if i != a and S[i] < second:
            second = S[i]
    return a, second - S[a]


@njit(cache=True)
def pull_allocation(G, S, AMAX, c, PI, PJ, PK, alpha):
    """WeightPullAllocation (paper, Algorithm 2) on the current estimate; writes ``alpha``.

    The leader ``a`` is the arm of smallest evidence (the empirical Condorcet
    winner when one exists). For ``m != a``: cost fraction
    ``w_m = (1/alpha_m) / sum_n (1/alpha_n)`` spread evenly over ``Gamma_m``
    (maxima within a relative tolerance); pull fractions
    ``alpha_ij = (w_ij/(c_i+c_j)) / sum_kl (w_kl/(c_k+c_l))`` (Lemma 2).
    If some ``m != a`` loses to nobody empirically (``alpha_m = 0``), the
    allocation is uniform over pairs.
    """
    L = S.shape[0]
    K = alpha.shape[0]
    a = 0
    for i in range(1, L):
        if S[i] < S[a]:
            a = i
    inv_sum = 0.0
    for m in range(L):
        if m == a:
            continue
        if AMAX[m] <= 0.0:
            for k in range(K):
                alpha[k] = 1.0 / K
            return
        inv_sum += 1.0 / AMAX[m]
    for k in range(K):
        alpha[k] = 0.0
    for m in range(L):
        if m == a:
            continue
        wm = (1.0 / AMAX[m]) / inv_sum
        thr = AMAX[m] * (1.0 - GAMMA_RTOL)
        z = 0
        for n in range(L):
            if n != m and G[m, n] >= thr:
                z += 1
        for n in range(L):
            if n != m and G[m, n] >= thr:
                alpha[PK[m, n]] += wm / z
    tot = 0.0
    for k in range(K):
        alpha[k] = alpha[k] / (c[PI[k]] + c[PJ[k]])
        tot += alpha[k]
    for k in range(K):
        alpha[k] = alpha[k] / tot


@njit(cache=True)
def tracking_choose(NEFF, alpha, CUM):
    """Forced exploration, then C-tracking (paper, Algorithm 1, lines 4-8).

    ``NEFF`` counts judged plus in-flight duels. While some pair has
    ``NEFF_k = 0`` or ``NEFF_k < sqrt(t)`` (``t = sum NEFF``), pull the least
    pulled pair; otherwise pull ``argmin_k NEFF_k - (CUM_k + alpha_k)``.
    Ties go to the lowest pair index.
    """
    K = NEFF.shape[0]
    t = 0.0
    kmin = 0
    for k in range(K):
        t += NEFF[k]
        if NEFF[k] < NEFF[kmin]:
            kmin = k
    if NEFF[kmin] == 0 or NEFF[kmin] < math.sqrt(t):
        return kmin
    best = 0
    bestv = np.inf
    for k in range(K):
        v = NEFF[k] - (CUM[k] + alpha[k])
        if v < bestv:
            bestv = v
            best = k
    return best


@njit(cache=True)
def crr_choose(NEFF, c, PI, PJ):
    """CRR (Appendix B): ``argmin_k (c_i + c_j) N_k``, lowest index on ties."""
    best = 0
    bestv = np.inf
    for k in range(NEFF.shape[0]):
        v = (c[PI[k]] + c[PJ[k]]) * NEFF[k]
        if v < bestv:
            bestv = v
            best = k
    return best


@njit(cache=True)
def beta_at(t, L, beta_const):
    """``beta(t, delta) = 3(L-1) log(1 + log(t/(L-1))) + beta_const`` with ``t`` floored at ``L-1``."""
    r = t / (L - 1.0)
    if r < 1.0:
        r = 1.0
    return 3.0 * (L - 1) * math.log(1.0 + math.log(r)) + beta_const


@njit(cache=True)
def dctac_flag(k, N, W, log_num, K):
    """Hoeffding test of pair k for DCTAC: +1 if PI[k] confidently wins, -1 if PJ[k] does, else 0.

    ``phat - sqrt(log(2 pi^2 N^2 binom(L,2) / (6 delta)) / (2N)) > 1/2``;
    ``log_num = log(2 pi^2 K / (6 delta))``.
    """
    n = N[k]
    if n == 0:
        return 0
    p = W[k] / n
    rad = math.sqrt((log_num + 2.0 * math.log(n)) / (2.0 * n))
    if p - rad > 0.5:
        return 1
    if (1.0 - p) - rad > 0.5:
        return -1
    return 0


@njit(cache=True)
def dctac_update(k, N, W, PI, PJ, log_num, FLAG, WINS):
    K = N.shape[0]
    old = FLAG[k]
    if old == 1:
        WINS[PI[k]] -= 1
    elif old == -1:
        WINS[PJ[k]] -= 1
    f = dctac_flag(k, N, W, log_num, K)
    FLAG[k] = f
    if f == 1:
        WINS[PI[k]] += 1
    elif f == -1:
        WINS[PJ[k]] += 1


@njit(cache=True)
def dctac_recount(N, W, PI, PJ, log_num, FLAG, WINS):
    """Rebuild every pair's Hoeffding flag and the per-arm counts of confident wins from scratch."""
    FLAG[:] = 0
    WINS[:] = 0
    for k in range(N.shape[0]):
        dctac_update(k, N, W, PI, PJ, log_num, FLAG, WINS)


@njit(cache=True)
def dctac_winner(WINS):
    L = WINS.shape[0]
    for i in range(L):
        if WINS[i] == L - 1:
            return i
    return -1


# --------------------------------------------------------------------------- DPCA
# META = [r (round, from 1), phase (0 explore, 1 verify), candidate, done]
# n, s: per-pair counts and scores of the current phase (fresh samples per phase);
# ACT[i, j]: ordered pair (i, j) still in the exploration set Z;
# ADV[i]: adversary j(i) in verification; INA[i]: i still in A.


@njit(cache=True)
def _dpca_bounds(k, i, n, s, PI, L, d):
    """(lcb, ucb) of ``p_ij - 1/2`` from pair k's phase samples, with confidence d."""
    nk = n[k]
    x = s[k] / nk
    if PI[k] != i:
        x = 1.0 - x
    x -= 0.5
    rad = math.sqrt(math.log(2.0 * nk * nk * L * L / d) / (2.0 * nk))
    return x - rad, x + rad


@njit(cache=True)
def dpca_start_explore(META, n, s, ACT):
    META[1] = 0
    n[:] = 0
    s[:] = 0.0
    L = ACT.shape[0]
    for i in range(L):
        for j in range(L):
            ACT[i, j] = i != j


@njit(cache=True)
def dpca_choose(META, n, ACT, ADV, INA, PK, NEFF_PEND):
    """Round robin over the pairs of the current phase: least phase samples (+ in flight) first."""
    L = ACT.shape[0]
    best = -1
    bestv = np.inf
    if META[1] == 0:
        for i in range(L):
            for j in range(i + 1, L):
                if ACT[i, j] or ACT[j, i]:
                    k = PK[i, j]
                    v = n[k] + NEFF_PEND[k]
                    if v < bestv:
                        bestv = v
                        best = k
    else:
        for i in range(L):
            if INA[i]:
                k = PK[i, ADV[i]]
                v = n[k] + NEFF_PEND[k]
                if v < bestv or (v == bestv and k < best):
                    bestv = v
                    best = k
    return best


@njit(cache=True)
def dpca_record(k, score, META, n, s, ACT, ADV, INA, PI, PJ, PK, c, delta, delta_explore, k1):
    """Record a duel of pair k for DPCA (Appendix B, Algorithms 3-5); updates the phase machine.

    Round ``r`` explores with confidence ``delta_explore / r^2`` and verifies with
    ``delta / r^2`` on fresh samples; a failed verification starts round ``r + 1``.
    """
    L = ACT.shape[0]
    i = PI[k]
    j = PJ[k]
    r = META[0]
    if META[3] == 1:
        return
    if META[1] == 0:
        if not (ACT[i, j] or ACT[j, i]):
            return
        n[k] += 1
        s[k] += score
        d = delta_explore / (r * r)
        for a, b in ((i, j), (j, i)):
            if ACT[a, b]:
                lcb, ucb = _dpca_bounds(k, a, n, s, PI, L, d)
                if lcb > 0.0 or (ucb < 0.0 and k1 * ucb < lcb):
                    ACT[a, b] = False
        for a in range(L):
            for b in range(L):
                if ACT[a, b]:
                    return
        # exploration over: candidate and adversaries (Algorithm 3, return line)
        # candidate: the first arm with lcb >= 0 against everyone, else the best worst-case lcb
        cand = -1
        best_min = -np.inf
        for a in range(L):
            mn = np.inf
            for b in range(L):
                if a != b:
                    lcb, ucb = _dpca_bounds(PK[a, b], a, n, s, PI, L, d)
                    if lcb < mn:
                        mn = lcb
            if mn >= 0.0:
                cand = a
                break
            if mn > best_min:
                best_min = mn
                cand = a
        for a in range(L):
            INA[a] = a != cand
            ADV[a] = -1
            if a == cand:
                continue
            bestv = np.inf
            for b in range(L):
                if b != a:
                    lcb, ucb = _dpca_bounds(PK[a, b], a, n, s, PI, L, d)
                    v = ucb / math.sqrt(c[a] + c[b])
                    if v < bestv:
                        bestv = v
                        ADV[a] = b
        META[1] = 1
        META[2] = cand
        n[:] = 0
        s[:] = 0.0
        return
    # verification (Algorithm 4)
    relevant = False
    for a in range(L):
        if INA[a] and PK[a, ADV[a]] == k:
            relevant = True
    if not relevant:
        return
    n[k] += 1
    s[k] += score
    d = delta / (r * r)
    for a in range(L):
        if INA[a] and PK[a, ADV[a]] == k:
            lcb, ucb = _dpca_bounds(k, a, n, s, PI, L, d)
            if ucb < 0.0:
                INA[a] = False
            elif lcb > 0.0:
                META[0] = r + 1
                dpca_start_explore(META, n, s, ACT)
                return
    for a in range(L):
        if INA[a]:
            return
    META[3] = 1


# ---------------------------------------------------------------- dctas-pc (pairwise certificates)
PC_GRID = 40  # mixture components q_g = 1/2 - 0.5 * PC_RATIO**g, g = 1..PC_GRID, weight 1/PC_GRID each
PC_RATIO = 0.8


@njit(cache=True)
def pc_log_mixture(n, x):
    """``log M_n`` of the mixture martingale against ``p >= 1/2`` for an arm with score ``x`` in ``n`` duels.

    ``M_n = (1/G) sum_g (2 q_g)^x (2 (1 - q_g))^(n - x)`` with ``q_g < 1/2``. Under any
    ``p >= 1/2`` each term has conditional mean ``1 + (2q - 1)(2p - 1) <= 1`` per duel
    (also for half points, by convexity in the score), so ``M_n`` is a nonnegative
    supermartingale and Ville's inequality gives ``P(sup_n M_n >= 1/d) <= d``.
    """
    best = -1e300
    vals = np.empty(PC_GRID)
    for g in range(PC_GRID):
        q = 0.5 - 0.5 * PC_RATIO ** (g + 1)
        v = x * math.log(2.0 * q) + (n - x) * math.log(2.0 * (1.0 - q))
        vals[g] = v
        if v > best:
            best = v
    s = 0.0
    for g in range(PC_GRID):
        s += math.exp(vals[g] - best)
    return best + math.log(s) - math.log(PC_GRID)


# certificate tests (the ``threshold`` option of dctas-pc); ``c0`` is the test's constant for d' = delta / (L - 1)
PC_MIXTURE, PC_KK, PC_STITCHED = 0, 1, 2
PC_ETA = 2.0  # stitched boundary: epochs grow by the factor eta in the variance clock v = n / 4
PC_S = 1.4  # stitched boundary: crossing probability of epoch k proportional to 1 / (k + 1)^s
PC_VMIN = 4.0  # stitched boundary: first epoch at v = 4 (n = 16)
PC_K1 = (PC_ETA**0.25 + PC_ETA**-0.25) / math.sqrt(2.0)


@njit(cache=True)
def _pc_log_tables():
    """``log(2 q_g)`` and ``log(2 (1 - q_g))``, computed exactly as :func:`pc_log_mixture` does."""
    a = np.empty(PC_GRID)
    b = np.empty(PC_GRID)
    for g in range(PC_GRID):
        q = 0.5 - 0.5 * PC_RATIO ** (g + 1)
        a[g] = math.log(2.0 * q)
        b[g] = math.log(2.0 * (1.0 - q))
    return a, b


PC_LOG2Q, PC_LOG2P = _pc_log_tables()


@njit(cache=True)
def pc_mixture_certifies(n, x, log_thr):
    """``pc_log_mixture(n, x) >= log_thr``, bit for bit, with the logarithms tabulated.

    ``log M_n = best + log(s) - log(G)`` with ``1 <= s <= G`` lies in
    ``[best - log G, best]``: most calls decide on ``best`` alone (a margin of 1e-9
    covers rounding) and skip the exponentials.
    """
    best = -1e300
    for g in range(PC_GRID):
        v = x * PC_LOG2Q[g] + (n - x) * PC_LOG2P[g]
        if v > best:
            best = v
    if best + 1e-9 < log_thr:
        return False
    lg = math.log(PC_GRID)
    if best - lg - 1e-9 >= log_thr:
        return True
    s = 0.0
    for g in range(PC_GRID):
        s += math.exp(x * PC_LOG2Q[g] + (n - x) * PC_LOG2P[g] - best)
    return best + math.log(s) - lg >= log_thr


@njit(cache=True)
def pc_certifies(n, x, rule, c0):
    """Does a score ``x < n/2`` in ``n`` duels certify that arm beaten (``H0: p >= 1/2`` rejected)?

    ``PC_MIXTURE``: ``log M_n >= c0 = log(1/d')`` (:func:`pc_log_mixture`).
    ``PC_KK``: ``n d(x/n, 1/2) > 3 log(1 + log n) + c0`` with ``c0 = C(log(1/d'))``
    (Kaufmann and Koolen 2021, one term).
    ``PC_STITCHED``: ``n/2 - x >= k1 sqrt(v l(v))``, ``v = max(n/4, m)``,
    ``l(v) = s log log(eta v / m) + c0`` with ``c0 = log(zeta(s) / (d' log(eta)^s))``
    (Howard et al. 2021, polynomial stitching with ``c = 0``).
    """
    if rule == PC_MIXTURE:
        return pc_mixture_certifies(n, x, c0)
    if rule == PC_KK:
        return n * kl_half(x / n) > 3.0 * math.log(1.0 + math.log(n)) + c0
    v = 0.25 * n
    if v < PC_VMIN:
        v = PC_VMIN
    ell = PC_S * math.log(math.log(PC_ETA * v / PC_VMIN)) + c0
    return 0.5 * n - x >= PC_K1 * math.sqrt(v * ell)


# the default certificate test: a diversified-Kelly mixture of betting martingales (docs/algorithms.md)
PC_BETTING = 3
PC_LEVELS = 5  # scores are counted on the grid 0, 1/4, 1/2, 3/4, 1 (rounded against the certificate)
PC_BET_FOCUS = 0.98  # prior mass on the components whose gap 1/2 - q_g is in [0.018, 0.26] (g = 3..15)
PC_BET_G_LO = 3
PC_BET_G_HI = 15


@njit(cache=True)
def _pc_bet_tables():
    """``LF[l, g] = log(1 + mu_g (1/2 - l/4))`` with ``mu_g = 2 * 0.8^(g+1)`` and the log prior weights."""
    LF = np.empty((PC_LEVELS, PC_GRID))
    LPI = np.empty(PC_GRID)
    n_in = PC_BET_G_HI - PC_BET_G_LO + 1
    for g in range(PC_GRID):
        mu = 2.0 * PC_RATIO ** (g + 1)
        for lv in range(PC_LEVELS):
            LF[lv, g] = math.log1p(mu * (0.5 - 0.25 * lv))
        if PC_BET_G_LO <= g + 1 <= PC_BET_G_HI:
            LPI[g] = math.log(PC_BET_FOCUS / n_in)
        else:
            LPI[g] = math.log((1.0 - PC_BET_FOCUS) / (PC_GRID - n_in))
    return LF, LPI


PC_BET_LF, PC_BET_LPI = _pc_bet_tables()


@njit(cache=True)
def pc_hist_add(k, x, H):
    """Count score ``x`` of ``PI[k]`` on the quarter grid: ``H[k, l]`` rounded up, ``H[k, 5 + l]`` rounded down."""
    v = 4.0 * x
    up = int(math.ceil(v - 1e-12))
    dn = int(math.floor(v + 1e-12))
    if up > 4:
        up = 4
    if dn < 0:
        dn = 0
    H[k, up] += 1.0
    H[k, PC_LEVELS + dn] += 1.0


@njit(cache=True)
def pc_bet_log_wealth(H, k, side):
    """``log M`` of the test "``side`` of pair ``k`` is beaten" (0: ``PI[k]``, 1: ``PJ[k]``).

    ``M = sum_g pi_g prod_t (1 + mu_g (1/2 - y_t))`` with ``y_t`` that arm's scores, each rounded
    up to the quarter grid (which only lowers every factor). Under ``E y >= 1/2`` each product is
    a nonnegative supermartingale, so ``M`` is one (Ville's inequality).
    """
    best = -1e300
    vals = np.empty(PC_GRID)
    for g in range(PC_GRID):
        v = PC_BET_LPI[g]
        for lv in range(PC_LEVELS):
            if side == 0:
                cnt = H[k, lv]
            else:
                cnt = H[k, PC_LEVELS + PC_LEVELS - 1 - lv]
            if cnt != 0.0:
                v += cnt * PC_BET_LF[lv, g]
        vals[g] = v
        if v > best:
            best = v
    s = 0.0
    for g in range(PC_GRID):
        s += math.exp(vals[g] - best)
    return best + math.log(s)


@njit(cache=True)
def pc_bet_certifies(H, k, side, log_thr):
    """``pc_bet_log_wealth(H, k, side) >= log_thr``."""
    return pc_bet_log_wealth(H, k, side) >= log_thr


@njit(cache=True)
def pc_update_bet(k, N, W, H, PI, PJ, log_thr, BEAT, CB, CW):
    """:func:`pc_update` for the betting test: certify the side that is behind if its wealth reaches ``log_thr``."""
    i = PI[k]
    j = PJ[k]
    n = N[k]
    xi = W[k]
    issued = False
    if xi < 0.5 * n and not BEAT[j, i]:
        if pc_bet_certifies(H, k, 0, log_thr):
            pc_set(j, i, BEAT, CB, CW)
            issued = True
    xj = n - xi
    if xj < 0.5 * n and not BEAT[i, j]:
        if pc_bet_certifies(H, k, 1, log_thr):
            pc_set(i, j, BEAT, CB, CW)
            issued = True
    return issued


# the portfolio test (threshold = "portfolio"): one Ville level delta shared by the models (docs/algorithms.md)
PC_PORTFOLIO = 4
PC_PORT_RHO = 0.1  # share of the pool paid to every candidate at the start (rho / L each)
PC_PORT_Z0 = 0.5  # the leader's cash follows (1 - rho)(1 - exp(-z / z0)), z its smallest evidence (nats)
PC_PORT_MIN = 1e-3  # smallest payment, as a share of 1 - rho (a payment that empties the pool is always made)


@njit(cache=True)
def pc_port_init(PV, PG, rho):
    """Start the portfolio: ``PV[a, m] = rho / L`` (candidate ``a``'s wealth on "``a`` beats ``m``"),
    ``PG[a] = 0`` (cash paid to ``a`` since), ``PG[L] = 1 - rho`` (the pool)."""
    L = PV.shape[0]
    for a in range(L):
        for m in range(L):
            PV[a, m] = rho / L if a != m else 0.0
        PG[a] = 0.0
    PG[L] = 1.0 - rho


@njit(cache=True)
def _pc_port_check(a, m, k, N, W, PI, PV, log_thr, BEAT, CB, CW):
    """Certify "``m`` beaten by ``a``" if ``m`` is behind in pair ``k`` and ``log PV[a, m] >= log_thr``."""
    if BEAT[a, m] or PV[a, m] <= 0.0:
        return False
    n = N[k]
    xm = W[k] if PI[k] == m else n - W[k]
    if xm < 0.5 * n and math.log(PV[a, m]) >= log_thr:
        pc_set(a, m, BEAT, CB, CW)
        return True
    return False


@njit(cache=True)
def pc_port_record(k, x, N, W, H, PI, PJ, PV, log_thr, BEAT, CB, CW):
    """Record score ``x`` of ``PI[k]`` (``N``, ``W`` already counted it): the pair's two bets move with
    the betting test's mixture, ``PV[j, i] *= M_t / M_(t-1)`` for "``i`` beaten" (and the same for
    ``j``), so every payment rides that mixture from its own start. True if a certificate was issued.
    """
    i = PI[k]
    j = PJ[k]
    lo0 = pc_bet_log_wealth(H, k, 0)
    lo1 = pc_bet_log_wealth(H, k, 1)
    pc_hist_add(k, x, H)
    PV[j, i] *= math.exp(pc_bet_log_wealth(H, k, 0) - lo0)
    PV[i, j] *= math.exp(pc_bet_log_wealth(H, k, 1) - lo1)
    issued = _pc_port_check(j, i, k, N, W, PI, PV, log_thr, BEAT, CB, CW)
    if _pc_port_check(i, j, k, N, W, PI, PV, log_thr, BEAT, CB, CW):
        issued = True
    return issued


@njit(cache=True)
def pc_port_pay(a, T, N, W, PI, PK, PV, PG, rho, z0, log_thr, BEAT, CB, CW):
    """Pay the leader ``a`` from the pool, decided on the past only: its cash since the start follows
    ``(1 - rho)(1 - exp(-z / z0))``, ``z = min_m T[m, a]``; a payment ``x`` adds ``x`` to each of its
    ``L - 1`` bets and costs the pool ``x`` once. True if a certificate was issued."""
    L = PV.shape[0]
    pool = PG[L]
    if a < 0 or pool <= 0.0:
        return False
    z = 1e300
    for m in range(L):
        if m != a and T[m, a] < z:
            z = T[m, a]
    x = (1.0 - rho) * (1.0 - math.exp(-z / z0)) - PG[a]
    if x > pool:
        x = pool
    if not (x > PC_PORT_MIN * (1.0 - rho) or (x > 0.0 and x >= pool)):
        return False
    PG[L] = pool - x
    PG[a] += x
    issued = False
    for m in range(L):
        if m != a:
            PV[a, m] += x
            if _pc_port_check(a, m, PK[a, m], N, W, PI, PV, log_thr, BEAT, CB, CW):
                issued = True
    return issued


@njit(cache=True)
def pc_set(w, lo, BEAT, CB, CW):
    """Issue the certificate "``lo`` is beaten by ``w``" and keep the per-arm counts.

    ``CB[m]``: certificates against ``m``; ``CW[m]``: certificates held by ``m``.
    """
    BEAT[w, lo] = True
    CB[lo] += 1
    CW[w] += 1


@njit(cache=True)
def pc_update(k, N, W, PI, PJ, rule, c0, BEAT, CB, CW):
    """After a duel on pair ``k``: certify the side that is behind if its test says so. True if a certificate was issued."""
    i = PI[k]
    j = PJ[k]
    n = N[k]
    xi = W[k]
    issued = False
    if xi < 0.5 * n and not BEAT[j, i]:
        if pc_certifies(n, xi, rule, c0):
            pc_set(j, i, BEAT, CB, CW)
            issued = True
    xj = n - xi
    if xj < 0.5 * n and not BEAT[i, j]:
        if pc_certifies(n, xj, rule, c0):
            pc_set(i, j, BEAT, CB, CW)
            issued = True
    return issued


@njit(cache=True)
def pc_recount(BEAT, CB, CW):
    """Rebuild the per-arm certificate counts from ``BEAT`` (on load)."""
    L = BEAT.shape[0]
    CB[:] = 0
    CW[:] = 0
    for w in range(L):
        for lo in range(L):
            if BEAT[w, lo]:
                CB[lo] += 1
                CW[w] += 1


@njit(cache=True)
def pc_leader(CB, AMAX):
    """The arm beaten by no certificate with the least evidence of losing (ties: lowest index); -1 if none."""
    L = AMAX.shape[0]
    a = -1
    for m in range(L):
        if CB[m] > 0:
            continue
        if a < 0 or AMAX[m] < AMAX[a]:
            a = m
    return a


@njit(cache=True)
def pc_lead(CB, AMAX, LEAD, stick):
    """The leader ``pc_choose`` works for: the plug-in leader, or with ``stick > 0`` the sticky one in ``LEAD[0]``."""
    if stick > 0.0 and LEAD[0] >= 0 and CB[LEAD[0]] == 0:
        return LEAD[0]
    return pc_leader(CB, AMAX)


@njit(cache=True)
def pc_track_leader(CB, AMAX, T, LEAD, stick):
    """Sticky leader, after each duel: keep ``LEAD[0]`` until it is certified beaten or the
    plug-in leader ``b`` is ahead by ``stick`` nats of evidence, ``max_n T[a, n] > max_n T[b, n] + stick``.
    """
    b = pc_leader(CB, AMAX)
    a = LEAD[0]
    if a < 0 or CB[a] > 0 or b < 0:
        LEAD[0] = b
        return
    if a == b:
        return
    L = CB.shape[0]
    ta = 0.0
    tb = 0.0
    for n in range(L):
        if T[a, n] > ta:
            ta = T[a, n]
        if T[b, n] > tb:
            tb = T[b, n]
    if ta > tb + stick:
        LEAD[0] = b


@njit(cache=True)
def pc_verdict(CB, CW):
    """``>= 0``: that arm certifiably beats every other arm; ``-2``: every arm is certified beaten; ``-1``: go on."""
    L = CB.shape[0]
    n_beaten = 0
    for m in range(L):
        if CB[m] > 0:
            n_beaten += 1
    if n_beaten == L:
        return -2
    for a in range(L):
        if CW[a] == L - 1:
            return a
    return -1


@njit(cache=True)
def pc_nocw_choose(N, W, H, PI, PJ, BEAT, betting, log_thr):
    """Every arm is certified beaten but not yet every one at ``log_thr``: the pair to duel so that the
    verdict "no Condorcet winner" comes soonest. For the first arm not yet beaten at ``log_thr``, the
    pair of one of its certificates whose side of it has the most wealth; -1 if every arm is."""
    L = BEAT.shape[0]
    beaten = np.zeros(L, dtype=np.bool_)
    best_k = np.full(L, -1, dtype=np.int64)
    best_w = np.full(L, -1e300)
    for k in range(PI.shape[0]):
        n = N[k]
        if n <= 0.0:
            continue
        for side in range(2):
            lo = PI[k] if side == 0 else PJ[k]
            w = PJ[k] if side == 0 else PI[k]
            x = W[k] if side == 0 else n - W[k]
            if not BEAT[w, lo]:
                continue
            lw = pc_bet_log_wealth(H, k, side) if betting else pc_log_mixture(n, x)
            if x < 0.5 * n and lw >= log_thr:
                beaten[lo] = True
            if lw > best_w[lo]:
                best_w[lo] = lw
                best_k[lo] = k
    for m in range(L):
        if not beaten[m] and best_k[m] >= 0:
            return best_k[m]
    return -1


@njit(cache=True)
def pc_verdict_strict(CB, CW, N, W, H, PI, PJ, BEAT, betting, nocw_thr):
    """:func:`pc_verdict` with the verdict "no Condorcet winner" (``-2``) also needing every arm beaten at
    log-wealth ``nocw_thr`` (0: no further need): some pair in which it is behind with at least that
    current wealth, which then holds its certificate (:func:`pc_nocw_choose` finds no arm short of it).
    Short of that, an arm holding every certificate is still named, else ``-1``."""
    v = pc_verdict(CB, CW)
    if v != -2 or nocw_thr <= 0.0 or pc_nocw_choose(N, W, H, PI, PJ, BEAT, betting, nocw_thr) < 0:
        return v
    L = CB.shape[0]
    for a in range(L):
        if CW[a] == L - 1:
            return a
    return -1


@njit(cache=True)
def pc_choose(NEFF, t, a, G, AMAX, c, PI, PJ, PK, BEAT, CB, alpha, tie_cap, explore, explore_frac):
    """Next pair for dctas-pc: initialise, forced exploration over pairs that still matter, then D-tracking.

    ``t = sum(NEFF)``; ``a`` is the leader (:func:`pc_lead`), the uncertified arm with the
    least evidence of losing. It must be shown to beat every other arm ``m``: pair
    ``(m, a)`` gets weight ``1 / g[m, a]`` (Theorem 1 with ``Gamma_m = {a}``),
    or ``1 / d(1/2 - 1/(2 sqrt(n)), 1/2)`` when ``m`` does not seem to lose to ``a``. If the
    leader itself seems to lose, its best adversary gets ``1 / alpha_a``: that certifies the
    leader beaten and moves the lead on, which is how every arm gets certified when there
    is no Condorcet winner. Weights are in pulls (``1 / (g c)``), normalised (Lemma 2).
    ``tie_cap > 0`` bounds a near-tie pair's weight by ``tie_cap`` times the largest weight of a
    pair that seems to lose (the default certificate test); ``0`` is the unbounded rule
    (``threshold = "mixture"``, unchanged).
    """
    K = NEFF.shape[0]
    L = AMAX.shape[0]
    wlose = 0.0
    nnear = 0
    # pairs that matter: some arm in it is not yet certified beaten, or it is a leader pair still to prove
    best = -1
    low = 1e300
    fe = math.sqrt(t) - 0.5 * K
    # explore: 0 = every pair that matters at sqrt(t) - K/2; 1 = the leader's pairs only (others once);
    # 2 = the leader's pairs at sqrt(t) - K/2, the other pairs that matter at explore_frac sqrt(t) - K/2
    fo = fe
    if explore == 1:
        fo = 0.0
    elif explore == 2:
        fo = explore_frac * math.sqrt(t) - 0.5 * K
    for k in range(K):
        nk = NEFF[k]
        if nk >= low or (nk != 0.0 and nk >= fe):
            continue
        i = PI[k]
        j = PJ[k]
        lead_pair = a >= 0 and ((i == a and not BEAT[a, j]) or (j == a and not BEAT[a, i]))
        if lead_pair or ((CB[i] == 0 or CB[j] == 0) and (nk == 0.0 or nk < fo)):
            low = nk
            best = k
    if best >= 0:
        return best
    for k in range(K):
        alpha[k] = 0.0
    total = 0.0
    for m in range(L):
        if m == a:
            continue
        if a < 0 or BEAT[a, m]:
            continue
        k = PK[m, a]
        if G[m, a] > 0.0:
            w = 1.0 / G[m, a] / (c[m] + c[a])
            if w > wlose:
                wlose = w
        else:
            # m does not seem to lose to the leader: weight 1/d at the edge of a
            # 1/sqrt(n) band around 1/2, so the pair keeps a share growing with its count
            w = 1.0 / kl_half(0.5 - 0.5 / math.sqrt(NEFF[k] + 1.0))
            if tie_cap > 0.0:
                nnear += 1
        alpha[k] += w
        total += w
    if tie_cap > 0.0 and nnear > 0 and wlose > 0.0:
        # bounded near-tie weight: a pair that does not seem to lose gets at most tie_cap times the
        # largest weight of a pair that does, so a near tie cannot absorb the samples (issue 23)
        top = tie_cap * wlose
        for m in range(L):
            if m == a or a < 0 or BEAT[a, m]:
                continue
            k = PK[m, a]
            if G[m, a] <= 0.0 and alpha[k] > top:
                total -= alpha[k] - top
                alpha[k] = top
    if a >= 0 and AMAX[a] > 0.0:  # the leader seems to lose: test it on its best adversary
        nb = 0
        for n in range(L):
            if n != a and G[a, n] > G[a, nb] or nb == a:
                nb = n
        k = PK[a, nb]
        w = 1.0 / AMAX[a] / (c[a] + c[nb])
        alpha[k] += w
        total += w
    if total <= 0.0:
        # nothing to track: the least-pulled pair that matters (or any least-pulled pair)
        best = 0
        for k in range(K):
            if NEFF[k] < NEFF[best]:
                best = k
        return best
    best = -1
    deficit = -1e300
    for k in range(K):
        if alpha[k] > 0.0:
            d = alpha[k] / total * t - NEFF[k]
            if d > deficit:
                deficit = d
                best = k
    return best


@njit(cache=True)
def pc_choose_masked(NEFF, t, a, G, AMAX, CK, PI, PJ, PK, BEAT, CB, alpha, OK):
    """:func:`pc_choose` with per-pair costs ``CK[k]`` and only the pairs with ``OK[k]``; -1 if none.

    The same rule line for line (kept as a separate body so that :func:`pc_choose`, the
    hot path of the simulator and of every campaign, is untouched); a pair outside ``OK``
    is never returned and gets no tracking weight, and the leader's best adversary is the
    best one among the allowed pairs. With every pair allowed and ``CK[k] = c_i + c_j``
    it decides as :func:`pc_choose` (``tests/algorithms/test_wor_policy.py`` checks both against a
    frozen copy of the kernel).
    """
    K = NEFF.shape[0]
    L = AMAX.shape[0]
    best = -1
    low = 1e300
    fe = math.sqrt(t) - 0.5 * K
    for k in range(K):
        if not OK[k]:
            continue
        nk = NEFF[k]
        if nk >= low or (nk != 0.0 and nk >= fe):
            continue
        i = PI[k]
        j = PJ[k]
        if (CB[i] == 0 or CB[j] == 0) or (a >= 0 and ((i == a and not BEAT[a, j]) or (j == a and not BEAT[a, i]))):
            low = nk
            best = k
    if best >= 0:
        return best
    for k in range(K):
        alpha[k] = 0.0
    total = 0.0
    for m in range(L):
        if m == a:
            continue
        if a < 0 or BEAT[a, m]:
            continue
        k = PK[m, a]
        if not OK[k]:
            continue
        if G[m, a] > 0.0:
            w = 1.0 / G[m, a] / CK[k]
        else:
            w = 1.0 / kl_half(0.5 - 0.5 / math.sqrt(NEFF[k] + 1.0))
        alpha[k] += w
        total += w
    if a >= 0 and AMAX[a] > 0.0:  # the leader seems to lose: test it on its best allowed adversary
        nb = -1
        for n in range(L):
            if n == a or not OK[PK[a, n]]:
                continue
            if nb < 0 or G[a, n] > G[a, nb]:
                nb = n
        if nb >= 0 and G[a, nb] > 0.0:
            k = PK[a, nb]
            w = 1.0 / G[a, nb] / CK[k]
            alpha[k] += w
            total += w
    if total <= 0.0:
        # nothing to track: the least-pulled allowed pair
        best = -1
        for k in range(K):
            if OK[k] and (best < 0 or NEFF[k] < NEFF[best]):
                best = k
        return best
    best = -1
    deficit = -1e300
    for k in range(K):
        if alpha[k] > 0.0:
            d = alpha[k] / total * t - NEFF[k]
            if d > deficit:
                deficit = d
                best = k
    return best


# ---------------------------------------------------------------- dctas-pc without replacement (docs/reuse.md)
# Pair k's n-th duel uses prompt perm[n] of a secret uniformly random permutation of the P prompts,
# shared by all pairs; answers and verdicts are paid once. Per pair: LA[k] = log K_t of (R4) against
# "p_ij <= 1/2" (certifies "j beaten by i"), LB[k] the same on 1 - x (certifies "i beaten by j"),
# SQ[k] the sum of squared scores of PI[k]; W[k] is the sum, N[k] the count.


@njit(cache=True)
def pc_wor_bet(k, x, N, W, SQ, LA, LB, P):
    """Before recording score ``x`` (of ``PI[k]``) on pair ``k``: both bettors' (R4) factors, ``N = P``, ``m0 = 1/2``.

    The bets use the pair's earlier outcomes only (``N[k]``, ``W[k]``, ``SQ[k]`` before
    this duel), through :func:`algorithms.prompt_level.log_wealth_step`. An infinite
    factor (``m_t < 0``: the drawn values alone decide the mean) is not added: that
    pair already holds its exact certificate (:func:`pc_wor_update`).
    """
    n = N[k]
    s = W[k]
    sq = SQ[k]
    a = log_wealth_step(n, s, sq, x, P, 0.5)
    if a < np.inf:
        LA[k] += a
    b = log_wealth_step(n, n - s, n - 2.0 * s + sq, 1.0 - x, P, 0.5)
    if b < np.inf:
        LB[k] += b
    SQ[k] = sq + x * x


@njit(cache=True)
def pc_wor_update(k, N, W, PI, PJ, P, LA, LB, log_thr, BEAT, CB, CW):
    """After a duel on pair ``k`` (counts updated): issue its certificate if one is due. True if issued.

    A pair holding a certificate (either direction) is decided and not looked at again.
    Exact first: ``2 W > P`` means ``p_ij > 1/2`` on the prompt set whatever is left, so
    "j beaten by i" with no error (likewise ``2 (N - W) > P``). Else the (R4) tests:
    ``LA >= log((L - 1)/delta)`` certifies "j beaten by i", ``LB`` "i beaten by j".
    """
    i = PI[k]
    j = PJ[k]
    if BEAT[i, j] or BEAT[j, i]:
        return False
    n = N[k]
    w = W[k]
    if 2.0 * w > P:
        pc_set(i, j, BEAT, CB, CW)
    elif 2.0 * (n - w) > P:
        pc_set(j, i, BEAT, CB, CW)
    elif LA[k] >= log_thr:
        pc_set(i, j, BEAT, CB, CW)
    elif LB[k] >= log_thr:
        pc_set(j, i, BEAT, CB, CW)
    else:
        return False
    return True


@njit(cache=True)
def pc_wor_useful(N, PI, PJ, BEAT, CB, P, OK):
    """Mark in ``OK`` the useful pairs on the recorded data; return how many.

    Useful: undecided (no certificate either way), not exhausted (``N < P``), and one of
    its directions is still possible and would beat a model not yet beaten or complete
    the certificates of a model not yet beaten (dctas-pc names a winner only when it
    holds a certificate against every other model). With ``N < P`` at least one direction
    is possible (both impossible needs ``N >= P``), so this is "one of its two models is
    not yet beaten".
    """
    K = N.shape[0]
    count = 0
    for k in range(K):
        i = PI[k]
        j = PJ[k]
        u = N[k] < P and not (BEAT[i, j] or BEAT[j, i]) and (CB[i] == 0 or CB[j] == 0)
        OK[k] = u
        if u:
            count += 1
    return count


@njit(cache=True)
def pc_wor_choose(NEFF, N, W, c, cj, PI, PJ, PK, BEAT, CB, P, G, AMAX, CK, OK, alpha):
    """Next pair for dctas-pc without replacement, or -1 when every useful pair is exhausted counting ``NEFF``.

    ``NEFF = N + pending``. Allowed pairs: useful (:func:`pc_wor_useful`) and
    ``NEFF[k] < P``. Marginal costs (base per-arm costs ``c``, judge ``cj``): model ``m``
    has answered the prompts ``perm[0 .. prefix_m - 1]``, ``prefix_m = max_{k ∋ m} NEFF[k]``;
    the next duel on ``k = (i, j)`` is at position ``n = NEFF[k]`` and costs
    ``CK[k] = c_i [n >= prefix_i] + c_j [n >= prefix_j] + cj`` (every (pair, prompt)
    verdict is new in a campaign), at least ``PC_WOR_COST_FLOOR (c_i + c_j + cj)``.
    ``G``/``AMAX`` are rebuilt with these per-pair costs, the leader is the plug-in
    one (:func:`pc_leader`), and :func:`pc_choose_masked` picks the pair.
    """
    K = NEFF.shape[0]
    L = c.shape[0]
    pc_wor_useful(N, PI, PJ, BEAT, CB, P, OK)
    n_ok = 0
    for k in range(K):
        if OK[k] and NEFF[k] >= P:
            OK[k] = False
        if OK[k]:
            n_ok += 1
    if n_ok == 0:
        return -1
    prefix = np.zeros(L)
    for k in range(K):
        if NEFF[k] > prefix[PI[k]]:
            prefix[PI[k]] = NEFF[k]
        if NEFF[k] > prefix[PJ[k]]:
            prefix[PJ[k]] = NEFF[k]
    G[:, :] = 0.0
    for k in range(K):
        i = PI[k]
        j = PJ[k]
        n = NEFF[k]
        ck = cj
        if n >= prefix[i]:
            ck += c[i]
        if n >= prefix[j]:
            ck += c[j]
        floor = PC_WOR_COST_FLOOR * (c[i] + c[j] + cj)
        CK[k] = ck if ck > floor else floor
        if N[k] > 0:
            p = W[k] / N[k]
            G[i, j] = kl_half(p) / CK[k]
            G[j, i] = kl_half(1.0 - p) / CK[k]
    for m in range(L):
        best = 0.0
        for q in range(L):
            if G[m, q] > best:
                best = G[m, q]
        AMAX[m] = best
    a = pc_leader(CB, AMAX)
    t = 0.0
    for k in range(K):
        t += NEFF[k]
    return pc_choose_masked(NEFF, t, a, G, AMAX, CK, PI, PJ, PK, BEAT, CB, alpha, OK)
