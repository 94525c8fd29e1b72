"""dctas-pc's incremental kernels against their from-scratch definitions, and the certificate options.

The fast paths (tabulated mixture with early bounds, per-arm certificate counts) must
make exactly the decisions of the definitions; the options (``threshold``, ``stick``)
must give the same decisions in the step-wise policy and the simulator.
"""

import json
import math

import numpy as np
import pytest
from scipy.special import zeta

from algorithms import Instance, PolicyError, make_policy, policy_from_state, synthetic_instance
from algorithms import _kernels as kern
from algorithms.certificates import certificate_test
from algorithms.simulator import simulate, trace_trial
from algorithms.thresholds import calibration_C

CYCLE = Instance(
    ["w", "x", "y", "z"],
    [2.0, 1.0, 0.5, 3.0],
    [[0.5, 0.7, 0.7, 0.72], [0.3, 0.5, 0.7, 0.3], [0.3, 0.3, 0.5, 0.7], [0.28, 0.7, 0.3, 0.5]],
)


def test_tabulated_mixture_test_decides_exactly_as_the_definition():
    rng = np.random.default_rng(0)
    checked_near = 0
    for _ in range(4000):
        n = float(rng.integers(1, 20000))
        x = float(rng.integers(0, int(n) + 1)) / 2  # scores with half points, below n/2
        exact = kern.pc_log_mixture(n, x)
        # thresholds around the value itself (the hardest case) and spread over the range
        for thr in (exact, np.nextafter(exact, np.inf), np.nextafter(exact, -np.inf), exact + 1e-10, exact - 3.0):
            assert kern.pc_mixture_certifies(n, x, thr) == (exact >= thr)
            checked_near += 1
        thr = float(rng.uniform(0.0, 40.0))
        assert kern.pc_mixture_certifies(n, x, thr) == (kern.pc_log_mixture(n, x) >= thr)
    assert checked_near == 20000


def _verdict_from_beat(B):
    """The rule on the certificate graph, written from scratch."""
    L = B.shape[0]
    if all(B[:, m].any() for m in range(L)):
        return -2
    for a in range(L):
        if all(B[a, n] for n in range(L) if n != a):
            return a
    return -1


def test_certificate_counts_and_verdict_follow_the_certificate_graph():
    rng = np.random.default_rng(1)
    for _ in range(300):
        L = int(rng.integers(2, 7))
        B = np.zeros((L, L), dtype=np.bool_)
        CB = np.zeros(L, dtype=np.int64)
        CW = np.zeros(L, dtype=np.int64)
        for _ in range(int(rng.integers(0, L * L))):
            w, lo = rng.choice(L, 2, replace=False)
            if not B[w, lo]:
                kern.pc_set(int(w), int(lo), B, CB, CW)
            assert kern.pc_verdict(CB, CW) == _verdict_from_beat(B)
        RB, RW = np.zeros(L, dtype=np.int64), np.zeros(L, dtype=np.int64)
        kern.pc_recount(B, RB, RW)
        assert (RB == B.sum(axis=0)).all() and (RW == B.sum(axis=1)).all()
        assert (RB == CB).all() and (RW == CW).all()


def test_kk_and_stitched_tests_are_their_formulas():
    L, delta = 4, 0.01
    d1 = delta / L  # each certificate's level: the union over the L models that could be named
    assert certificate_test("kk", delta, L, "delta/(L-1)")[1] == pytest.approx(calibration_C(math.log((L - 1) / delta)))
    rule, c0 = certificate_test("kk", delta, L)
    assert rule == kern.PC_KK and c0 == pytest.approx(calibration_C(math.log(1 / d1)))
    for n, x in ((400.0, 150.0), (1000.0, 440.0), (50.0, 10.0)):
        p = x / n
        glr = n * (p * math.log(2 * p) + (1 - p) * math.log(2 * (1 - p)))
        assert kern.pc_certifies(n, x, rule, c0) == (glr > 3 * math.log(1 + math.log(n)) + c0)
    rule, c0 = certificate_test("stitched", delta, L)
    eta, s, m = 2.0, 1.4, 4.0
    assert c0 == pytest.approx(math.log(zeta(s) / (d1 * math.log(eta) ** s)))
    k1 = (eta**0.25 + eta**-0.25) / math.sqrt(2)
    for n, x in ((400.0, 150.0), (1000.0, 440.0), (8.0, 0.0), (3000.0, 1440.0)):
        v = max(n / 4, m)
        bound = k1 * math.sqrt(v * (s * math.log(math.log(eta * v / m)) + c0))
        assert kern.pc_certifies(n, x, rule, c0) == (n / 2 - x >= bound)
    # the three tests agree on overwhelming and on no evidence
    for name in ("mixture", "kk", "stitched"):
        rule, c0 = certificate_test(name, delta, L)
        assert kern.pc_certifies(2000.0, 700.0, rule, c0) and not kern.pc_certifies(2000.0, 990.0, rule, c0)


