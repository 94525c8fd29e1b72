"""Every verdict of dctas-pc is wrong with probability at most delta (docs/algorithms.md, dctas-pc
*Validity*): each certificate at level delta / L, so the union over the L models that could be
named when no Condorcet winner exists stays within delta.

Seeded simulations (fixed outcomes) with the compiled simulator. Each check counts the trials
that ended with a wrong verdict (a trial that reaches its duel cap ends with none) and fails
when the count exceeds the 99.9% quantile of Binomial(trials, delta): a rule whose error rate
is above delta would be caught (the first test shows it for the level delta / (L - 1)).
"""

from __future__ import annotations

import numpy as np
import pytest
from scipy.stats import binom

from algorithms import Instance, make_policy, policy_from_state
from algorithms.policies import state_params
from algorithms.simulator import simulate

DELTA = 0.1


def _equal(L: int, tie: float = 0.0) -> Instance:
    P = [[0.5] * L for _ in range(L)]
    ties = None if tie == 0.0 else [[0.0 if i == j else tie for j in range(L)] for i in range(L)]
    return Instance([f"m{i}" for i in range(L)], [1.0] * L, P, require_condorcet=False, ties=ties)


def _wrong(r, cw: int | None) -> int:
    """Trials that ended with a wrong verdict: a name when there is no Condorcet winner, else
    another name or "no Condorcet winner"."""
    if cw is None:
        return int((r.stopped & (r.recommended >= 0)).sum())
    return int((r.stopped & (r.recommended != cw)).sum())


def _limit(n: int) -> float:
    return float(binom.ppf(1 - 1e-3, n, DELTA))


def test_two_equal_models_name_a_winner_within_delta_and_the_former_level_did_not():
    n, cap = 600, 2_000
    new = simulate(_equal(2), "dctas-pc", DELTA, n, seed=11, max_steps=cap)
    old = simulate(_equal(2), "dctas-pc", DELTA, n, seed=11, max_steps=cap, level="delta/(L-1)")
    assert _wrong(new, None) <= _limit(n)
    # the check has the power to refute: at delta / (L - 1) the union over both names is 2 delta
    assert _wrong(old, None) > _limit(n)
    assert not new.stopped.all()  # equal models: most trials end at the cap, with no verdict


@pytest.mark.parametrize("L, tie", [(3, 0.0), (4, 0.0), (2, 0.6)])
def test_equal_models_and_heavy_ties_name_a_winner_within_delta(L, tie):
    n, cap = 400, 1_500
    r = simulate(_equal(L, tie), "dctas-pc", DELTA, n, seed=12 + L, max_steps=cap)
    assert _wrong(r, None) <= _limit(n)


# two equal leaders (p = 1/2 exactly) that both beat a third model: no Condorcet winner, and each
# leader's certificate against the third comes fast, so only the false one between them is missing
EQUAL_LEADERS = Instance(
    ["a", "b", "c"], [1.0, 1.0, 1.0], [[0.5, 0.5, 0.7], [0.5, 0.5, 0.7], [0.3, 0.3, 0.5]], require_condorcet=False
)
# rock-paper-scissors at 0.6 plus a fourth model losing to all three: no Condorcet winner
CYCLE = Instance(
    ["r", "p", "s", "d"],
    [1.0, 1.0, 1.0, 1.0],
    [[0.5, 0.4, 0.6, 0.7], [0.6, 0.5, 0.4, 0.7], [0.4, 0.6, 0.5, 0.7], [0.3, 0.3, 0.3, 0.5]],
    require_condorcet=False,
)
# a winner over a 3-cycle (benchmarks/bench_certificates.py INTRANSITIVE)
INTRANSITIVE = Instance(
    ["w", "x", "y", "z"],
    [2.0, 1.0, 0.5, 3.0],
    [[0.5, 0.7, 0.7, 0.72], [0.3, 0.5, 0.7, 0.3], [0.3, 0.3, 0.5, 0.7], [0.28, 0.7, 0.3, 0.5]],
)
# a near-tie: the winner beats the runner-up at 0.53
NEAR_TIE = Instance(["a", "b", "c"], [1.0, 1.0, 1.0], [[0.5, 0.53, 0.6], [0.47, 0.5, 0.6], [0.4, 0.4, 0.5]])


