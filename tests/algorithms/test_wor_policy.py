"""dctas-pc without replacement (``PCPolicy(population=P)``; docs/reuse.md, "The service's policy without replacement")."""

from __future__ import annotations

import hashlib
import json
import math
import random

import numpy as np
import pytest
from numba import njit
from scipy.stats import binomtest

from algorithms import NoPairAvailable, PolicyError, make_policy, policy_from_state
from algorithms import _kernels as kern
from algorithms.instance import SYNTHETIC_PREFERENCE
from algorithms.policies import UNDECIDABLE, PCPolicy
from algorithms.prompt_level import PromptInstance, bradley_terry_prompts, log_wealth
from algorithms.prompt_policy_sim import policy_campaign, policy_trials
from algorithms.prompt_sim import CAPPED, NO_CW
from algorithms.prompt_sim import UNDECIDABLE as UNDECIDABLE_CODE
from algorithms.vocabulary import CampaignStatus


# ---------------------------------------------------------------- population=None is unchanged
def _old_path_digest() -> str:
    """Decisions, state and summary of dctas-pc (four option sets, duels in flight) as one digest."""
    P = np.asarray(SYNTHETIC_PREFERENCE)
    L = P.shape[0]
    out = []
    for seed, opts in ((0, {}), (1, {"judge_cost": 0.5}), (2, {"stick": 1.0}), (3, {"threshold": "kk"})):
        rng = random.Random(seed)
        # the mixture test, dctas-pc's default when this digest was recorded
        pol = make_policy(
            "dctas-pc",
            [float(c) for c in range(1, L + 1)],
            0.05,
            **{"threshold": "mixture", "level": "delta/(L-1)", **opts},
        )
        pending: list = []
        pairs = []
        for _ in range(3000):
            if len(pending) < 3 and not pol.stopped:
                pending.append(pol.next_pair(pending=pending))
                pairs.append(pending[-1])
            if pending and (rng.random() < 0.6 or len(pending) >= 3 or pol.stopped):
                i, j = pending.pop(rng.randrange(len(pending)))
                pol.record(i, j, rng.choice([0.0, 0.5, 1.0]) if rng.random() < 0.1 else float(rng.random() < P[i, j]))
            if pol.stopped and not pending:
                break
        out.append({"pairs": pairs, "state": pol.to_state(), "summary": pol.summary()})
    return hashlib.sha256(json.dumps(out, sort_keys=True).encode()).hexdigest()


def test_population_none_keeps_decisions_state_and_summary_bit_for_bit():
    # recorded with the code of commit 16a578e (before population existed), same script
    assert _old_path_digest() == "d9f9bb9a22c1267bfdcc5d254e33628831e1c1b12d4ccb3b77b29eebcd2e768c"
    pol = make_policy("dctas-pc", [1.0, 2.0, 3.0], 0.05, population=None)
    state = pol.to_state()
    assert "wor" not in state and "population" not in state["params"] and "population" not in pol.summary()


@njit(cache=True)
def _pc_choose_before(NEFF, t, a, G, AMAX, c, PI, PJ, PK, BEAT, CB, alpha):
    """algorithms._kernels.pc_choose as it was at commit 16a578e (frozen copy)."""
    K = NEFF.shape[0]
    L = AMAX.shape[0]
    best = -1
    low = 1e300
    fe = math.sqrt(t) - 0.5 * K
    for k in range(K):
        nk = NEFF[k]
        if nk >= low or (nk != 0.0 and nk >= fe):
            continue
        i = PI[k]
        j = PJ[k]
        if (CB[i] == 0 or CB[j] == 0) or (a >= 0 and ((i == a and not BEAT[a, j]) or (j == a and not BEAT[a, i]))):
            low = nk
            best = k
    if best >= 0:
        return best
    for k in range(K):
        alpha[k] = 0.0
    total = 0.0
    for m in range(L):
        if m == a:
            continue
        if a < 0 or BEAT[a, m]:
            continue
        k = PK[m, a]
        if G[m, a] > 0.0:
            w = 1.0 / G[m, a] / (c[m] + c[a])
        else:
            w = 1.0 / kern.kl_half(0.5 - 0.5 / math.sqrt(NEFF[k] + 1.0))
        alpha[k] += w
        total += w
    if a >= 0 and AMAX[a] > 0.0:
        nb = 0
        for n in range(L):
            if n != a and G[a, n] > G[a, nb] or nb == a:
                nb = n
        k = PK[a, nb]
        w = 1.0 / AMAX[a] / (c[a] + c[nb])
        alpha[k] += w
        total += w
    if total <= 0.0:
        best = 0
        for k in range(K):
            if NEFF[k] < NEFF[best]:
                best = k
        return best
    best = -1
    deficit = -1e300
    for k in range(K):
        if alpha[k] > 0.0:
            d = alpha[k] / total * t - NEFF[k]
            if d > deficit:
                deficit = d
                best = k
    return best


