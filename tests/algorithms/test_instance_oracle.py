"""Instance validation and the oracle (Theorem 1, Proposition 1, Lemma 2)."""

import json
import math

import numpy as np
import pytest

from algorithms.instance import Instance, InstanceError, parse_builtin, synthetic_instance
from algorithms.oracle import g_matrix, plugin_lower_bound, solve_oracle
from algorithms.stats import kl_bernoulli


def test_paper_pull_fraction_table_at_k4():
    inst = synthetic_instance(4)
    aware = solve_oracle(inst)
    unaware = solve_oracle(inst, costs=[1, 1, 1])
    assert aware.pairs == [(0, 1), (0, 2), (1, 2)]
    np.testing.assert_allclose(np.round(aware.pull_fractions, 4), [0.3706, 0.0, 0.6294])
    np.testing.assert_allclose(np.round(unaware.pull_fractions, 4), [0.5720, 0.4280, 0.0])


def test_oracle_closed_form_matches_definitions():
    inst = synthetic_instance(4)
    res = solve_oracle(inst)
    P, c = inst.preference, inst.costs
    d = lambda p: kl_bernoulli(p, 0.5)
    a2 = max(d(P[1, 0]) / (c[1] + c[0]), 0.0)  # arm 2 loses only to arm 1
    a3 = max(d(P[2, 0]) / (c[2] + c[0]), d(P[2, 1]) / (c[2] + c[1]))
    assert res.alpha[1] == pytest.approx(a2)
    assert res.alpha[2] == pytest.approx(a3)
    assert res.c_star == pytest.approx(1 / a2 + 1 / a3)
    assert res.lower_bound(0.01) == pytest.approx(res.c_star * math.log(25))
    assert res.cost_fractions.sum() == pytest.approx(1.0)
    assert res.pull_fractions.sum() == pytest.approx(1.0)


def test_lower_bound_is_optimal_value_of_the_max_min_problem():
    """c*^-1 = sup_w min_m sum_n w_mn g_mn (with m losing): random w never beats the oracle's w."""
    rng = np.random.default_rng(0)
    inst = Instance(
        ["a", "b", "c", "d"],
        [3.0, 1.0, 2.0, 0.5],
        [[0.5, 0.6, 0.7, 0.55], [0.4, 0.5, 0.3, 0.8], [0.3, 0.7, 0.5, 0.35], [0.45, 0.2, 0.65, 0.5]],
    )
    res = solve_oracle(inst)
    G = g_matrix(inst.preference, inst.costs)
    pairs = res.pairs

    def value(w):
        return min(
            sum(
                w[k] * (G[m, n] if m == i else G[m, i] if m == n else 0.0)
                for k, (i, n) in enumerate(pairs)
                if m in (i, n)
            )
            for m in range(inst.L)
            if m != res.winner
        )

    best = value(res.cost_fractions)
    assert best == pytest.approx(1.0 / res.c_star, rel=1e-9)
    for _ in range(2000):
        w = rng.dirichlet(np.ones(len(pairs)))
        assert value(w) <= best + 1e-12


def test_equal_maxima_split_evenly():
    # arm 2 loses equally (per unit cost) to arms 0 and 1
    inst = Instance(["x", "y", "z"], [1, 1, 1], [[0.5, 0.6, 0.7], [0.4, 0.5, 0.7], [0.3, 0.3, 0.5]])
    res = solve_oracle(inst)
    assert set(res.gamma[2]) == {0, 1}
    k02, k12 = res.pairs.index((0, 2)), res.pairs.index((1, 2))
    assert res.cost_fractions[k02] == pytest.approx(res.cost_fractions[k12])


def test_instance_validation_messages():
    with pytest.raises(InstanceError, match="square|3x3"):
        Instance(["a", "b", "c"], [1, 1, 1], [[0.5, 0.6], [0.4, 0.5]])
    with pytest.raises(InstanceError, match=r"\[0, 1\]"):
        Instance(["a", "b"], [1, 1], [[0.5, 1.2], [-0.2, 0.5]])
    with pytest.raises(InstanceError, match="p_ij \\+ p_ji = 1"):
        Instance(["a", "b"], [1, 1], [[0.5, 0.6], [0.6, 0.5]])
    with pytest.raises(InstanceError, match="finite and > 0"):
        Instance(["a", "b"], [1, 0], [[0.5, 0.6], [0.4, 0.5]])
    with pytest.raises(InstanceError, match="at least 2"):
        Instance(["a"], [1], [[0.5]])
    with pytest.raises(InstanceError, match="unique"):
        Instance(["a", "a"], [1, 1], [[0.5, 0.6], [0.4, 0.5]])
    with pytest.raises(InstanceError, match="one entry per arm"):
        Instance(["a", "b"], [1, 1, 1], [[0.5, 0.6], [0.4, 0.5]])


def test_no_condorcet_winner_names_the_failing_arms():
    cyc = [[0.5, 0.6, 0.4], [0.4, 0.5, 0.6], [0.6, 0.4, 0.5]]
    with pytest.raises(InstanceError) as err:
        Instance(["r", "p", "s"], [1, 1, 1], cyc)
    msg = str(err.value)
    assert "no Condorcet winner" in msg
    assert "r does not beat s" in msg and "p does not beat r" in msg and "s does not beat p" in msg
    inst = Instance(["r", "p", "s"], [1, 1, 1], cyc, require_condorcet=False)
    assert inst.condorcet_winner is None


