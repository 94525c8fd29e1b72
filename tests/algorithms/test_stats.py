"""The closed-form GLR (Lemma 3) against a brute-force constrained likelihood maximisation."""

import numpy as np
import pytest
from scipy.optimize import minimize_scalar

from algorithms.stats import evidence, glr_matrix, glr_statistic, kl_bernoulli


def _loglik(p, n, w):
    p = min(max(p, 1e-300), 1 - 1e-16)
    return w * np.log(p) + (n - w) * np.log(1 - p)


def _max_loglik_given_best(best, W, N):
    """max over matrices in which `best` beats everyone of the log-likelihood, by numerical optimisation."""
    L = N.shape[0]
    total = 0.0
    for i in range(L):
        for j in range(i + 1, L):
            n, w = N[i, j], W[i, j]
            if n == 0:
                continue
            if best == i:
                lo, hi = 0.5, 1.0
            elif best == j:
                lo, hi = 0.0, 0.5
            else:
                lo, hi = 0.0, 1.0
            res = minimize_scalar(
                lambda p: -_loglik(p, n, w), bounds=(lo, hi), method="bounded", options={"xatol": 1e-12}
            )
            cands = [res.x, lo, hi, min(max(w / n, lo), hi)]
            total += max(_loglik(p, n, w) for p in cands)
    return total


@pytest.mark.parametrize("seed", range(8))
def test_closed_form_Z_equals_brute_force_glr(seed):
    rng = np.random.default_rng(seed)
    L = int(rng.integers(2, 6))
    N = np.zeros((L, L))
    W = np.zeros((L, L))
    for i in range(L):
        for j in range(i + 1, L):
            n = int(rng.integers(0, 40))
            w = int(rng.binomial(n, rng.uniform(0.1, 0.9))) if n else 0
            N[i, j] = N[j, i] = n
            W[i, j], W[j, i] = w, n - w
    Z = glr_matrix(W, N)
    ll = [_max_loglik_given_best(b, W, N) for b in range(L)]
    for i in range(L):
        for j in range(L):
            if i != j:
                assert Z[i, j] == pytest.approx(ll[i] - ll[j], abs=1e-6)
                assert Z[i, j] == pytest.approx(-Z[j, i])


def test_evidence_counts_only_losing_duels():
    N = np.array([[0, 10], [10, 0]], float)
    W = np.array([[0, 7], [3, 0]], float)
    S = evidence(W, N)
    assert S[0] == 0.0
    assert S[1] == pytest.approx(10 * kl_bernoulli(0.3, 0.5))
    z, best = glr_statistic(W, N)
    assert best == 0 and z == pytest.approx(S[1])


def test_kl_bernoulli_edges():
    assert kl_bernoulli(0.0, 0.5) == pytest.approx(np.log(2))
    assert kl_bernoulli(1.0, 0.5) == pytest.approx(np.log(2))
    assert kl_bernoulli(0.5, 0.5) == 0.0