def test_pc_choose_kernel_is_the_frozen_one_on_random_states():
    from algorithms.policies import pair_index_arrays

    rng = np.random.default_rng(3)
    for _ in range(3000):
        L = int(rng.integers(2, 7))
        PI, PJ, PK = pair_index_arrays(L)
        K = PI.size
        N = rng.integers(0, 40, K).astype(float) * (rng.random(K) < 0.9)
        W = np.floor(rng.random(K) * (2 * N + 1)) / 2
        c = rng.choice([0.01, 0.5, 1.0, 3.0], L)
        T, G, S, AMAX = np.zeros((L, L)), np.zeros((L, L)), np.zeros(L), np.zeros(L)
        kern.rebuild(N, W, PI, PJ, c, T, G, S, AMAX)
        BEAT = rng.random((L, L)) < 0.15
        np.fill_diagonal(BEAT, False)
        CB, CW = np.zeros(L, np.int64), np.zeros(L, np.int64)
        kern.pc_recount(BEAT, CB, CW)
        a = int(kern.pc_leader(CB, AMAX))
        args = (N, float(N.sum()), a, G, AMAX, c, PI, PJ, PK, BEAT, CB)
        a1, a2, a3 = np.zeros(K), np.zeros(K), np.zeros(K)
        expected = _pc_choose_before(*args, a2)
        assert kern.pc_choose(*args, a1, 0.0, 0, 1.0) == expected
        assert np.array_equal(a1, a2)
        # the masked kernel with every pair allowed and CK[k] = c_i + c_j decides the same
        CK = c[PI] + c[PJ]
        OK = np.ones(K, dtype=np.bool_)
        assert kern.pc_choose_masked(N, float(N.sum()), a, G, AMAX, CK, PI, PJ, PK, BEAT, CB, a3, OK) == expected


# ---------------------------------------------------------------- helpers
def _drive(pol: PCPolicy, inst: PromptInstance, perm, rng: random.Random | None = None, max_pending: int = 0):
    """Run ``pol`` on ``inst`` with the shared permutation; up to ``max_pending`` duels in flight, finished in random order."""
    pending: list = []
    seen: list = []
    while not (pol.stopped and not pending):
        if not pol.stopped and len(pending) <= max_pending:
            try:
                pr = pol.next_pair(pending=pending)
            except NoPairAvailable:
                assert pending, "NoPairAvailable with nothing in flight"
                pr = None
            if pr is not None:
                k = pol.pair_index(*pr)
                n = int(pol.N[k]) + sum(1 for q in pending if pol.pair_index(*q) == k)
                assert n < inst.n_prompts, "an exhausted pair was returned"
                pending.append(pr)
                seen.append(pr)
                continue
        idx = 0 if rng is None else rng.randrange(len(pending))
        i, j = pending.pop(idx)
        k = pol.pair_index(i, j)
        pol.record(i, j, inst.halves[i, j, perm[int(pol.N[k])]] / 2.0)
    return seen


def _inst4(P=30, seed=1):
    return bradley_terry_prompts([0.3, 0.15, 0.0, -0.1], P, costs=[4, 2, 1, 1], judge_cost=1.5, tie_prob=0.1, seed=seed)