@pytest.mark.parametrize("params", [{"threshold": "kk"}, {"threshold": "stitched"}, {"stick": 2.0}])
@pytest.mark.parametrize("instance", [synthetic_instance(4), CYCLE], ids=["synthetic4", "cycle"])
def test_options_make_the_same_decisions_in_the_policy_and_the_simulator(params, instance):
    for seed in (11, 12):
        tr = trace_trial(instance, "dctas-pc", 0.1, seed, **params)
        assert tr["stopped"]
        pol = make_policy("dctas-pc", instance.costs, 0.1, **params)
        for n, (pair, score) in enumerate(zip(tr["pairs"], tr["scores"])):
            assert not pol.stopped
            if n == len(tr["pairs"]) // 2:  # a JSON round trip mid-run changes nothing
                pol = policy_from_state(json.loads(json.dumps(pol.to_state())))
            assert pol.next_pair() == pair
            pol.record(*pair, score)
        assert pol.stopped and pol.recommendation() == tr["recommended"]


def test_the_options_change_the_run_and_defaults_keep_the_state_as_before():
    inst = synthetic_instance(4)
    base = simulate(inst, "dctas-pc", 0.05, 20, seed=3)
    same = simulate(inst, "dctas-pc", 0.05, 20, seed=3, threshold="betting", stick=0.0)
    assert np.array_equal(base.pair_pulls, same.pair_pulls)
    mixture = simulate(inst, "dctas-pc", 0.05, 20, seed=3, threshold="mixture")
    for params in ({"threshold": "kk"}, {"threshold": "stitched"}, {"stick": 2.0}, {"threshold": "mixture"}):
        other = simulate(inst, "dctas-pc", 0.05, 20, seed=3, **params)
        assert not np.array_equal(base.pair_pulls, other.pair_pulls), params
        if params != {"threshold": "mixture"}:
            assert not np.array_equal(mixture.pair_pulls, other.pair_pulls), params
    # the state names the default test (betting); a mixture-test state names none, as before
    state = make_policy("dctas-pc", [1, 2, 3], 0.1).to_state()
    assert state["params"] == {"threshold": "betting", "level": "product"} and "lead" not in state
    old = make_policy("dctas-pc", [1, 2, 3], 0.1, threshold="mixture", level="delta/(L-1)")
    assert old.to_state()["params"] == {}
    kk = make_policy("dctas-pc", [1, 2, 3], 0.1, threshold="kk").to_state()["params"]
    assert kk == {"threshold": "kk", "level": "delta/L"}


@pytest.mark.parametrize(
    "params, needle",
    [({"threshold": "bonferroni"}, "threshold"), ({"stick": -1}, "stick"), ({"stick": "x"}, "stick")],
)
def test_bad_options_are_refused(params, needle):
    with pytest.raises(PolicyError, match=needle):
        make_policy("dctas-pc", [1, 2, 3], 0.1, **params)
    with pytest.raises(PolicyError, match=needle):
        simulate(synthetic_instance(4), "dctas-pc", 0.1, 2, **params)
    with pytest.raises(PolicyError, match="unknown parameter"):
        simulate(synthetic_instance(4), "dctas", 0.1, 2, threshold="kk")


def test_a_sticky_state_with_a_bad_leader_is_refused():
    state = make_policy("dctas-pc", [1, 2, 3], 0.1, stick=1.0).to_state()
    assert state["lead"] == -1
    for bad in (7, "1", True):
        with pytest.raises(PolicyError, match="lead"):
            policy_from_state({**state, "lead": bad})
