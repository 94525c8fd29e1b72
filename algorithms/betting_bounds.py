"""Compiled (numba) kernels of :func:`algorithms.ranking.betting_field_intervals`.

The ordered pair ``(a, b)`` with ``n`` duels in which ``a`` scored ``S`` in all, ``T`` of them ties, has the log-wealth
``D(p) = log(w_up A(p) + w_down B(p))`` on the grid of candidate means ``p`` of ``a``'s score, where
``A`` is the mixture of the constant bets on scores above ``p`` and ``B`` the one below
(:func:`algorithms.ranking.pair_log_wealth`). ``A`` decreases and ``B`` increases in ``p``, so on a
cell ``[p_k, p_(k+1)]`` of the grid ``D(p) >= log(w_up A(p_(k+1)) + w_down B(p_k))``: every ``p`` in
``[0, 1]`` lies in a cell whose point ``(p_(k+1), that lower bound)`` is at least as good for the
maximisation below, so the bounds hold for every ``p``, not only on the grid.

``max sum_j p_j`` over ``sum_j D_j(p_j) < c`` is at most ``g(mu) = sum_j max_p (p - mu D_j(p)) + mu c``
for every ``mu >= 0`` (weak Lagrange duality). Only the lower convex hull of each pair's cell points
can attain an inner maximum, and ``g`` is convex and piecewise linear in ``mu`` with its breakpoints
at the hulls' edges, so :func:`sweep_bound` brackets its minimum by bisection on ``log mu`` (each
step finds every pair's maximiser by a binary search over its hull's edges) and returns ``g`` at the
better end of the bracket, a valid bound whatever the bracket's width. A pair's hull depends only on ``(S, T, n)``, so pairs with the
same counts share it (many do in a campaign of many models and few duels per pair).

The threshold ``c`` of a model's side depends on the candidate win rate itself (:func:`side_threshold`, the
tilted union of docs/algorithms.md, *Ranking intervals*), so each bound is a fixed point in the candidate
(:func:`upper_fixed_point`, :func:`lower_fixed_point`), every step of which is a valid bound.
"""

from __future__ import annotations

import math

import numpy as np
from numba import njit


@njit(cache=True)
def _mixtures(S, T, F, up, up_loss, up_tie, down, down_loss, down_tie):
    """``log A`` and ``log B`` on the grid, each with prior weight 1 spread evenly over the bets: ``S`` and ``F``
    the score sums of the duels other than the ``T`` ties (scored 1/2) and of their opponents."""
    G, K = up.shape
    la = np.empty(G)
    lb = np.empty(G)
    lk = math.log(K)
    for k in range(G):
        top_a = -np.inf
        top_b = -np.inf
        for g in range(K):
            xa = S * up[k, g] + F * up_loss[k, g] + T * up_tie[k, g]
            xb = S * down_loss[k, g] + F * down[k, g] + T * down_tie[k, g]
            if xa > top_a:
                top_a = xa
            if xb > top_b:
                top_b = xb
        acc_a = 0.0
        acc_b = 0.0
        for g in range(K):
            acc_a += math.exp(S * up[k, g] + F * up_loss[k, g] + T * up_tie[k, g] - top_a)
            acc_b += math.exp(S * down_loss[k, g] + F * down[k, g] + T * down_tie[k, g] - top_b)
        la[k] = top_a + math.log(acc_a) - lk
        lb[k] = top_b + math.log(acc_b) - lk
    return la, lb


@njit(cache=True)
def _logaddexp(x, y):
    if x < y:
        x, y = y, x
    if y == -np.inf:
        return x
    return x + math.log1p(math.exp(y - x))


@njit(cache=True)
def _hull(grid, la, lb, log_w_up, log_w_down):
    """The cell points' lower convex hull from its lowest point to its right end: ``(x, y)``."""
    G = grid.shape[0]
    m = G - 1
    hx = np.empty(m)
    hy = np.empty(m)
    h = 0
    for k in range(m):
        x = grid[k + 1]
        y = _logaddexp(log_w_up + la[k + 1], log_w_down + lb[k])
        while h >= 2 and (hx[h - 1] - hx[h - 2]) * (y - hy[h - 2]) - (hy[h - 1] - hy[h - 2]) * (x - hx[h - 2]) <= 0.0:
            h -= 1
        hx[h] = x
        hy[h] = y
        h += 1
    start = 0
    for k in range(1, h):
        if hy[k] <= hy[start]:
            start = k
    return hx[start:h].copy(), hy[start:h].copy()


@njit(cache=True)
def pair_hulls(S, T, N, grid, tables, log_w_up, log_w_down):
    """The hulls of the keys ``(S[k], T[k], N[k])`` (score sum, ties, duels), flat: ``(x, y, offsets)`` (key
    ``k``: ``offsets[k]:offsets[k+1]``); ``tables``: ``(up, up_loss, up_tie, down, down_loss, down_tie)``."""
    n_keys = S.shape[0]
    xs = np.empty(n_keys * (grid.shape[0] - 1))
    ys = np.empty(n_keys * (grid.shape[0] - 1))
    off = np.zeros(n_keys + 1, dtype=np.int64)
    pos = 0
    for k in range(n_keys):
        up, up_loss, up_tie, down, down_loss, down_tie = tables
        half = 0.5 * T[k]
        la, lb = _mixtures(S[k] - half, T[k], N[k] - S[k] - half, up, up_loss, up_tie, down, down_loss, down_tie)
        hx, hy = _hull(grid, la, lb, log_w_up, log_w_down)
        xs[pos : pos + hx.shape[0]] = hx
        ys[pos : pos + hy.shape[0]] = hy
        pos += hx.shape[0]
        off[k + 1] = pos
    return xs[:pos].copy(), ys[:pos].copy(), off


