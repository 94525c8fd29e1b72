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