def test_json_round_trip_keeps_extra_keys(tmp_path):
    inst = synthetic_instance(7)
    path = tmp_path / "i.json"
    path.write_text(json.dumps(inst.to_dict()))
    back = Instance.from_json_file(path)
    assert back.names == inst.names
    np.testing.assert_array_equal(back.costs, inst.costs)
    np.testing.assert_array_equal(back.preference, inst.preference)
    assert back.metadata["provenance"]["source"] == "paper Section 5.1"


def test_json_file_errors(tmp_path):
    bad = tmp_path / "bad.json"
    bad.write_text("{not json")
    with pytest.raises(InstanceError, match="not valid JSON"):
        Instance.from_json_file(bad)
    with pytest.raises(InstanceError, match="not found"):
        Instance.from_json_file(tmp_path / "missing.json")
    bad.write_text(json.dumps({"names": ["a", "b"]}))
    with pytest.raises(InstanceError, match="missing key"):
        Instance.from_json_file(bad)


def test_builtin_synthetic_names():
    assert parse_builtin("synthetic:k=4").costs.tolist() == [4.0, 1.0, 1.0]
    assert parse_builtin("synthetic").costs.tolist() == [1.0, 1.0, 1.0]
    assert parse_builtin("somefile.json") is None
    with pytest.raises(InstanceError):
        parse_builtin("synthetic:k=-1")


def test_plugin_lower_bound():
    inst = synthetic_instance(4)
    counts = np.array([[0, 100, 100], [100, 0, 100], [100, 100, 0]], float)
    wins = inst.preference * counts
    lb = plugin_lower_bound(wins, counts, inst.costs, 0.01)
    assert lb == pytest.approx(solve_oracle(inst).lower_bound(0.01))
    cyc_w = np.array([[0, 60, 40], [40, 0, 60], [60, 40, 0]], float)
    assert plugin_lower_bound(cyc_w, counts, inst.costs, 0.01) is None


def test_pc_constant_is_the_sum_over_the_winners_pairs():
    from algorithms import plugin_pc_lower_bound, solve_pc_oracle
    from algorithms.stats import kl_bernoulli

    inst = synthetic_instance(4)
    P, c = inst.preference, inst.costs
    expected = sum((c[0] + c[m] + 0.5) / kl_bernoulli(P[0, m], 0.5) for m in (1, 2))
    res = solve_pc_oracle(inst, judge_cost=0.5)
    assert res.winner == 0
    assert res.c_pc == pytest.approx(expected)
    assert res.pair_costs.sum() == pytest.approx(1.0)
    assert res.pair_costs[res.pairs.index((1, 2))] == 0.0
    # every lower bound of a rule with both verdicts is at least the paper's c* (the paper's rule needs less)
    assert res.c_pc >= solve_oracle(inst, judge_cost=0.5).c_star - 1e-9
    # the floor uses kl(delta, 1 - delta) >= log(1/(4 delta))
    assert res.floor(0.01) == pytest.approx(res.c_pc * 0.98 * np.log(99))
    assert res.floor(0.01) > res.lower_bound(0.01) == pytest.approx(res.c_pc * np.log(25))
    counts = np.full((3, 3), 100.0)
    np.fill_diagonal(counts, 0)
    lb = plugin_pc_lower_bound(inst.preference * counts, counts, inst.costs, 0.01, 0.5)
    assert lb == pytest.approx(res.lower_bound(0.01))
    cyc_w = np.array([[0, 60, 40], [40, 0, 60], [60, 40, 0]], float)
    assert plugin_pc_lower_bound(cyc_w, counts, inst.costs, 0.01) is None


def test_pc_constant_without_a_winner_solves_the_linear_programme():
    from algorithms import solve_pc_oracle
    from algorithms.stats import kl_bernoulli

    # a symmetric 3-cycle: each arm loses one pair, each pair refutes one arm -> spend 1/3 on each
    P = [[0.5, 0.6, 0.4], [0.4, 0.5, 0.6], [0.6, 0.4, 0.5]]
    res = solve_pc_oracle(P, [1.0, 1.0, 1.0])
    assert res.winner is None
    assert res.c_pc == pytest.approx(3 * 2 / kl_bernoulli(0.6, 0.5), rel=1e-6)
    assert res.pair_costs == pytest.approx([1 / 3] * 3, rel=1e-6)
    # an exact tie that decides makes the bound infinite
    assert solve_pc_oracle([[0.5, 0.5], [0.5, 0.5]], [1.0, 1.0]).c_pc == float("inf")


def test_pc_floor_is_finite_for_the_smallest_delta():
    from algorithms import solve_pc_oracle
    from algorithms.oracle import kl_delta

    assert kl_delta(1e-300) == pytest.approx(300 * np.log(10), rel=1e-12)
    assert kl_delta(0.3) == pytest.approx(0.4 * np.log(0.7 / 0.3))
    assert np.isfinite(solve_pc_oracle(synthetic_instance(4)).floor(1e-300))
