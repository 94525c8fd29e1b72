"""The judge's cost c_J: a duel on (i, j) costs c_i + c_j + c_J, in the oracle, the policies and the simulator."""

import json

import numpy as np
import pytest

from algorithms import synthetic_instance
from algorithms.oracle import g_matrix, solve_oracle
from algorithms.policies import PolicyError, make_policy, policy_from_state
from algorithms.simulator import simulate


def test_oracle_with_zero_judge_cost_is_the_paper_oracle():
    inst = synthetic_instance(4)
    a, b = solve_oracle(inst), solve_oracle(inst, judge_cost=0.0)
    assert a.c_star == b.c_star
    assert np.array_equal(a.pull_fractions, b.pull_fractions)


def test_g_matrix_divides_by_the_full_duel_cost():
    inst = synthetic_instance(4)
    P, c = inst.preference, np.asarray(inst.costs, dtype=float)
    G = g_matrix(P, c, 3.0)
    for m in range(inst.L):
        for n in range(inst.L):
            p = P[m, n]
            d = p * np.log(2 * p) + (1 - p) * np.log(2 * (1 - p)) if (m != n and p < 0.5) else 0.0
            assert G[m, n] == pytest.approx(d / (c[m] + c[n] + 3.0), rel=1e-9, abs=1e-15)


def test_judge_cost_raises_c_star_and_moves_the_allocation_towards_cost_unaware():
    inst = synthetic_instance(4)
    paper = solve_oracle(inst)
    with_judge = solve_oracle(inst, judge_cost=5.0)
    assert with_judge.c_star > paper.c_star
    # a very expensive judge makes arm costs irrelevant: the allocation tends to the unit-cost one
    huge = solve_oracle(inst, judge_cost=1e9)
    unit = solve_oracle(inst.preference, np.ones(inst.L))
    assert np.allclose(huge.pull_fractions, unit.pull_fractions, atol=1e-6)
    assert not np.allclose(paper.pull_fractions, unit.pull_fractions, atol=1e-3)


@pytest.mark.parametrize("bad", [-1.0, float("nan"), float("inf"), "x"])
def test_bad_judge_cost_is_rejected(bad):
    with pytest.raises(ValueError):
        solve_oracle(synthetic_instance(4), judge_cost=bad)
    with pytest.raises(PolicyError):
        make_policy("dctas", [1, 2, 3], 0.1, judge_cost=bad)
    with pytest.raises(PolicyError):
        simulate(synthetic_instance(3), "dctas", 0.1, 2, judge_cost=bad)


@pytest.mark.parametrize("algorithm", ["dctas", "crr", "dctac", "dpca"])
def test_policy_state_carries_the_judge_cost_and_replays(algorithm):
    rng = np.random.default_rng(5)
    inst = synthetic_instance(4)
    pol = make_policy(algorithm, inst.costs, 0.1, judge_cost=2.0)
    for _ in range(60):
        i, j = pol.next_pair()
        pol.record(i, j, float(rng.random() < inst.preference[i, j]))
    state = json.loads(json.dumps(pol.to_state()))
    assert state["params"]["judge_cost"] == 2.0
    twin = policy_from_state(state)
    for _ in range(60):
        p, q = pol.next_pair(), twin.next_pair()
        assert p == q
        s = float(rng.random() < inst.preference[p])
        pol.record(*p, s)
        twin.record(*q, s)


def test_zero_judge_cost_leaves_the_state_unchanged():
    assert "judge_cost" not in make_policy("dctas", [1, 2, 3], 0.1).to_state()["params"]


def test_simulator_charges_the_judge_once_per_duel_and_matches_the_policy():
    inst = synthetic_instance(4)
    cj = 7.0
    res = simulate(inst, "dctas", 0.1, 30, seed=1, judge_cost=cj)
    base = (res.pair_pulls * np.array([inst.costs[i] + inst.costs[j] for i, j in inst.pairs()])).sum(axis=1)
    assert np.allclose(res.costs, base + cj * res.pulls)
    s = res.summary()
    assert s["judge_cost"] == cj
    assert s["lower_bound"] == pytest.approx(solve_oracle(inst, judge_cost=cj).lower_bound(0.1))


def test_judge_cost_changes_cost_aware_sampling():
    inst = synthetic_instance(4)
    a = simulate(inst, "dctas", 0.01, 50, seed=2)
    b = simulate(inst, "dctas", 0.01, 50, seed=2, judge_cost=50.0)
    fa = a.pair_pulls.sum(axis=0) / a.pulls.sum()
    fb = b.pair_pulls.sum(axis=0) / b.pulls.sum()
    unit = solve_oracle(inst.preference, np.ones(inst.L)).pull_fractions
    # with an expensive judge the pulls move towards the cost-unaware allocation
    assert np.abs(fb - unit).sum() < np.abs(fa - unit).sum()
