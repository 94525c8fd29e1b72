"""Marginal costs in the policies: ``Policy.set_costs``, the marginal cost rule (algorithms/reuse_costs.py)
and the store keys (service/campaigns/store_keys.py)."""

from __future__ import annotations

import random

import numpy as np
import pytest

from algorithms import ALGORITHMS, make_policy, policy_from_state, reuse_costs
from algorithms.instance import SYNTHETIC_PREFERENCE
from algorithms.policies import PolicyError
from service.campaigns import store_keys

COSTS = [4.0, 2.0, 1.0, 1.0, 3.0][: len(SYNTHETIC_PREFERENCE)]


def _drive(policy, steps: int, seed: int, on_step=None) -> list[tuple[int, int]]:
    rng = random.Random(seed)
    P = np.asarray(SYNTHETIC_PREFERENCE)
    pairs = []
    for t in range(steps):
        if on_step is not None:
            on_step(policy, t)
        i, j = policy.next_pair(pending=[])
        pairs.append((i, j))
        policy.record(i, j, 1.0 if rng.random() < P[i, j] else 0.0)
        if policy.should_stop():
            break
    return pairs


@pytest.mark.parametrize("algorithm", ALGORITHMS)
def test_unchanged_costs_change_nothing(algorithm):
    costs = [float(x) for x in range(1, len(SYNTHETIC_PREFERENCE) + 1)]
    a = make_policy(algorithm, costs=costs, delta=0.05, judge_cost=0.5)
    b = make_policy(algorithm, costs=costs, delta=0.05, judge_cost=0.5)
    pa = _drive(a, 400, 1)
    changed = []
    pb = _drive(b, 400, 1, on_step=lambda p, t: changed.append(p.set_costs(list(costs), 0.5)))
    assert pa == pb
    assert a.to_state() == b.to_state()
    assert not any(changed)


@pytest.mark.parametrize("algorithm", ALGORITHMS)
def test_new_costs_survive_the_state_round_trip_and_steer_cost_aware_policies(algorithm):
    L = len(SYNTHETIC_PREFERENCE)
    costs = [1.0] * L
    p = make_policy(algorithm, costs=costs, delta=0.05, judge_cost=0.2)
    _drive(p, 60, 2)
    cheap = [0.01] + [1.0] * (L - 1)
    assert p.set_costs(cheap, 0.002) is True
    assert p.costs.tolist() == cheap and p.judge_cost == 0.002
    q = policy_from_state(p.to_state())
    # the restored policy continues with identical decisions
    assert _drive(p, 100, 3) == _drive(q, 100, 3)
    assert p.to_state() == q.to_state()


def test_set_costs_validates():
    p = make_policy("dctas-pc", costs=[1.0, 2.0, 3.0], delta=0.05)
    with pytest.raises(PolicyError):
        p.set_costs([1.0, 2.0])
    with pytest.raises(PolicyError):
        p.set_costs([1.0, 0.0, 1.0])


def test_marginal_cost_rule():
    assert reuse_costs.missing_fraction(0, 50) == 1.0
    assert reuse_costs.missing_fraction(50, 50) == reuse_costs.COST_FLOOR
    assert reuse_costs.missing_fraction(49, 50) == pytest.approx(0.05)  # 2% missing, rounded up to a 1/20 step
    assert reuse_costs.missing_fraction(25, 50) == pytest.approx(0.5)
    out = reuse_costs.marginal_costs([4.0, 2.0, 1.0], 1.5, [50, None, 25], 300, (50, 300))
    assert out["costs"] == pytest.approx([4.0 * reuse_costs.COST_FLOOR, 2.0, 0.5])
    assert out["judge_cost"] == pytest.approx(1.5 * reuse_costs.COST_FLOOR)


def test_store_keys_follow_what_changes_the_output():
    base = {"kind": "openai", "model": "m", "base_url": "http://x/v1", "params": {"temperature": 0}}
    m = {"name": "a", "cost": 1.0, "client": dict(base, api_key_env="K1", price={"input_per_1m": 1})}
    same = {"name": "b", "cost": 9.0, "client": dict(base, api_key_env="K2", timeout_s=5)}
    hotter = {"name": "a", "cost": 1.0, "client": dict(base, params={"temperature": 1})}
    system = {"name": "a", "cost": 1.0, "client": dict(base, system="be brief")}
    assert store_keys.model_key(m) == store_keys.model_key(same)
    assert store_keys.model_key(m) != store_keys.model_key(hotter)
    assert store_keys.model_key(m) != store_keys.model_key(system)
    assert store_keys.model_key({"name": "s", "cost": 1.0, "client": {"kind": "simulated"}}) is None
    judge = {"kind": "llm", "client": base, "cost": 0.1, "both_orders": True}
    assert store_keys.judge_key(judge) == store_keys.judge_key(dict(judge, cost=7.0))
    assert store_keys.judge_key(judge) != store_keys.judge_key(dict(judge, both_orders=False))
    assert store_keys.judge_key({"kind": "human"}) is None
    # both orders: one stored verdict per unordered pair, mirrored for the other presentation
    f1, s1, sw1, o1 = store_keys.verdict_order(judge, "x", "y")
    f2, s2, sw2, o2 = store_keys.verdict_order(judge, "y", "x")
    assert (f1, s1, o1) == (f2, s2, o2) == (f1, s1, "both") and sw1 != sw2
    one = dict(judge, both_orders=False)
    assert store_keys.verdict_order(one, "y", "x") == ("y", "x", False, "ab")
    assert store_keys.mirror("a") == "b" and store_keys.mirror("b") == "a" and store_keys.mirror("tie") == "tie"