@njit(cache=True)
def _at(keys, xs, ys, off, mu):
    """``(sum_j x_j, sum_j y_j)`` at the pairs' maximisers of ``x - mu y`` (the hull's edges have
    decreasing ``dx / dy`` along it: the maximiser is past every edge with ``dx / dy > mu``)."""
    X = 0.0
    Y = 0.0
    for k in keys:
        if k < 0:
            X += 1.0
            continue
        lo = off[k]
        hi = off[k + 1] - 1  # the maximiser is in [lo, hi]
        while lo < hi:
            mid = (lo + hi) // 2
            if (xs[mid + 1] - xs[mid]) > mu * (ys[mid + 1] - ys[mid]):
                lo = mid + 1
            else:
                hi = mid
        X += xs[lo]
        Y += ys[lo]
    return X, Y


@njit(cache=True)
def sweep_bound(keys, xs, ys, off, c):
    """The smallest ``g(mu)`` for the pairs whose hull keys are ``keys`` (``-1``: never compared, free
    in [0, 1]): ``g`` is convex and piecewise linear with slope ``c - sum_j y_j(mu)``, which increases
    with ``mu``; bisection (in ``log mu``) brackets the breakpoint where it crosses zero, and ``g`` at
    either end of the bracket is a valid bound (every ``mu >= 0`` gives one)."""
    X, Y = _at(keys, xs, ys, off, np.inf)
    if Y >= c:  # the set is empty (an event of probability at most its level): the lowest points
        return X
    lo, hi = 1e-12, 1e12
    Xh, Yh = _at(keys, xs, ys, off, hi)
    if Yh >= c:
        return Xh - hi * Yh + hi * c
    Xl, Yl = _at(keys, xs, ys, off, lo)
    if Yl < c:
        return Xl - lo * Yl + lo * c
    for _ in range(100):
        mid = math.sqrt(lo * hi)
        Xm, Ym = _at(keys, xs, ys, off, mid)
        if Ym < c:
            hi = mid
        else:
            lo = mid
        if hi <= lo * (1.0 + 1e-12):
            break
    Xl, Yl = _at(keys, xs, ys, off, lo)
    Xh, Yh = _at(keys, xs, ys, off, hi)
    return min(Xl - lo * Yl + lo * c, Xh - hi * Yh + hi * c)


@njit(cache=True)
def side_threshold(r, n_models, alpha, spread):
    """``log(2 L / (alpha w))`` with ``w = (1 - spread) + 2 spread r``: the log-threshold of one side of the model
    whose win rate against the field is ``r`` (its share ``alpha w / (2 L)`` of ``alpha``; ``inf`` at ``w = 0``)."""
    w = (1.0 - spread) + 2.0 * spread * r
    if w <= 0.0:
        return np.inf
    return math.log(2.0 * n_models / (alpha * w))


@njit(cache=True)
def upper_fixed_point(keys, xs, ys, off, n_models, alpha, spread):
    """The upper bound of a win rate whose side threshold falls with the candidate ``r``
    (:func:`side_threshold`): ``phi(r) = min(1, sweep_bound(c(r)) / (L - 1))`` decreases in ``r``, and for every
    ``a`` the true win rate, which is at most ``phi`` at itself, is at most ``max(a, phi(a))`` (if it exceeds ``a``,
    it is at most ``phi(a)``). Fixed-point steps ``a <- phi(a)`` from 0; the smallest ``max(a, phi(a))`` seen."""
    a = 0.0
    best = 1.0
    for _ in range(40):
        v = min(1.0, sweep_bound(keys, xs, ys, off, side_threshold(a, n_models, alpha, spread)) / (n_models - 1))
        best = min(best, max(a, v))
        if abs(v - a) < 1e-7:
            break
        a = v
    return best


@njit(cache=True)
def lower_fixed_point(keys, xs, ys, off, n_models, alpha, spread):
    """The lower bound of a win rate whose side threshold falls with the candidate ``r``: ``psi(r) = max(0, 1 -
    sweep_bound(c(r)) / (L - 1))`` increases in ``r`` and the true win rate ``r*`` is at least ``psi(r*)``; if
    ``r* >= b`` then ``r* >= psi(b)``, so from ``b = 0`` every step ``b <- psi(b)`` is a valid lower bound, and
    they rise to the smallest fixed point."""
    b = 0.0
    for _ in range(200):
        v = max(0.0, 1.0 - sweep_bound(keys, xs, ys, off, side_threshold(b, n_models, alpha, spread)) / (n_models - 1))
        if v <= b + 1e-7:
            return max(b, v)
        b = v
    return b


@njit(cache=True)
def field_bounds(key_of, xs, ys, off, alpha, spread):
    """Every model's ``(low, high)``: ``key_of[a, b]`` is the hull key of ``a``'s score against ``b``
    (``-1``: never compared); ``m``'s upper bound maximises its own scores, its lower bound its
    opponents' scores against it, each side at the threshold of :func:`side_threshold` at the candidate."""
    L = key_of.shape[0]
    low = np.zeros(L)
    high = np.ones(L)
    row = np.empty(L - 1, dtype=np.int64)
    col = np.empty(L - 1, dtype=np.int64)
    for m in range(L):
        t = 0
        for j in range(L):
            if j != m:
                row[t] = key_of[m, j]
                col[t] = key_of[j, m]
                t += 1
        high[m] = upper_fixed_point(row, xs, ys, off, L, alpha, spread)
        low[m] = lower_fixed_point(col, xs, ys, off, L, alpha, spread)
    return low, high
