"""Bradley-Terry MLE: recovery of known strengths, CIs, existence of the MLE, input checks."""

import numpy as np
import pytest
from scipy.special import expit

from algorithms.bradley_terry import ELO_SCALE, elo_to_preference, fit_bradley_terry, is_strongly_connected


def sample_wins(R, n, rng):
    P = elo_to_preference(R)
    L = len(R)
    W = np.zeros((L, L))
    for i in range(L):
        for j in range(i + 1, L):
            w = rng.binomial(n, P[i, j])
            W[i, j], W[j, i] = w, n - w
    return W


def test_elo_to_preference_matches_the_leaderboard_formula():
    P = elo_to_preference([1400, 1000])
    assert P[0, 1] == pytest.approx(1 / (1 + 10 ** (-400 / 400)))
    assert P[0, 1] + P[1, 0] == pytest.approx(1.0)
    assert P[0, 0] == 0.5


def test_exact_fit_on_expected_counts():
    """With wins equal to their expectations the MLE is the truth (up to the mean)."""
    R = np.array([1250.0, 1100.0, 1000.0, 950.0, 700.0])
    n = 1000
    W = elo_to_preference(R) * n
    np.fill_diagonal(W, 0)
    res = fit_bradley_terry(W, list("abcde"), base=1000.0)
    assert res.converged and res.mle_exists
    assert np.allclose(res.ratings - res.ratings.mean(), R - R.mean(), atol=1e-6)
    assert res.ratings.mean() == pytest.approx(1000.0)
    assert res.ranking() == list("abcde")
    assert np.allclose(res.preference(), elo_to_preference(R), atol=1e-9)


def test_confidence_intervals_cover_the_truth_and_shrink_with_data():
    rng = np.random.default_rng(7)
    R = np.array([1100.0, 1050.0, 1000.0, 900.0])
    centred = R - R.mean() + 1000.0
    covered = 0
    reps = 40
    for _ in range(reps):
        res = fit_bradley_terry(sample_wins(R, 300, rng), ci_level=0.95)
        covered += int(np.sum((res.lower <= centred) & (centred <= res.upper)))
    rate = covered / (reps * len(R))
    assert 0.88 <= rate <= 0.995, rate
    small = fit_bradley_terry(sample_wins(R, 50, rng))
    big = fit_bradley_terry(sample_wins(R, 5000, rng))
    assert np.all(big.upper - big.lower < (small.upper - small.lower) / 5)


def test_standard_errors_match_the_fisher_information_for_two_arms():
    # two arms, n comparisons, p = 0.7: var(theta_0 - theta_1) = 1 / (n p (1-p)); each centred theta has half
    n, p = 400, 0.7
    W = np.array([[0, p * n], [(1 - p) * n, 0]])
    res = fit_bradley_terry(W)
    assert res.theta[0] - res.theta[1] == pytest.approx(np.log(p / (1 - p)))
    assert res.se[0] == pytest.approx(0.5 / np.sqrt(n * p * (1 - p)))
    assert expit(res.theta[0] - res.theta[1]) == pytest.approx(p)


def test_fractional_wins_from_half_ties_are_accepted():
    W = np.array([[0, 10.5, 6], [4.5, 0, 7.5], [3, 2.5, 0]])
    res = fit_bradley_terry(W, ["x", "y", "z"])
    assert res.converged and res.ranking()[0] == "x"


def test_mle_does_not_exist_without_strong_connectivity():
    W = np.array([[0, 3, 2], [0, 0, 1], [0, 0, 0.0]])  # arm 0 never lost, arm 2 never won
    assert not is_strongly_connected(W)
    res = fit_bradley_terry(W)
    assert res.mle_exists is False and res.l2 > 0
    assert np.all(np.isfinite(res.ratings)) and res.ranking() == ["0", "1", "2"]
    assert res.to_dict()["mle_exists"] is False


def test_strong_connectivity():
    assert is_strongly_connected(np.array([[0, 1, 0], [0, 0, 1], [1, 0, 0]]))
    assert not is_strongly_connected(np.array([[0, 1], [0, 0]]))


def test_to_dict_is_json_safe_and_on_elo_scale():
    import json

    res = fit_bradley_terry(np.array([[0, 60], [40, 0.0]]), ["a", "b"])
    d = json.loads(json.dumps(res.to_dict()))
    gap = d["ratings"]["a"]["rating"] - d["ratings"]["b"]["rating"]
    assert gap == pytest.approx(ELO_SCALE * np.log(1.5))
    assert d["ratings"]["a"]["lower"] < d["ratings"]["a"]["rating"] < d["ratings"]["a"]["upper"]


@pytest.mark.parametrize(
    "W, msg",
    [
        (np.ones((2, 3)), "square"),
        (np.array([[0, -1], [1, 0]]), "non-negative"),
        (np.array([[0, np.nan], [1, 0]]), "finite"),
    ],
)
def test_bad_input(W, msg):
    with pytest.raises(ValueError, match=msg):
        fit_bradley_terry(W)


def test_bad_names_and_level():
    with pytest.raises(ValueError, match="names"):
        fit_bradley_terry(np.array([[0, 1], [1, 0]]), ["only-one"])
    with pytest.raises(ValueError, match="ci_level"):
        fit_bradley_terry(np.array([[0, 1], [1, 0]]), ci_level=1.5)
