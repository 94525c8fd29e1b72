"""dctas-pc: pairwise certificates, the "no Condorcet winner" verdict, and the paper's algorithms on a cycle."""

import json
import math

import numpy as np
import pytest
from scipy.special import logsumexp
from scipy.stats import binom

from algorithms import Instance, make_policy, policy_from_state, synthetic_instance
from algorithms import _kernels as kern
from algorithms.policies import NO_CONDORCET_WINNER
from algorithms.simulator import simulate

HARD = Instance(
    ["a", "b", "c", "d"],
    [1.0, 2.0, 1.0, 3.0],
    [[0.5, 0.52, 0.55, 0.53], [0.48, 0.5, 0.54, 0.52], [0.45, 0.46, 0.5, 0.55], [0.47, 0.48, 0.45, 0.5]],
)
INTRANSITIVE = Instance(
    ["w", "x", "y", "z"],
    [2.0, 1.0, 0.5, 3.0],
    [[0.5, 0.7, 0.7, 0.72], [0.3, 0.5, 0.7, 0.3], [0.3, 0.3, 0.5, 0.7], [0.28, 0.7, 0.3, 0.5]],
)
# rock-paper-scissors at 0.6 plus a fourth arm that loses to all three: no Condorcet winner
RPS4 = Instance(
    ["r", "p", "s", "d"],
    [1.0, 1.0, 1.0, 1.0],
    [[0.5, 0.6, 0.4, 0.6], [0.4, 0.5, 0.6, 0.6], [0.6, 0.4, 0.5, 0.6], [0.4, 0.4, 0.4, 0.5]],
    require_condorcet=False,
)


def _max_errors(delta, n, level=1e-3):
    """Largest count consistent with a rate <= delta (one-sided binomial test at `level`)."""
    return int(binom.ppf(1 - level, n, delta))


@pytest.mark.parametrize(
    "instance",
    [HARD, INTRANSITIVE, pytest.param(synthetic_instance(10), marks=pytest.mark.slow)],
    ids=["hard", "intransitive", "synthetic10"],
)
def test_dctas_pc_error_and_false_no_cw_rates_at_most_delta(instance):
    delta, n = 0.1, 1000
    res = simulate(instance, "dctas-pc", delta, n, seed=7, max_steps=5_000_000)
    assert res.stopped.all()
    assert int(res.errors.sum()) <= _max_errors(delta, n)
    assert int(res.no_condorcet_winner.sum()) <= _max_errors(delta, n)


def test_the_binomial_check_rejects_a_coin_flip():
    errors = int((np.random.default_rng(0).random(1000) < 0.2).sum())
    assert errors > _max_errors(0.1, 1000)


def test_dctas_pc_says_no_condorcet_winner_on_a_cycle():
    res = simulate(RPS4, "dctas-pc", 0.05, 400, seed=3)
    assert res.no_condorcet_winner.mean() >= 0.95
    s = res.summary()
    assert s["no_condorcet_winner_rate"] == res.no_condorcet_winner.mean()
    assert s["errors"] == int((res.recommended >= 0).sum()) and s["lower_bound"] is None
    assert s["assumes_condorcet_winner"] is False


@pytest.mark.parametrize("algorithm", ["dctas", "tas", "crr", "dpca"])
def test_paper_algorithms_certify_a_winner_on_the_cycle_today(algorithm):
    """Pins down the paper algorithms' behaviour with no Condorcet winner: they stop and name an arm."""
    res = simulate(RPS4, algorithm, 0.05, 100, seed=1, max_steps=2_000_000)
    assert res.stopped.all()
    assert (res.recommended >= 0).all() and res.errors.all()
    s = res.summary()
    assert s["assumes_condorcet_winner"] is True and "Condorcet winner" in s["note"]


def test_dctac_does_not_stop_on_the_cycle():
    res = simulate(RPS4, "dctac", 0.05, 5, seed=1, max_steps=200_000)
    assert not res.stopped.any()


def test_state_round_trip_mid_run_continues_identically():
    rng = np.random.default_rng(9)
    pol = make_policy("dctas-pc", RPS4.costs, 0.05, judge_cost=1.0)
    P = RPS4.preference
    while not pol.BEAT.any():
        i, j = pol.next_pair(pending=[(0, 1)])
        pol.record(i, j, float(rng.random() < P[i, j]))
    assert pol.BEAT.any() and not pol.stopped, "mid-run state should hold a certificate and still be running"
    twin = policy_from_state(json.loads(json.dumps(pol.to_state())))
    while not pol.stopped:
        p, q = pol.next_pair(), twin.next_pair()
        assert p == q
        s = float(rng.random() < P[p])
        pol.record(*p, s)
        twin.record(*q, s)
    assert twin.stopped and twin.verdict == pol.verdict == NO_CONDORCET_WINNER
    assert twin.recommendation() is None and twin.stop_t == pol.stop_t
    summ = pol.summary()
    assert summ["verdict"] == NO_CONDORCET_WINNER
    assert sorted(summ["certified_beaten"]) == [0, 1, 2, 3]
    assert [2, 0] in summ["certificates"] and [1, 2] in summ["certificates"] and [0, 1] in summ["certificates"]
    # the top cycle is read off the empirical matrix: r, p, s always; d too when its record against one
    # of them is a tie or better (it then reaches the cycle by a "beats or ties" edge)
    top = sorted(summ["top_cycle"])
    assert top[:3] == [0, 1, 2]
    d_reaches = any(summ["N"][3][n] > 0 and summ["W"][3][n] >= 0.5 * summ["N"][3][n] for n in range(3))
    assert (3 in top) == d_reaches