# ---------------------------------------------------------------- state round trip
@pytest.mark.parametrize("seed", range(6))
def test_state_round_trip_mid_campaign_continues_identically(seed):
    inst = _inst4(P=20, seed=seed)
    P = inst.n_prompts
    perm = np.random.default_rng(seed).permutation(P)
    rng = random.Random(seed)
    pol = make_policy("dctas-pc", inst.costs, 0.1, judge_cost=3.0, population=P)
    stop_at = rng.randrange(5, 40)
    pending: list = []
    for _ in range(stop_at):
        if pol.stopped:
            break
        try:
            pending.append(pol.next_pair(pending=pending))
        except NoPairAvailable:
            pass
        if pending and rng.random() < 0.7:
            i, j = pending.pop(rng.randrange(len(pending)))
            pol.record(i, j, inst.halves[i, j, perm[int(pol.N[pol.pair_index(i, j)])]] / 2.0)
    state = json.loads(json.dumps(pol.to_state()))
    assert state["params"]["population"] == P and set(state["wor"]) == {"log_wealth", "sums", "sumsq"}
    twin = policy_from_state(state)
    assert twin.to_state() == pol.to_state()
    if rng.random() < 0.5:
        pol.set_costs([1.0, 1.0, 2.0, 2.0], 0.5)
        twin.set_costs([1.0, 1.0, 2.0, 2.0], 0.5)
    while not pol.stopped:
        try:
            a = pol.next_pair(pending=pending)
        except NoPairAvailable:
            with pytest.raises(NoPairAvailable):
                twin.next_pair(pending=pending)
            a = None
        if a is not None:
            assert twin.next_pair(pending=pending) == a
            pending.append(a)
        if pending and (a is None or rng.random() < 0.6):
            i, j = pending.pop(0)
            s = inst.halves[i, j, perm[int(pol.N[pol.pair_index(i, j)])]] / 2.0
            pol.record(i, j, s)
            twin.record(i, j, s)
        assert twin.to_state() == pol.to_state()
    assert twin.summary() == pol.summary()


# ---------------------------------------------------------------- pair choice
@pytest.mark.parametrize("seed", range(8))
def test_an_exhausted_or_useless_pair_is_never_returned(seed):
    inst = bradley_terry_prompts([0.2, 0.2, 0.1, 0.0], 4, costs=[1, 1, 1, 1], judge_cost=0.5, tie_prob=0.3, seed=seed)
    perm = np.random.default_rng(seed).permutation(4)
    pol = make_policy("dctas-pc", inst.costs, 0.1, judge_cost=1.0, population=4)
    orig = pol.next_pair

    def checked(pending=()):
        useful = set(pol.useful_pairs())
        pr = orig(pending)
        assert pr in useful
        return pr

    pol.next_pair = checked  # type: ignore[method-assign]
    _drive(pol, inst, perm, random.Random(seed), max_pending=3)
    assert pol.stopped and np.all(pol.N <= 4)


def test_no_pair_available_when_every_useful_pair_is_pending_exhausted():
    pol = make_policy("dctas-pc", [1.0, 2.0], 0.1, population=2)
    pol.next_pair(pending=[(0, 1)])
    with pytest.raises(NoPairAvailable):
        pol.next_pair(pending=[(0, 1), (1, 0)])
    pol.record(0, 1, 0.5)
    assert not pol.stopped  # one pending duel can still decide
    with pytest.raises(NoPairAvailable):
        pol.next_pair(pending=[(0, 1)])
    assert isinstance(NoPairAvailable("x"), PolicyError)
    # three models: (0, 1) is exhausted in flight, the others still useful
    pol3 = make_policy("dctas-pc", [1.0, 1.0, 1.0], 0.1, population=1)
    assert pol3.next_pair(pending=[(0, 1)]) != (0, 1)
    with pytest.raises(NoPairAvailable):
        pol3.next_pair(pending=[(0, 1), (0, 2), (1, 2)])


def test_recording_more_than_population_outcomes_raises():
    pol = make_policy("dctas-pc", [1.0, 1.0, 1.0], 0.1, population=2)
    pol.record(0, 1, 0.5)
    pol.record(1, 0, 0.5)
    with pytest.raises(PolicyError, match="cannot have more"):
        pol.record(0, 1, 1.0)


def test_marginal_costs_follow_the_answered_prefix():
    pol = make_policy("dctas-pc", [4.0, 2.0, 1.0], 0.1, judge_cost=3.0, population=10)
    for s in (1.0, 0.0):
        pol.record(0, 1, s)  # models 0 and 1 answered perm[0], perm[1]
    pol.next_pair()
    # (0, 1) at n = 2: both new; (0, 2) at n = 0: model 0's answer is stored; (1, 2) likewise for 1
    assert pol._CK.tolist() == [4 + 2 + 3.0, 1 + 3.0, 1 + 3.0]
    pol.set_costs([4.0, 2.0, 1.0], 0.0)
    pol.next_pair(pending=[(0, 2), (0, 2)])
    # (0, 2) at n = 2 = prefix of 0 and of 2: both answers new; (1, 2) at n = 0: nothing new -> the 1% floor
    assert pol._CK.tolist() == pytest.approx([6.0, 5.0, 0.01 * 3.0])


