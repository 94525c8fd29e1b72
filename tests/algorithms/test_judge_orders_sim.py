"""The judge model with position flips and ties (algorithms/judge_orders.py): both modes estimate the
order-averaged preference, one call per duel in ``one`` mode, and the dctas-pc driver counts calls."""

from __future__ import annotations

import math

import numpy as np
import pytest

from algorithms.instance import condorcet_winner, synthetic_instance
from algorithms.judge_orders import JudgeNoise, duel_score, expected_score, run_trial, run_trials


def _scores(p, noise, orders, n, seed):
    rng = np.random.default_rng(seed)
    out = [duel_score(p, noise, orders, rng) for _ in range(n)]
    return np.array([s for s, _ in out]), np.array([c for _, c in out])


@pytest.mark.parametrize("first", [1.0, 0.8])
@pytest.mark.parametrize("orders", ["both", "one"])
def test_both_modes_estimate_the_order_averaged_preference(orders, first):
    noise = JudgeNoise(tie=0.3, flip=0.13, first=first)
    s, calls = _scores(0.7, noise, orders, 40_000, seed=3)
    se = s.std(ddof=1) / math.sqrt(len(s))
    assert abs(s.mean() - expected_score(0.7, noise)) < 4 * se
    assert set(calls) == {2 if orders == "both" else 1}


def test_one_order_turns_a_position_bias_into_zero_mean_noise():
    # a judge that always picks the first position: both orders disagree on every duel (all ties);
    # one random order gives a fair coin, never a systematic side
    noise = JudgeNoise(tie=0.0, flip=1.0, first=1.0)
    both, _ = _scores(0.9, noise, "both", 2000, seed=1)
    one, _ = _scores(0.9, noise, "one", 20_000, seed=1)
    assert set(both) == {0.5}
    assert set(one) == {0.0, 1.0}
    assert abs(one.mean() - 0.5) < 4 * 0.5 / math.sqrt(len(one))


def test_flip_and_tie_rates_are_what_both_orders_see():
    noise = JudgeNoise(tie=0.2, flip=0.1)
    s, _ = _scores(1.0, noise, "both", 40_000, seed=5)  # the latent winner is always i
    half = float(np.mean(s == 0.5))
    assert abs(half - 0.3) < 4 * math.sqrt(0.3 * 0.7 / len(s))
    assert set(s) == {0.5, 1.0}


@pytest.mark.parametrize("bad", [dict(tie=-0.1), dict(flip=1.5), dict(tie=0.6, flip=0.6), dict(first="x")])
def test_bad_noise_is_rejected(bad):
    with pytest.raises(ValueError):
        JudgeNoise(**bad)


def test_driver_counts_calls_and_certifies_the_winner_in_both_modes():
    inst = synthetic_instance(4)
    best = condorcet_winner(inst.preference)
    for orders, per_duel in (("both", 2), ("one", 1)):
        runs = run_trials(inst.preference, JudgeNoise(), orders, 0.05, 4, seed=2)
        for r in runs:
            assert r["stopped"] and r["winner"] == best
            assert r["calls"] == per_duel * r["duels"] and r["judge_spend"] == r["calls"]
    with pytest.raises(ValueError):
        run_trial(inst.preference, JudgeNoise(), "three", 0.05, 1)


def test_same_seeds_same_campaign():
    inst = synthetic_instance(4)
    a = run_trial(inst.preference, JudgeNoise(), "one", 0.05, 11, tie_policy="drop")
    b = run_trial(inst.preference, JudgeNoise(), "one", 0.05, 11, tie_policy="drop")
    assert a == b


def _spend(runs):
    return float(np.mean([r["judge_spend"] for r in runs]))


@pytest.mark.parametrize("flip, better, trials", [(0.13, "one", 60), (0.5, "both", 30)])
def test_auto_costs_at_most_five_percent_more_than_the_better_fixed_mode(flip, better, trials):
    # same seeds in every mode (the k-th duel of a pair is the same draw); benchmarks/bench_judge_orders.py
    # measures the whole range of flip rates with more trials
    inst = synthetic_instance(4)
    noise = JudgeNoise(tie=0.3, flip=flip)
    worse = "both" if better == "one" else "one"
    modes = ("both", "one", "auto") if flip < 0.3 else (better, "auto")  # one order at flip 0.5 is long: 1.8x
    spend = {m: _spend(run_trials(inst.preference, noise, m, 0.01, trials, seed=1)) for m in modes}
    assert spend.get(worse, np.inf) > spend[better]
    assert spend["auto"] <= 1.05 * spend[better], spend


def test_auto_switches_by_the_measured_rates_and_back_when_they_change():
    from algorithms.judge_orders import AutoOrders

    rule = AutoOrders()
    assert [rule.mode(0.5) for _ in range(3)] == ["both"] * 3  # nothing measured yet
    for _ in range(20):  # orders agree: one order is cheaper
        rule.observe(1.0, 1.0, 1.0)
    assert rule.mode(0.5) == "one" and rule.mode(0.0) == "both"  # the monitoring draw still reads both
    for _ in range(60):  # now the orders disagree on every duel (flip rate 1): back to both
        rule.observe(1.0, 0.0, 0.5)
    assert rule.mode(0.5) == "both"
    assert rule.duels == {"both": 5, "one": 1}
    # z: +1 agreement, -1 a flip, -1/2 a winner and a tie under consistent, 0 under mean, 0 two ties
    assert [
        AutoOrders.evidence(*x) for x in [(1, 1, 1), (1, 0, 0.5), (1, 0.5, 0.5), (1, 0.5, 0.75), (0.5, 0.5, 0.5)]
    ] == [
        1.0,
        -1.0,
        -0.5,
        0.0,
        0.0,
    ]


def test_information_per_call_crosses_at_flip_half_of_the_non_ties():
    from algorithms.judge_orders import information_per_call

    for tie in (0.0, 0.3, 0.5):
        edge = (1 - tie) / 2
        for p in (0.501, 0.51):
            below, above = JudgeNoise(tie=tie, flip=edge - 0.02), JudgeNoise(tie=tie, flip=edge + 0.02)
            assert information_per_call(below, "one", p) > information_per_call(below, "both", p)
            assert information_per_call(above, "one", p) < information_per_call(above, "both", p)


def test_auto_error_rate_is_at_most_delta_by_a_binomial_test():
    from scipy.stats import binomtest

    # a close pair and a judge near the point where the modes cost the same: auto changes mode within a campaign
    P = np.array([[0.5, 0.6], [0.4, 0.5]])
    delta, trials = 0.2, 150
    runs = run_trials(P, JudgeNoise(tie=0.3, flip=0.3), "auto", delta, trials, seed=4)
    assert all(r["stopped"] for r in runs)
    assert sum(1 for r in runs if r["modes"]["one"] and r["modes"]["both"] > 8) >= trials // 3  # both modes ran
    errors = sum(1 for r in runs if r["winner"] != 0)
    assert binomtest(errors, trials, delta, alternative="greater").pvalue > 0.01, errors
