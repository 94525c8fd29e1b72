"""Bradley-Terry maximum-likelihood ratings with Wald confidence intervals.

Model (Bradley and Terry, "Rank analysis of incomplete block designs: I. The method
of paired comparisons", Biometrika 39, 1952; Zermelo 1929)::

    P(i beats j) = exp(theta_i) / (exp(theta_i) + exp(theta_j)) = sigmoid(theta_i - theta_j)

Given a win matrix ``W`` (``W[i, j]`` = wins of i over j; fractional values allowed,
e.g. ties counted as half a win each) and ``N = W + W.T`` comparisons, the
log-likelihood ``sum_{i<j} W_ij log s(theta_i - theta_j) + W_ji log s(theta_j - theta_i)``
is concave; it is maximised by damped Newton steps under the identifiability
constraint ``sum_i theta_i = 0``. The MLE exists and is unique iff the directed
"i beat j at least once" graph is strongly connected (Ford, "Solution of a ranking
problem from binary comparisons", Amer. Math. Monthly 64, 1957; Hunter, "MM
algorithms for generalized Bradley-Terry models", Ann. Statist. 32, 2004). When it
does not exist, a small ridge penalty ``l2 * sum theta^2 / 2`` is applied and the
result says so (``mle_exists = False``).

Confidence intervals are Wald intervals from the observed Fisher information
``I = diag(sum_j N_ij p_ij (1 - p_ij)) - N * p * (1 - p)`` (a weighted graph
Laplacian); the covariance of the centred parameters is its Moore-Penrose
pseudo-inverse. Ratings are reported on the Elo scale used by LMArena (Chiang et al.,
"Chatbot Arena: an open platform for evaluating LLMs by human preference", 2024):
``R_i = base + (400 / ln 10) * theta_i``, so that
``P(i beats j) = 1 / (1 + 10 ** ((R_j - R_i) / 400))``.

Pure numpy/scipy.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Sequence

import numpy as np
from scipy.special import expit

__all__ = ["BTResult", "fit_bradley_terry", "elo_to_preference", "is_strongly_connected"]

ELO_SCALE = 400.0 / np.log(10.0)


@dataclass
class BTResult:
    """Result of :func:`fit_bradley_terry`.

    ``theta`` are natural-scale log-strengths (sum zero); ``ratings``, ``lower`` and
    ``upper`` are on the Elo scale with mean ``base``; ``se`` is the standard error
    of ``theta``; ``cov`` the covariance of ``theta``.
    """

    names: list[str]
    theta: np.ndarray
    se: np.ndarray
    cov: np.ndarray
    ratings: np.ndarray
    lower: np.ndarray
    upper: np.ndarray
    ci_level: float
    base: float
    mle_exists: bool
    l2: float
    iterations: int
    converged: bool
    log_likelihood: float
    extra: dict = field(default_factory=dict)

    def preference(self) -> np.ndarray:
        """Model-implied preference matrix ``sigmoid(theta_i - theta_j)``."""
        return expit(self.theta[:, None] - self.theta[None, :])

    def ranking(self) -> list[str]:
        """Names, best first."""
        return [self.names[i] for i in np.argsort(-self.theta, kind="stable")]

    def to_dict(self) -> dict:
        """JSON-safe summary (ratings on the Elo scale)."""
        return {
            "model": "Bradley-Terry (MLE), Elo scale: P(i beats j) = 1/(1+10^((R_j-R_i)/400))",
            "ci_level": self.ci_level,
            "ci_method": "Wald, observed Fisher information",
            "base": self.base,
            "mle_exists": self.mle_exists,
            "l2": self.l2,
            "converged": self.converged,
            "iterations": self.iterations,
            "log_likelihood": self.log_likelihood,
            "ratings": {
                n: {
                    "rating": float(self.ratings[i]),
                    "lower": float(self.lower[i]),
                    "upper": float(self.upper[i]),
                    "se": float(self.se[i] * ELO_SCALE),
                }
                for i, n in enumerate(self.names)
            },
            "ranking": self.ranking(),
        }


def is_strongly_connected(W: np.ndarray) -> bool:
    """True iff the digraph with an edge i -> j when ``W[i, j] > 0`` is strongly connected."""
    A = np.asarray(W) > 0
    L = A.shape[0]
    if L <= 1:
        return True

    def reach(adj: np.ndarray) -> int:
        seen = np.zeros(L, dtype=bool)
        seen[0] = True
        frontier = seen.copy()
        while frontier.any():
            nxt = adj[frontier].any(axis=0) & ~seen
            seen |= nxt
            frontier = nxt
        return int(seen.sum())

    return reach(A) == L and reach(A.T) == L


def _loglik(theta: np.ndarray, W: np.ndarray, l2: float) -> float:
    d = theta[:, None] - theta[None, :]
    # log sigmoid(d) = -log(1 + exp(-d)), stable via logaddexp
    ll = -(W * np.logaddexp(0.0, -d)).sum()
    return float(ll - 0.5 * l2 * np.dot(theta, theta))


def fit_bradley_terry(
    wins: Any,
    names: Sequence[str] | None = None,
    *,
    ci_level: float = 0.95,
    base: float = 1000.0,
    l2: float | None = None,
    max_iter: int = 200,
    tol: float = 1e-10,
) -> BTResult:
    """Fit Bradley-Terry strengths by maximum likelihood.

    Parameters
    ----------
    wins:
        ``LxL`` non-negative matrix, ``wins[i][j]`` = (possibly fractional) wins of
        i over j. The diagonal is ignored.
    names:
        Arm names (default ``"0"``, ``"1"``, ...).
    ci_level:
        Two-sided level of the Wald intervals (default 0.95).
    base:
        Mean Elo rating (default 1000).
    l2:
        Ridge penalty. ``None`` (default): 0 when the MLE exists, else 1e-4 times
        the mean number of comparisons per arm (with ``mle_exists = False``).
    """
    W = np.array(wins, dtype=float)
    if W.ndim != 2 or W.shape[0] != W.shape[1]:
        raise ValueError(f"wins must be a square matrix, got shape {W.shape}")
    if not np.all(np.isfinite(W)) or np.any(W < 0):
        raise ValueError("wins must be finite and non-negative")
    L = W.shape[0]
    np.fill_diagonal(W, 0.0)
    if names is None:
        names = [str(i) for i in range(L)]
    names = list(names)
    if len(names) != L:
        raise ValueError(f"{len(names)} names for {L} arms")
    if not 0 < ci_level < 1:
        raise ValueError("ci_level must be in (0, 1)")
    N = W + W.T
    exists = is_strongly_connected(W)
    if l2 is None:
        l2 = 0.0 if exists else 1e-4 * max(float(N.sum()) / max(L, 1), 1.0)
    l2 = float(l2)
    if L == 1:
        z = np.zeros(1)
        return BTResult(
            names, z, z.copy(), np.zeros((1, 1)), z + base, z + base, z + base, ci_level, base, True, l2, 0, True, 0.0
        )

    theta = np.zeros(L)
    converged = False
    it = 0
    ll = _loglik(theta, W, l2)
    for it in range(1, max_iter + 1):
        p = expit(theta[:, None] - theta[None, :])
        grad = (W - N * p).sum(axis=1) - l2 * theta
        V = N * p * (1.0 - p)
        H = np.diag(V.sum(axis=1)) - V + l2 * np.eye(L)  # negative Hessian (PSD)
        # solve on the sum-zero subspace: add the all-ones direction to make H invertible
        step = np.linalg.solve(H + np.ones((L, L)) / L, grad)
        step -= step.mean()
        t = 1.0
        while True:
            cand = theta + t * step
            cand -= cand.mean()
            ll_new = _loglik(cand, W, l2)
            if ll_new >= ll - 1e-12 or t < 1e-8:
                break
            t *= 0.5
        delta = np.max(np.abs(cand - theta))
        theta, ll = cand, ll_new
        if delta < tol:
            converged = True
            break

    p = expit(theta[:, None] - theta[None, :])
    V = N * p * (1.0 - p)
    info = np.diag(V.sum(axis=1)) - V + l2 * np.eye(L)
    # covariance of the centred parameters: pseudo-inverse of the (Laplacian) information
    C = np.eye(L) - np.ones((L, L)) / L
    cov = C @ np.linalg.pinv(info, hermitian=True) @ C
    se = np.sqrt(np.clip(np.diag(cov), 0.0, None))
    from scipy import stats  # here, not at import: scipy.stats is ~1 s of CPU that a server start need not pay

    z = float(stats.norm.ppf(0.5 + ci_level / 2.0))
    ratings = base + ELO_SCALE * theta
    return BTResult(
        names=names,
        theta=theta,
        se=se,
        cov=cov,
        ratings=ratings,
        lower=ratings - z * ELO_SCALE * se,
        upper=ratings + z * ELO_SCALE * se,
        ci_level=ci_level,
        base=base,
        mle_exists=exists,
        l2=l2,
        iterations=it,
        converged=converged,
        log_likelihood=ll,
    )


def elo_to_preference(ratings: Sequence[float]) -> np.ndarray:
    """Preference matrix implied by Elo-scale ratings: ``1 / (1 + 10^((R_j - R_i)/400))``."""
    R = np.asarray(ratings, dtype=float)
    return expit((R[:, None] - R[None, :]) / ELO_SCALE)