def test_certified_winner_and_summary_on_an_instance_with_one():
    inst = synthetic_instance(4)
    rng = np.random.default_rng(2)
    pol = make_policy("dctas-pc", inst.costs, 0.05)
    while not pol.stopped:
        i, j = pol.next_pair()
        pol.record(i, j, float(rng.random() < inst.preference[i, j]))
    s = pol.summary()
    assert s["verdict"] == "winner" and pol.recommendation() == inst.condorcet_winner == s["copeland_winner"]
    assert all([inst.condorcet_winner, m] in s["certificates"] for m in range(inst.L) if m != inst.condorcet_winner)


@pytest.mark.parametrize("bad", [{"BEAT": [[0, 1]]}, {"BEAT": "x"}, {"verdict": "maybe"}])
def test_malformed_state_is_rejected(bad):
    from algorithms import PolicyError

    state = make_policy("dctas-pc", [1, 2, 3], 0.1).to_state()
    state.update(bad)
    with pytest.raises(PolicyError):
        policy_from_state(state)


def test_mixture_kernel_matches_its_formula_and_is_a_supermartingale():
    rng = np.random.default_rng(4)
    gaps = 0.5 * kern.PC_RATIO ** np.arange(1, kern.PC_GRID + 1)
    q = 0.5 - gaps
    for _ in range(300):
        n = int(rng.integers(1, 5000))
        x = float(rng.integers(0, 2 * n + 1)) / 2
        ref = logsumexp(x * np.log(2 * q) + (n - x) * np.log(2 * (1 - q))) - np.log(q.size)
        assert kern.pc_log_mixture(float(n), x) == pytest.approx(ref, rel=1e-9, abs=1e-9)
    # E[M_1] under p = 1/2, with half points: exactly 1 for each component
    for p in (0.5, 0.6):
        m1 = p * math.exp(kern.pc_log_mixture(1.0, 1.0)) + (1 - p) * math.exp(kern.pc_log_mixture(1.0, 0.0))
        assert m1 <= 1.0 + 1e-12
    assert math.exp(kern.pc_log_mixture(2.0, 1.0)) <= 1.0 + 1e-12  # a tie (two halves) never adds evidence


def _reference_tournament(policy):
    """The Copeland winner and top cycle by the matrix formulas (numpy), for the summary's check."""
    L = policy.L
    N, W = policy.counts_matrix(), policy.wins_matrix()
    P = np.where(N > 0, W / np.maximum(N, 1), 0.5)
    copeland = [(int(np.sum(P[m] > 0.5)), -m) for m in range(L)]
    R = (P >= 0.5) | np.eye(L, dtype=bool)
    for q in range(L):
        R = R | (R[:, [q]] & R[[q], :])
    beats = [[w, lo] for w in range(L) for lo in range(L) if policy.BEAT[w, lo]]
    beaten = [m for m in range(L) if policy.BEAT[:, m].any()]
    return int(-max(copeland)[1]), [m for m in range(L) if R[m].all()], beats, beaten


def test_summary_tournament_fields_match_the_matrix_formulas():
    rng = np.random.default_rng(11)
    tops = set()
    for _ in range(150):
        L = int(rng.integers(2, 8))
        pol = make_policy("dctas-pc", list(rng.uniform(0.5, 3.0, L)), 0.05)
        M = rng.uniform(0, 1, (L, L))
        M = np.triu(M, 1) + np.tril(1 - np.triu(M, 1).T, -1)
        for _ in range(int(rng.integers(0, 150))):
            if pol.should_stop():
                break
            i, j = pol.next_pair()
            u = rng.random()
            pol.record(i, j, 1.0 if u < 0.9 * M[i, j] else (0.5 if u < M[i, j] else 0.0))
        s = pol.summary()
        copeland, top, beats, beaten = _reference_tournament(pol)
        assert (s["copeland_winner"], s["top_cycle"], s["certificates"], s["certified_beaten"]) == (
            copeland,
            top,
            beats,
            beaten,
        )
        tops.add(tuple(top))
    assert len(tops) > 5  # the instances exercise many different top cycles