# ---------------------------------------------------------------- certificates
def test_bets_are_the_log_wealth_of_r4_and_exact_certificate_when_the_sum_decides():
    P = 8
    x = [1.0, 0.5, 1.0, 1.0, 0.0, 1.0]  # 2 * sum = 7 <= 8 after five values, 9 > 8 after six
    pol = make_policy("dctas-pc", [1.0, 1.0], 0.1, population=P)
    for t, v in enumerate(x):
        pol.record(0, 1, v)
        assert pol._LA[0] == log_wealth(x[: t + 1], 0.5, P)[-1]
        assert pol._LB[0] == log_wealth([1 - y for y in x[: t + 1]], 0.5, P)[-1]
        if t < 5:
            assert not pol.stopped
    assert pol.stopped and pol.winner == 0 and pol.stop_t == 6
    assert pol._LA[0] < math.log(1 / 0.1)  # the (R4) test alone had not certified: this is the exact certificate
    # reversed order of the arguments: score of arm i
    q = make_policy("dctas-pc", [1.0, 1.0], 0.1, population=3)
    q.record(1, 0, 1.0)
    q.record(1, 0, 1.0)
    assert q.stopped and q.winner == 1


def test_exact_tie_on_the_prompt_set_is_undecidable():
    P = 12
    table = np.full((3, 3, P), 0.5)
    table[0, 1] = [1.0, 0.0] * 6  # 0 and 1 tie exactly
    table[1, 0] = 1.0 - table[0, 1]
    table[0, 2] = table[1, 2] = 1.0
    table[2, 0] = table[2, 1] = 0.0
    inst = PromptInstance.from_table([1.0, 1.0, 1.0], 1.0, table)
    assert inst.condorcet_winner() is None
    for seed in range(5):
        perm = np.random.default_rng(seed).permutation(P)
        pol = make_policy("dctas-pc", inst.costs, 0.1, judge_cost=2.0, population=P)
        _drive(pol, inst, perm, random.Random(seed), max_pending=2)
        assert pol.stopped and pol.winner is None and pol.verdict == UNDECIDABLE == CampaignStatus.UNDECIDABLE
        s = pol.summary()
        assert s["verdict"] == "undecidable" and s["population"] == P and [0, 1, 0.5] in s["exact"]
        assert sorted(s["certified_beaten"]) == [2]
        assert policy_from_state(json.loads(json.dumps(pol.to_state()))).verdict == UNDECIDABLE
        with pytest.raises(PolicyError):
            pol.next_pair()


def test_a_single_prompt():
    for score, winner, verdict in ((1.0, 0, None), (0.0, 1, None), (0.5, None, UNDECIDABLE)):
        pol = make_policy("dctas-pc", [1.0, 1.0], 0.1, population=1)
        assert pol.next_pair() == (0, 1)
        with pytest.raises(NoPairAvailable):
            pol.next_pair(pending=[(0, 1)])
        pol.record(0, 1, score)
        assert pol.stopped and pol.winner == winner and pol.verdict == verdict and pol.stop_t == 1
        assert pol.summary()["exact"] == [[0, 1, score]]


@pytest.mark.parametrize("bad", [0, -3, 2.5, "7", True, [5]])
def test_bad_population_is_refused(bad):
    with pytest.raises(PolicyError, match="population"):
        make_policy("dctas-pc", [1.0, 2.0], 0.1, population=bad)
    state = make_policy("dctas-pc", [1.0, 2.0], 0.1, population=4).to_state()
    state["params"]["population"] = bad
    with pytest.raises(PolicyError):
        policy_from_state(state)


def test_population_is_for_dctas_pc_only():
    with pytest.raises(PolicyError, match="dctas-pc only"):
        make_policy("dctas", [1.0, 2.0], 0.1, population=4)
    assert (
        make_policy("dctas", [1.0, 2.0], 0.1, population=None).to_state()
        == make_policy("dctas", [1.0, 2.0], 0.1).to_state()
    )


@pytest.mark.parametrize("opts", [{"threshold": "kk"}, {"stick": 1.0}])
def test_population_refuses_options_that_cannot_apply(opts):
    with pytest.raises(PolicyError, match="cannot be combined"):
        make_policy("dctas-pc", [1.0, 2.0], 0.1, population=4, **opts)
    make_policy("dctas-pc", [1.0, 2.0], 0.1, **opts)  # still fine without population


