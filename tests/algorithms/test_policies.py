"""The step-wise policy interface: decisions, state round trips, in-flight duels, input validation."""

import json

import numpy as np
import pytest

from algorithms import ALGORITHMS, PolicyError, make_policy, policy_from_state, synthetic_instance
from algorithms.oracle import solve_oracle


def _drive(policy, P, rng, steps):
    for _ in range(steps):
        if policy.stopped:
            break
        i, j = policy.next_pair()
        policy.record(i, j, float(rng.random() < P[i, j]))


@pytest.mark.parametrize("algorithm", ALGORITHMS)
def test_state_round_trips_through_json_and_continues_identically(algorithm):
    P = synthetic_instance(4).preference
    a = make_policy(algorithm, [4, 1, 1], 0.1)
    _drive(a, P, np.random.default_rng(1), 137)
    state = json.loads(json.dumps(a.to_state()))
    b = policy_from_state(state)
    assert b.to_state() == a.to_state()
    ra, rb = np.random.default_rng(9), np.random.default_rng(9)
    for _ in range(300):
        if a.stopped:
            break
        pa, pb = a.next_pair(), b.next_pair()
        assert pa == pb
        oa, ob = float(ra.random() < P[pa]), float(rb.random() < P[pb])
        a.record(*pa, oa)
        b.record(*pb, ob)
    assert a.to_state() == b.to_state()


@pytest.mark.parametrize("algorithm", ALGORITHMS)
def test_each_policy_certifies_the_winner_on_an_easy_instance(algorithm):
    P = np.array([[0.5, 0.9, 0.9], [0.1, 0.5, 0.8], [0.1, 0.2, 0.5]])
    pol = make_policy(algorithm, [2, 1, 1], 0.05)
    _drive(pol, P, np.random.default_rng(3), 200_000)
    assert pol.stopped
    assert pol.recommendation() == 0
    s = pol.summary()
    assert s["winner"] == 0 and s["stop_t"] == pol.t
    assert np.array(s["N"]).sum() == 2 * pol.t


def test_initialisation_pulls_every_pair_once():
    pol = make_policy("dctas", [1, 2, 3, 4], 0.1)
    seen = []
    for _ in range(6):
        i, j = pol.next_pair()
        seen.append((i, j))
        pol.record(i, j, 1.0)
    assert sorted(seen) == pol.pairs()


def test_pending_duels_count_as_pulled():
    pol = make_policy("dctas", [1, 1, 1], 0.1)
    first = pol.next_pair()
    second = pol.next_pair(pending=[first])
    third = pol.next_pair(pending=[first, second])
    assert len({first, second, third}) == 3
    # pending pairs can be given in either order
    assert pol.next_pair(pending=[(1, 0)]) != (0, 1)


def test_next_pair_does_not_mutate_state():
    pol = make_policy("dctas", [4, 1, 1], 0.1)
    _drive(pol, synthetic_instance(4).preference, np.random.default_rng(0), 50)
    before = pol.to_state()
    for _ in range(5):
        pol.next_pair(pending=[(0, 1), (1, 2)])
    assert pol.to_state() == before


def test_tas_ignores_costs_and_dctas_avoids_expensive_pair():
    P = synthetic_instance(19).preference
    d = make_policy("dctas", [19, 1, 1], 1e-6)
    t = make_policy("tas", [19, 1, 1], 1e-6)
    _drive(d, P, np.random.default_rng(0), 3000)
    _drive(t, P, np.random.default_rng(0), 3000)
    nd, nt = np.array(d.summary()["N"]), np.array(t.summary()["N"])
    assert nd[1, 2] > nd[0, 2]  # DCTAS prefers (2,3) over the costly (1,3)
    assert nt[0, 2] > nt[1, 2]  # TAS does the opposite
    np.testing.assert_allclose(d.target_allocation(), solve_oracle(synthetic_instance(19)).pull_fractions, atol=0.15)


def test_record_after_stop_keeps_the_certificate():
    P = np.array([[0.5, 0.95], [0.05, 0.5]])
    pol = make_policy("dctas", [1, 1], 0.1)
    _drive(pol, P, np.random.default_rng(0), 10_000)
    assert pol.stopped and pol.winner == 0
    t = pol.stop_t
    for _ in range(50):
        pol.record(0, 1, 0.0)
    assert pol.stopped and pol.winner == 0 and pol.stop_t == t


def test_half_scores_and_reverse_order():
    pol = make_policy("crr", [1, 1], 0.1)
    pol.record(1, 0, 1.0)  # arm 1 beats arm 0
    pol.record(0, 1, 0.5)  # a tie counted as half
    W = pol.summary()["W"]
    assert W[1][0] == 1.5 and W[0][1] == 0.5


@pytest.mark.parametrize(
    "call, match",
    [
        (lambda p: p.record(0, 0, 1.0), "two different arms"),
        (lambda p: p.record(0, 5, 1.0), "arm index"),
        (lambda p: p.record(0, 1, 1.5), r"\[0, 1\]"),
        (lambda p: p.record(0, 1, "x"), "score"),
        (lambda p: p.next_pair(pending=[(0, 1, 2)]), "pair of arm indices"),
    ],
)
def test_bad_input_raises_policy_error(call, match):
    with pytest.raises(PolicyError, match=match):
        call(make_policy("dctas", [1, 1, 1], 0.1))


def test_make_policy_validation():
    with pytest.raises(PolicyError, match="unknown algorithm"):
        make_policy("ucb", [1, 1], 0.1)
    with pytest.raises(PolicyError, match="delta"):
        make_policy("dctas", [1, 1], 1.5)
    with pytest.raises(PolicyError, match="costs"):
        make_policy("dctas", [1, -1], 0.1)
    with pytest.raises(PolicyError, match="at least 2"):
        make_policy("dctas", [1], 0.1)


def test_policy_from_state_rejects_malformed_state():
    good = make_policy("dctas", [1, 1, 1], 0.1).to_state()
    with pytest.raises(PolicyError):
        policy_from_state({**good, "N": [1, 2]})
    with pytest.raises(PolicyError):
        policy_from_state({**good, "version": 99})
    with pytest.raises(PolicyError, match="inconsistent"):
        policy_from_state({**good, "N": [1, 1, 1], "W": [2, 0, 0]})
    with pytest.raises(PolicyError):
        policy_from_state("not a dict")


def test_dpca_phases_progress_to_verification():
    P = np.array([[0.5, 0.8, 0.85], [0.2, 0.5, 0.7], [0.15, 0.3, 0.5]])
    pol = make_policy("dpca", [1, 1, 1], 0.05)
    rng = np.random.default_rng(5)
    phases = set()
    while not pol.stopped:
        phases.add(pol.phase)
        i, j = pol.next_pair()
        pol.record(i, j, float(rng.random() < P[i, j]))
    assert phases == {"explore", "verify"}
    assert pol.winner == 0
