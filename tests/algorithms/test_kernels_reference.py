"""Each compiled kernel against its numpy reference formula (stats.py, thresholds.py, oracle.py), on random inputs."""

import numpy as np
import pytest

from algorithms import _kernels as kern
from algorithms.oracle import g_matrix, solve_oracle
from algorithms.policies import pair_index_arrays
from algorithms.stats import evidence, glr_statistic, kl_bernoulli
from algorithms.thresholds import beta, beta_constant

CASES = 200


def _random_state(rng):
    L = int(rng.integers(2, 9))
    PI, PJ, PK = pair_index_arrays(L)
    K = PI.shape[0]
    N = rng.integers(1, 60, K).astype(float)
    W = np.floor(rng.random(K) * (2 * N + 1)) / 2  # scores in half points, 0 <= W <= N
    c = rng.uniform(0.1, 10, L)
    return L, PI, PJ, PK, N, W, c


def _matrices(L, PI, PJ, N, W):
    C = np.zeros((L, L))
    X = np.zeros((L, L))
    C[PI, PJ] = C[PJ, PI] = N
    X[PI, PJ] = W
    X[PJ, PI] = N - W
    return X, C


def test_kl_half_matches_kl_bernoulli():
    rng = np.random.default_rng(0)
    for x in rng.random(CASES):
        ref = float(kl_bernoulli(x, 0.5)) if x < 0.5 else 0.0
        assert kern.kl_half(x) == pytest.approx(ref, rel=1e-12, abs=1e-15)


def test_rebuild_matches_evidence_g_matrix_and_glr():
    rng = np.random.default_rng(1)
    for _ in range(CASES):
        L, PI, PJ, PK, N, W, c = _random_state(rng)
        T, G, S, AMAX = np.zeros((L, L)), np.zeros((L, L)), np.zeros(L), np.zeros(L)
        kern.rebuild(N, W, PI, PJ, c, T, G, S, AMAX)
        X, C = _matrices(L, PI, PJ, N, W)
        np.testing.assert_allclose(S, evidence(X, C), rtol=1e-10, atol=1e-12)
        P = np.where(C > 0, X / np.maximum(C, 1), 0.5)
        np.testing.assert_allclose(G, g_matrix(P, c), rtol=1e-10, atol=1e-15)
        np.testing.assert_allclose(AMAX, g_matrix(P, c).max(axis=1), rtol=1e-10, atol=1e-15)
        a, z = kern.leader_and_Z(S)
        z_ref, a_ref = glr_statistic(X, C)
        assert a == a_ref and z == pytest.approx(z_ref, rel=1e-10, abs=1e-12)


def test_beta_at_matches_thresholds_beta():
    rng = np.random.default_rng(2)
    for _ in range(CASES):
        L = int(rng.integers(2, 20))
        delta = float(10 ** rng.uniform(-12, -0.1))
        t = float(rng.integers(1, 10**8))
        assert kern.beta_at(t, L, beta_constant(delta, L)) == pytest.approx(beta(t, delta, L), rel=1e-12)


def test_pull_allocation_matches_the_oracle_at_the_true_matrix():
    rng = np.random.default_rng(3)
    done = 0
    while done < 60:
        L = int(rng.integers(3, 8))
        r = rng.normal(0, 1, L)
        P = 1 / (1 + np.exp(-(r[:, None] - r[None, :])))
        c = rng.uniform(0.5, 5, L)
        PI, PJ, PK = pair_index_arrays(L)
        # wins equal to the truth times a large count: the empirical matrix is P exactly
        N = np.full(PI.shape[0], 1024.0)
        W = P[PI, PJ] * N
        T, G, S, AMAX = np.zeros((L, L)), np.zeros((L, L)), np.zeros(L), np.zeros(L)
        kern.rebuild(N, W, PI, PJ, c, T, G, S, AMAX)
        alpha = np.zeros(PI.shape[0])
        kern.pull_allocation(G, S, AMAX, c, PI, PJ, PK, alpha)
        np.testing.assert_allclose(alpha, solve_oracle(P, c).pull_fractions, rtol=1e-7, atol=1e-12)
        done += 1