def test_malformed_wor_state_is_refused():
    pol = make_policy("dctas-pc", [1.0, 2.0, 3.0], 0.1, population=4)
    pol.record(0, 1, 1.0)
    good = pol.to_state()
    for mutate in (
        lambda s: s.pop("wor"),
        lambda s: s["wor"].update(log_wealth=[[0.0, 0.0]]),
        lambda s: s["wor"].update(sums=[0.0, 0.0, 0.0]),
        lambda s: s["wor"].update(sumsq=[5.0, 0.0, 0.0]),
        lambda s: s.update(N=[5, 0, 0], W=[1.0, 0.0, 0.0]),
    ):
        st = json.loads(json.dumps(good))
        mutate(st)
        with pytest.raises(PolicyError):
            policy_from_state(st)
    st = make_policy("dctas-pc", [1.0, 2.0, 3.0], 0.1).to_state()
    st["verdict"] = UNDECIDABLE
    with pytest.raises(PolicyError):
        policy_from_state(st)


# ---------------------------------------------------------------- the campaign driver and the error rate
def test_driver_modes_on_the_same_seed():
    inst = _inst4(P=50)
    assert inst.condorcet_winner() == 0
    for mode in ("reuse", "wor"):
        r = policy_campaign(inst, mode, 0.1, 0)
        assert r.outcome == 0 and r.spend <= inst.every_answer_once_bound() + 1e-9
    tie = _inst4(P=30)  # no Condorcet winner on these 30 prompts: without replacement the campaign still ends
    assert tie.condorcet_winner() is None
    r = policy_campaign(tie, "wor", 0.1, 0)
    assert r.outcome in (NO_CW, UNDECIDABLE_CODE) and r.duels <= 6 * 30
    r = policy_campaign(inst, "reuse", 0.1, 0, max_duels=3)
    assert r.outcome == CAPPED and r.duels == 3
    with pytest.raises(ValueError):
        policy_campaign(inst, "fresh", 0.1, 0)


def test_driver_orders_auto_pays_one_call_once_the_judge_is_consistent():
    """orders: auto changes what a verdict costs, never which duels are run (the policy is told the
    cost of two calls in both); with an order-consistent table it reads about one call a verdict."""
    inst = _inst4(P=200)
    both = policy_campaign(inst, "wor", 0.1, 3)
    auto = policy_campaign(inst, "wor", 0.1, 3, orders="auto")
    assert auto.outcome == both.outcome == 0
    assert np.array_equal(auto.counts, both.counts) and auto.verdicts_paid == both.verdicts_paid
    assert auto.answer_spend == pytest.approx(both.answer_spend)
    assert both.judge_calls == 2 * both.verdicts_paid
    assert both.spend == pytest.approx(both.answer_spend + both.judge_calls * inst.judge_cost)
    assert auto.spend == pytest.approx(auto.answer_spend + auto.judge_calls * inst.judge_cost)
    # both orders for the first 8 verdicts, then one order with a 2% share of both-order checks
    assert auto.verdicts_paid + 8 <= auto.judge_calls <= 16 + 1.1 * (auto.verdicts_paid - 8) < both.judge_calls
    assert [c[2] for c in auto.certificates].count(0) == 3 and auto.certificates[-1][0] <= auto.spend
    with pytest.raises(ValueError):
        policy_campaign(inst, "wor", 0.1, 3, orders="one")


def test_error_rate_without_replacement_is_within_delta():
    """Wrong winner, or no winner although a prompt-set winner exists, at most delta = 0.1.

    A hard-ish instance: the winner's gaps on the 200 prompts are 0.010, 0.012, 0.062
    (9 errors in these 600 campaigns, 1.5%). The test fails if a one-sided binomial test rejects
    "error rate <= delta" at p < 0.01 (600 trials: a true rate of 0.15 fails it almost surely).
    """
    inst = bradley_terry_prompts([0.15, 0.1, 0.05, 0.0], 200, costs=[4, 2, 1, 1], judge_cost=1.5, tie_prob=0.1, seed=1)
    assert inst.condorcet_winner() == 0
    delta, trials = 0.1, 600
    r = policy_trials(inst, "wor", delta, trials, seed=0)
    assert r["capped"] == 0
    k = r["errors"]
    assert binomtest(k, trials, delta, alternative="greater").pvalue >= 0.01, f"{k} errors in {trials}"