@pytest.mark.parametrize(
    "name, inst, n, cap",
    [
        ("equal leaders", EQUAL_LEADERS, 400, 3_000),
        ("cycle", CYCLE, 300, 20_000),
        ("intransitive with a winner", INTRANSITIVE, 300, 200_000),
        ("near-tie", NEAR_TIE, 300, 200_000),
    ],
)
def test_error_rate_within_delta_with_and_without_a_winner(name, inst, n, cap):
    r = simulate(inst, "dctas-pc", DELTA, n, seed=7, max_steps=cap)
    cw = inst.condorcet_winner
    assert _wrong(r, cw) <= _limit(n), name
    if cw is not None:
        assert r.stopped.all(), name  # with a winner every trial ends with a verdict
        assert (r.recommended == cw).sum() >= n - _limit(n)
    elif name == "cycle":
        assert r.no_condorcet_winner.mean() > 0.9  # the right verdict is reached


def test_the_level_is_in_the_state_and_a_state_without_one_keeps_delta_over_l_minus_1():
    new = make_policy("dctas-pc", [1.0, 1.0, 1.0], 0.1, level="delta/L")
    assert new.level == "delta/L" and new.to_state()["params"]["level"] == "delta/L"
    assert new.certificate_log_threshold == pytest.approx(np.log(3 / 0.1))
    assert policy_from_state(new.to_state()).level == "delta/L"  # a state at delta / L stays there
    old_state = make_policy("dctas-pc", [1.0, 1.0, 1.0], 0.1, level="delta/(L-1)").to_state()
    assert "level" not in old_state["params"]  # the format of every state stored before
    assert state_params(old_state)["level"] == "delta/(L-1)"
    old = policy_from_state(old_state)
    assert old.level == "delta/(L-1)" and old.certificate_log_threshold == pytest.approx(np.log(2 / 0.1))
    wor = make_policy("dctas-pc", [1.0, 1.0, 1.0], 0.1, population=30)
    assert wor.to_state()["params"] == {"population": 30, "level": "delta/L"}
    assert policy_from_state(wor.to_state()).certificate_log_threshold == pytest.approx(np.log(3 / 0.1))
    with pytest.raises(ValueError, match="unknown certificate level"):
        make_policy("dctas-pc", [1.0, 1.0], 0.1, level="delta")


def test_a_stored_state_at_the_former_level_continues_with_its_own_decisions():
    """Replay: the same outcomes give the same certificates as the policy that wrote the state."""
    rng = np.random.default_rng(5)
    P = np.array([[0.5, 0.5], [0.5, 0.5]])
    ref = make_policy("dctas-pc", [1.0, 1.0], 0.3, level="delta/(L-1)")
    restored = None
    for t in range(4_000):
        i, j = ref.next_pair()
        s = float(rng.random() < P[i, j])
        ref.record(i, j, s)
        if restored is not None:
            assert restored.next_pair() == (i, j)
            restored.record(i, j, s)
        if t == 20:
            restored = policy_from_state(ref.to_state())
        if ref.stopped:
            break
    assert restored is not None and restored.to_state() == ref.to_state()


# the hybrid judge (LLM judge on every duel, humans on a fraction) certifies by the same union
@pytest.mark.parametrize("rate, level", [(0.2, "delta/L"), ("active", "delta/L"), (0.2, "delta/(L-1)")])
def test_hybrid_two_equal_models_name_a_winner_within_delta_only_at_level_delta_over_l(rate, level):
    from algorithms.hybrid_sim import calibrated_judge, run_hybrid

    n = 600
    r = run_hybrid(_equal(2), calibrated_judge(), DELTA, n, seed=11, human_rate=rate, max_duels=3_000, level=level)
    if level == "delta/L":
        assert r["errors"] <= _limit(n), r["errors"]
        assert r["unfinished"] > n / 2  # equal models: most trials end at the cap, with no verdict
    else:  # the check has the power to refute the former level: the union over both names is 2 delta
        assert r["errors"] > _limit(n), r["errors"]


def test_hybrid_level_is_in_the_state_and_a_state_without_one_keeps_delta_over_l_minus_1():
    from algorithms.hybrid import HybridPolicy, hybrid_state_params
    from algorithms.hybrid import policy_from_state as hybrid_from_state

    new = HybridPolicy([1.0, 1.0, 1.0], 0.1)
    assert new.level == "delta/L" and new.to_state()["params"]["level"] == "delta/L"
    assert new._log_thr == pytest.approx(np.log(3 / 0.1))
    old_state = HybridPolicy([1.0, 1.0, 1.0], 0.1, level="delta/(L-1)").to_state()
    assert "level" not in old_state["params"]  # the format of every hybrid state stored before
    assert hybrid_state_params(old_state)["level"] == "delta/(L-1)"
    old = hybrid_from_state(old_state)
    assert old.level == "delta/(L-1)" and old._log_thr == pytest.approx(np.log(2 / 0.1))
    assert hybrid_from_state(new.to_state()).level == "delta/L"
    with pytest.raises(ValueError, match="unknown certificate level"):
        HybridPolicy([1.0, 1.0], 0.1, level="delta")
