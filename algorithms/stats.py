"""GLR statistics for Condorcet-winner identification (paper, Lemma 3 / Appendix A.3).

Notation follows the paper: ``N[i, j]`` duels between ``i`` and ``j``,
``phat[i, j]`` the empirical probability that ``i`` beats ``j``,
``d(x, y)`` the Bernoulli KL divergence.

* evidence ``S_i = sum_k N_ik d(phat_ik, max(phat_ik, 1/2))`` (evidence against
  "i is the Condorcet winner": only duels ``i`` is losing count);
* ``Z_ij = S_j - S_i`` (closed form of the GLR, Lemma 3);
* ``Z(t) = max_i min_{j != i} Z_ij``; stop when ``Z(t) > beta(t, delta)``.
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

__all__ = ["kl_bernoulli", "empirical_preference", "evidence", "glr_matrix", "glr_statistic"]


def kl_bernoulli(x: np.ndarray | float, y: np.ndarray | float) -> np.ndarray | float:
    """Bernoulli KL divergence ``d(x, y) = x log(x/y) + (1-x) log((1-x)/(1-y))`` with ``0 log 0 = 0``."""
    x = np.asarray(x, dtype=float)
    y = np.asarray(y, dtype=float)
    with np.errstate(divide="ignore", invalid="ignore"):
        a = np.where(x > 0, x * np.log(np.where(x > 0, x, 1.0) / y), 0.0)
        b = np.where(x < 1, (1 - x) * np.log(np.where(x < 1, 1 - x, 1.0) / (1 - y)), 0.0)
    out = a + b
    return float(out) if out.ndim == 0 else out


def empirical_preference(wins: npt.ArrayLike, counts: npt.ArrayLike) -> np.ndarray:
    """``phat[i, j] = wins[i, j] / counts[i, j]``; 1/2 where a pair was never compared."""
    W = np.asarray(wins, dtype=float)
    N = np.asarray(counts, dtype=float)
    with np.errstate(divide="ignore", invalid="ignore"):
        P = np.where(N > 0, W / np.where(N > 0, N, 1.0), 0.5)
    np.fill_diagonal(P, 0.5)
    return P


def evidence(wins: np.ndarray, counts: np.ndarray) -> np.ndarray:
    """``S_i = sum_k N_ik d(phat_ik, max(phat_ik, 1/2))`` for every arm ``i``."""
    P = empirical_preference(wins, counts)
    D = np.where(P < 0.5, kl_bernoulli(P, 0.5), 0.0)
    return (np.asarray(counts, dtype=float) * D).sum(axis=1)


def glr_matrix(wins: np.ndarray, counts: np.ndarray) -> np.ndarray:
    """``Z[i, j] = S_j - S_i`` (Lemma 3)."""
    S = evidence(wins, counts)
    return S[None, :] - S[:, None]


def glr_statistic(wins: np.ndarray, counts: np.ndarray) -> tuple[float, int]:
    """``(Z(t), argmax_i)`` with ``Z(t) = max_i min_{j != i} Z_ij``.

    Equal to the gap between the two smallest evidences; the maximiser is the
    arm of smallest evidence (lowest index on ties).
    """
    S = evidence(wins, counts)
    order = np.argsort(S, kind="stable")
    return float(S[order[1]] - S[order[0]]), int(order[0])
