"""The fast simulator: same decisions as the step-wise policies, reproducibility, and statistical claims.

Statistical checks use fixed seeds; the larger runs live in benchmarks/.
"""

import math

import numpy as np
import pytest
from scipy.stats import binom

from algorithms import ALGORITHMS, Instance, make_policy, synthetic_instance
from algorithms.oracle import solve_oracle
from algorithms.simulator import simulate, trace_trial

# an intransitive instance: arm 0 is the Condorcet winner, arms 1 -> 2 -> 3 -> 1 form a cycle
CYCLE = Instance(
    ["w", "x", "y", "z"],
    [2.0, 1.0, 0.5, 3.0],
    [[0.5, 0.7, 0.7, 0.72], [0.3, 0.5, 0.7, 0.3], [0.3, 0.3, 0.5, 0.7], [0.28, 0.7, 0.3, 0.5]],
)
HARD = Instance(["a", "b", "c"], [1.0, 1.0, 1.0], [[0.5, 0.55, 0.56], [0.45, 0.5, 0.52], [0.44, 0.48, 0.5]])


@pytest.mark.parametrize("algorithm", ALGORITHMS)
@pytest.mark.parametrize("instance", [synthetic_instance(4), CYCLE], ids=["synthetic4", "cycle"])
def test_simulator_makes_the_same_decisions_as_the_stepwise_policy(algorithm, instance):
    for seed in (11, 12):
        tr = trace_trial(instance, algorithm, 0.1, seed)
        assert tr["stopped"]
        pol = make_policy(algorithm, instance.costs, 0.1)
        for pair, score in zip(tr["pairs"], tr["scores"]):
            assert not pol.stopped
            assert pol.next_pair() == pair
            pol.record(*pair, score)
        assert pol.stopped, "the step-wise policy must stop at the same step"
        assert pol.recommendation() == tr["recommended"]
        cost = sum(instance.costs[i] + instance.costs[j] for i, j in tr["pairs"])
        assert cost == pytest.approx(tr["cost"])


def test_reproducible_by_seed_whatever_the_jobs():
    inst = synthetic_instance(4)
    a = simulate(inst, "dctas", 0.1, 12, seed=5, jobs=1)
    b = simulate(inst, "dctas", 0.1, 12, seed=5, jobs=2)
    c = simulate(inst, "dctas", 0.1, 12, seed=6, jobs=1)
    np.testing.assert_array_equal(a.costs, b.costs)
    np.testing.assert_array_equal(a.pair_pulls, b.pair_pulls)
    assert not np.array_equal(a.costs, c.costs)


def _error_bound(delta, n, level=1e-3):
    """Largest error count still consistent with an error rate <= delta (one-sided binomial test at `level`)."""
    return int(binom.ppf(1 - level, n, delta))


@pytest.mark.slow
@pytest.mark.parametrize("algorithm", ALGORITHMS)
@pytest.mark.parametrize("instance", [HARD, CYCLE, synthetic_instance(10)], ids=["hard", "cycle", "synthetic10"])
def test_error_rate_at_most_delta(algorithm, instance):
    delta, n = 0.2, 300
    res = simulate(instance, algorithm, delta, n, seed=2024, max_steps=2_000_000)
    # P(stop and wrong) <= delta: a trial cut at max_steps has not stopped and is no error; nearly all stop
    assert res.stopped.mean() >= 0.9
    assert (res.errors & res.stopped).sum() <= _error_bound(delta, n)


def test_error_rate_check_can_fail_on_a_wrong_recommender():
    """Sanity check of the statistical test itself: a coin-flip recommender is rejected."""
    rng = np.random.default_rng(0)
    errors = int((rng.random(300) < 0.5).sum())
    assert errors > _error_bound(0.2, 300)


@pytest.mark.slow
def test_dctas_pull_fractions_approach_the_oracle_as_delta_shrinks():
    # convergence is slow (log(1/delta) samples, sqrt(t) forced exploration): see docs/algorithms.md
    inst = synthetic_instance(19)
    target = solve_oracle(inst).pull_fractions
    dist = []
    for delta in (0.1, 1e-12, 1e-40):
        res = simulate(inst, "dctas", delta, 40, seed=3)
        frac = res.pair_pulls / res.pulls[:, None]
        dist.append(float(np.abs(frac - target).max(axis=1).mean()))
    assert dist[0] > dist[1] > dist[2]
    assert dist[2] < dist[0] - 0.08


@pytest.mark.slow
def test_dctas_costs_less_than_tas_for_large_k():
    for k in (10, 19):
        inst = synthetic_instance(k)
        d = simulate(inst, "dctas", 0.01, 200, seed=7)
        t = simulate(inst, "tas", 0.01, 200, seed=7)
        se = math.sqrt(d.costs.var() / 200 + t.costs.var() / 200)
        assert d.costs.mean() + 2 * se < t.costs.mean()


def test_cost_is_at_least_the_lower_bound_on_average():
    inst = synthetic_instance(4)
    res = simulate(inst, "dctas", 0.01, 50, seed=1)
    s = res.summary()
    assert s["cost_over_lower_bound"] > 1.0
    assert s["error_rate"] == 0.0
    assert sum(p["fraction"] for p in s["pull_fractions"]) == pytest.approx(1.0)
    assert s["mean_cost"] == pytest.approx(float((res.pair_pulls @ np.array([5.0, 5.0, 2.0])).mean()))


def test_max_steps_marks_trials_unfinished():
    res = simulate(HARD, "dctas", 1e-6, 3, seed=0, max_steps=50)
    assert not res.stopped.any()
    assert (res.pulls == 50).all()
    assert res.summary()["unfinished"] == 3


def test_simulate_validates_arguments():
    from algorithms.policies import PolicyError

    inst = synthetic_instance(2)
    with pytest.raises(PolicyError, match="unknown algorithm"):
        simulate(inst, "nope", 0.1, 2)
    with pytest.raises(PolicyError, match="trials"):
        simulate(inst, "dctas", 0.1, 0)
    with pytest.raises(PolicyError, match="delta"):
        simulate(inst, "dctas", 1.5, 2)
    with pytest.raises(PolicyError, match="unknown parameter"):
        simulate(inst, "dctas", 0.1, 2, k1=3)
