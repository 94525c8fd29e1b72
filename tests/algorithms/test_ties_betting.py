"""Issue 23: instances with ties, the betting certificate test (dctas-pc's default), the
bounded near-tie weight, and that the mixture test and the code paths without ties are unchanged."""

import hashlib
import json
import math
from pathlib import Path

import numpy as np
import pytest
from scipy.optimize import minimize_scalar
from scipy.stats import binom

from algorithms import Instance, InstanceError, make_policy, policy_from_state, solve_oracle, synthetic_instance
from algorithms import _kernels as kern
from algorithms.instances import resolve_instance
from algorithms.oracle import half_divergence, solve_pc_oracle
from algorithms.policies import pair_index_arrays, state_params
from algorithms.simulator import simulate, trace_trial

HERE = Path(__file__).parent
CYCLE = Instance(
    ["w", "x", "y", "z"],
    [2.0, 1.0, 0.5, 3.0],
    [[0.5, 0.7, 0.7, 0.72], [0.3, 0.5, 0.7, 0.3], [0.3, 0.3, 0.5, 0.7], [0.28, 0.7, 0.3, 0.5]],
)
HARD = Instance(
    ["a", "b", "c", "d"],
    [1.0, 2.0, 1.0, 3.0],
    [[0.5, 0.52, 0.55, 0.53], [0.48, 0.5, 0.54, 0.52], [0.45, 0.46, 0.5, 0.55], [0.47, 0.48, 0.45, 0.5]],
)
P3 = [[0.5, 0.6, 0.7], [0.4, 0.5, 0.55], [0.3, 0.45, 0.5]]
T3 = [[0.0, 0.4, 0.2], [0.4, 0.0, 0.5], [0.2, 0.5, 0.0]]


# ------------------------------------------------------------------ instances with ties
def test_ties_round_trip_and_default():
    inst = Instance(["a", "b", "c"], [1, 2, 3], P3, ties=T3)
    assert inst.ties is not None and inst.ties[1, 2] == 0.5
    back = Instance.from_dict(json.loads(json.dumps(inst.to_dict())))
    assert np.array_equal(back.ties, inst.ties)
    assert "ties" not in back.metadata
    assert synthetic_instance(4).ties is None
    assert "ties" not in synthetic_instance(4).to_dict()
    assert np.array_equal(synthetic_instance(4).tie_matrix(), np.zeros((3, 3)))


@pytest.mark.parametrize(
    "ties, message",
    [
        ([[0, 0.4], [0.3, 0]], "symmetric"),
        ([[0, 0.9], [0.9, 0]], r"2 min\(p_ij, 1 - p_ij\)"),  # p = 0.4 allows at most 0.8
        ([[0, -0.1], [-0.1, 0]], "0 <= ties"),
        ([[0, 0.1, 0], [0.1, 0, 0]], "2x2"),
        ([["x", 0], [0, 0]], "numbers"),
        ([[0, float("nan")], [float("nan"), 0]], "finite"),
    ],
)
def test_bad_ties_are_refused_with_a_reason(ties, message):
    with pytest.raises(InstanceError, match=message):
        Instance(["a", "b"], [1, 1], [[0.5, 0.6], [0.4, 0.5]], ties=ties)


def test_tie_builtins_load_and_carry_provenance():
    for name in ("genai-image-ties", "genai-image-ties4"):
        inst = resolve_instance(name)
        assert inst.ties is not None and inst.condorcet_winner == 0
        assert "tie" in inst.metadata["provenance"]["derivation"]
        L = inst.L
        share = inst.ties[~np.eye(L, dtype=bool)].mean()
        assert 0.2 < share < 0.45


def test_simulator_draws_ties_at_their_rate_and_keeps_the_mean_score():
    inst = Instance(["a", "b"], [1, 1], [[0.5, 0.6], [0.4, 0.5]], ties=[[0, 0.4], [0.4, 0]])
    scores = np.array(trace_trial(inst, "crr", 1e-300, seed=4, max_steps=20000)["scores"])
    n = scores.size
    assert n == 20000
    k_tie, k_win = int((scores == 0.5).sum()), int((scores == 1.0).sum())
    # two-sided binomial checks at level 1e-6: tie rate 0.4, win rate 0.6 - 0.2 = 0.4
    for k, p in ((k_tie, 0.4), (k_win, 0.4)):
        assert binom.ppf(1e-6, n, p) <= k <= binom.ppf(1 - 1e-6, n, p)


def test_without_ties_every_algorithm_gives_the_outputs_of_the_code_before_ties():
    """Recorded with the code of commit 82864b1 (before ties and the betting test), same script."""
    base = json.loads((HERE / "data" / "pre_ties_outputs.json").read_text())
    cases = [
        ("synthetic:k=4", synthetic_instance(4)),
        ("cycle", CYCLE),
        ("genai-image", resolve_instance("genai-image")),
    ]
    for name, inst in cases:
        for alg in ["dctas-pc", "dctas", "tas", "crr", "dctac", "dpca"]:
            if alg == "dctac" and name != "synthetic:k=4":
                continue
            extra = {"threshold": "mixture", "level": "delta/(L-1)"} if alg == "dctas-pc" else {}
            r = simulate(inst, alg, 0.1, 12, seed=5, **extra)
            got = {
                "pulls": r.pulls.tolist(),
                "rec": r.recommended.tolist(),
                "cost": r.costs.tolist(),
                "pp": hashlib.sha256(r.pair_pulls.tobytes()).hexdigest(),
            }
            assert got == base[f"{name}|{alg}"], (name, alg)
    # the step-wise policy with half points, mixture test: same choices and the same state as before
    rng = np.random.default_rng(3)
    pol = make_policy("dctas-pc", [1.0, 2.0, 1.5, 1.0], 0.05, threshold="mixture", level="delta/(L-1)")
    P = np.array([[0.5, 0.6, 0.62, 0.7], [0.4, 0.5, 0.55, 0.6], [0.38, 0.45, 0.5, 0.52], [0.3, 0.4, 0.48, 0.5]])
    seq = []
    while not pol.should_stop() and pol.t < 20000:
        i, j = pol.next_pair()
        u = rng.random()
        pol.record(i, j, 1.0 if u < P[i, j] - 0.15 else (0.5 if u < P[i, j] + 0.15 else 0.0))
        seq.append((i, j))
    got = {
        "t": pol.t,
        "winner": pol.winner,
        "seq": hashlib.sha256(json.dumps(seq).encode()).hexdigest(),
        "state": hashlib.sha256(json.dumps(pol.to_state(), sort_keys=True).encode()).hexdigest(),
    }
    assert got == base["stepwise"]


# ------------------------------------------------------------------ oracle with ties
def _kinf_numeric(w, tau):
    """min KL(F, G) over laws G on {0, 1/2, 1} with mean <= 1/2, F = (loss, tie, win) = (1 - w - tau, tau, w)."""
    loss = 1 - w - tau

    def dual(lam):  # Honda-Takemura dual, computed independently as a 1-d maximisation
        return -(w * math.log(1 + lam / 2) + loss * math.log(1 - lam / 2))

    r = minimize_scalar(dual, bounds=(0, 2 - 1e-12), method="bounded")
    return -r.fun


@pytest.mark.parametrize("w, tau", [(0.4, 0.4), (0.55, 0.1), (0.3, 0.6), (0.6, 0.0)])
def test_tie_aware_divergence_is_the_kinf_of_the_three_point_law(w, tau):
    p = w + tau / 2  # mean score of the winner of the pair
    P = np.array([[0.5, p], [1 - p, 0.5]])
    T = np.array([[0, tau], [tau, 0]])
    D = half_divergence(P, T)
    assert D[1, 0] == pytest.approx(_kinf_numeric(w, tau), rel=1e-6)
    assert D[0, 1] == 0.0
    # never below the Bernoulli value with the same mean (ties only help)
    assert D[1, 0] >= half_divergence(P)[1, 0] - 1e-12


def test_oracle_and_pc_bound_use_the_ties():
    plain = Instance(["a", "b", "c"], [1, 2, 3], P3)
    tied = Instance(["a", "b", "c"], [1, 2, 3], P3, ties=T3)
    assert solve_oracle(tied).c_star < solve_oracle(plain).c_star
    assert solve_pc_oracle(tied).c_pc < solve_pc_oracle(plain).c_pc
    zero = Instance(["a", "b", "c"], [1, 2, 3], P3, ties=np.zeros((3, 3)))
    assert solve_oracle(zero).c_star == solve_oracle(plain).c_star


# ------------------------------------------------------------------ the betting test
def test_betting_wealth_is_the_mixture_of_constant_bets():
    H = np.zeros((1, 10))
    xs = [0.0] * 13 + [0.5] * 9 + [1.0] * 5 + [0.25, 0.75]
    for x in xs:
        kern.pc_hist_add(0, x, H)
    mus = 2 * 0.8 ** np.arange(1, kern.PC_GRID + 1)
    lpi = kern.PC_BET_LPI
    assert np.exp(lpi).sum() == pytest.approx(1.0)

    def wealth(ys):
        terms = [lp + sum(math.log1p(mu * (0.5 - y)) for y in ys) for mu, lp in zip(mus, lpi)]
        return float(np.logaddexp.reduce(terms))

    up = [math.ceil(4 * x) / 4 for x in xs]  # the arm's scores rounded up: "PI beaten" is conservative
    assert kern.pc_bet_log_wealth(H, 0, 0) == pytest.approx(wealth(up))
    other_up = [math.ceil(4 * (1 - x)) / 4 for x in xs]
    assert kern.pc_bet_log_wealth(H, 0, 1) == pytest.approx(wealth(other_up))


def test_betting_test_false_certificate_rate_at_the_null_with_ties():
    """p = 1/2 exactly with 40% ties: the wealth may reach 1/alpha with probability <= alpha (Ville)."""
    rng = np.random.default_rng(11)
    alpha, n_runs, horizon = 0.05, 3000, 400
    u = rng.random((n_runs, horizon))
    x = np.where(u < 0.3, 1.0, np.where(u < 0.7, 0.5, 0.0))
    crossed = 0
    for r in range(n_runs):
        H = np.zeros((1, 10))
        for t in range(horizon):
            kern.pc_hist_add(0, x[r, t], H)
            if kern.pc_bet_log_wealth(H, 0, 0) >= math.log(1 / alpha):
                crossed += 1
                break
    assert crossed <= binom.ppf(1 - 1e-3, n_runs, alpha)


def test_default_is_betting_and_old_states_load_as_mixture():
    pol = make_policy("dctas-pc", [1, 2, 3], 0.05)
    assert pol.threshold == "betting" and pol.to_state()["params"]["threshold"] == "betting"
    mix = make_policy("dctas-pc", [1, 2, 3], 0.05, threshold="mixture", level="delta/(L-1)")
    old_state = mix.to_state()
    assert "threshold" not in old_state["params"]  # the format written before betting was the default
    assert policy_from_state(old_state).threshold == "mixture"
    assert state_params(old_state) == {"threshold": "mixture", "level": "delta/(L-1)"}
    # without replacement the state names no test and gets none
    wor = make_policy("dctas-pc", [1, 2, 3], 0.05, population=20)
    assert "threshold" not in wor.to_state()["params"]
    assert policy_from_state(wor.to_state()).population == 20


def test_betting_state_round_trip_mid_run_continues_identically():
    inst = resolve_instance("genai-image-ties4")
    rng = np.random.default_rng(2)

    def draw(i, j):
        u = rng.random()
        p, tau = inst.preference[i, j], inst.ties[i, j]
        return 1.0 if u < p - tau / 2 else (0.5 if u < p + tau / 2 else 0.0)

    a = make_policy("dctas-pc", inst.costs, 0.05)
    for _ in range(150):
        i, j = a.next_pair()
        a.record(i, j, draw(i, j))
    b = policy_from_state(json.loads(json.dumps(a.to_state())))
    assert b.threshold == "betting"
    while not a.should_stop():
        pa, pb = a.next_pair(), b.next_pair()
        assert pa == pb
        s = draw(*pa)
        a.record(*pa, s)
        b.record(*pb, s)
    assert b.should_stop() and a.to_state() == b.to_state()
    bad = a.to_state()
    bad["hist"][0][0] += 1
    with pytest.raises(Exception, match="hist"):
        policy_from_state(bad)


def test_log_wealth_matrix_crosses_the_threshold_exactly_when_a_certificate_is_issued():
    inst = resolve_instance("genai-image-ties4")
    for threshold in ("betting", "mixture"):
        rng = np.random.default_rng(9)
        pol = make_policy("dctas-pc", inst.costs, 0.05, threshold=threshold)
        while not pol.should_stop():
            i, j = pol.next_pair()
            u = rng.random()
            p, tau = inst.preference[i, j], inst.ties[i, j]
            pol.record(i, j, 1.0 if u < p - tau / 2 else (0.5 if u < p + tau / 2 else 0.0))
            LW = pol.certificate_log_wealth()
            W = pol.wins_matrix()
            N = pol.counts_matrix()
            behind = (W < N / 2) & (N > 0)
            # BEAT[k, m] = "m beaten by k"; LW[m, k] = log-wealth of that test
            crossed = behind & (LW >= pol.certificate_log_threshold)
            assert np.array_equal(crossed, pol.BEAT.T & behind)
        assert pol.winner == 0
    assert make_policy("dctas-pc", [1, 1], 0.1, threshold="kk").certificate_log_wealth() is None


def test_betting_certifies_for_less_than_the_mixture_on_tie_heavy_data():
    inst = resolve_instance("genai-image-ties4")
    bet = simulate(inst, "dctas-pc", 0.05, 200, seed=3)
    mix = simulate(inst, "dctas-pc", 0.05, 200, seed=3, threshold="mixture")
    assert bet.costs.mean() < 0.8 * mix.costs.mean()
    assert bet.errors.sum() == 0


def test_near_tie_weight_is_bounded_with_the_default_test():
    # leader 0; pair (1, 0) seems lost by 1 (weight 1/d), pair (2, 0) is a near tie after many duels
    L = 3
    PI, PJ, PK = pair_index_arrays(L)  # pairs (0, 1), (0, 2), (1, 2)
    N = np.array([400.0, 40000.0, 400.0])
    W = np.array([260.0, 20000.0, 200.0])
    c = np.ones(L)
    T, G, S, AMAX = np.zeros((L, L)), np.zeros((L, L)), np.zeros(L), np.zeros(L)
    kern.rebuild(N, W, PI, PJ, c, T, G, S, AMAX)
    BEAT = np.zeros((L, L), dtype=np.bool_)
    CB, alpha = np.zeros(L, np.int64), np.zeros(3)
    t = float(N.sum())
    kern.pc_choose(N, t, 0, G, AMAX, c, PI, PJ, PK, BEAT, CB, alpha, 0.0, 0, 1.0)
    unbounded = alpha[1] / alpha.sum()
    kern.pc_choose(N, t, 0, G, AMAX, c, PI, PJ, PK, BEAT, CB, alpha, 1.0, 0, 1.0)
    bounded = alpha[1] / alpha.sum()
    assert unbounded > 0.9  # ~2(n + 1) = 80,002 against 1/d(0.35, 1/2) ~ 22
    assert bounded == pytest.approx(0.5)  # at most the weight of the pair that seems lost


@pytest.mark.parametrize(
    "instance",
    [HARD, CYCLE, resolve_instance("genai-image-ties4")],
    ids=["hard", "intransitive", "tie-heavy"],
)
def test_default_error_rate_at_most_delta(instance):
    """One-sided binomial check at delta = 0.1 (the 10,000-trial run is in benchmarks/bench_certificates.py)."""
    delta, n = 0.1, 2000
    res = simulate(instance, "dctas-pc", delta, n, seed=21, max_steps=5_000_000)
    assert res.stopped.all()
    limit = binom.ppf(1 - 1e-3, n, delta)
    assert res.errors.sum() <= limit
    assert res.no_condorcet_winner.sum() <= limit


@pytest.mark.parametrize("name, target", [("synthetic:k=4", 2.2), ("synthetic:k=19", 2.2), ("search", 2.9)])
def test_default_cost_over_c_pc_star_meets_issue_23_targets(name, target):
    """Mean cost / (c_pc* log(1/(4 delta))) at delta = 0.01 over 500 seeded trials (bench_certificates --part tests).

    Issue 23's targets (2.0 / 2.0 / 2.8) were met at the level delta / (L - 1); the level delta / L,
    which bounds every verdict by delta, costs log(L / delta) / log((L - 1) / delta) more nats per
    certificate (7.7% at L = 3, 1.4% for search's 11 models): measured 2.14 / 2.13 (bench_certificates --part union).
    """
    res = simulate(resolve_instance(name), "dctas-pc", 0.01, 500, seed=1, jobs=2)
    summary = res.summary()
    assert summary["errors"] == 0
    assert summary["cost_over_pc_lower_bound"] <= target


def test_betting_prior_puts_its_focus_mass_evenly_on_the_focus_gaps():
    gaps = 0.5 * kern.PC_RATIO ** np.arange(1, kern.PC_GRID + 1)
    pi = np.exp(kern.PC_BET_LPI)
    focus = (gaps >= 0.017) & (gaps <= 0.26)
    assert pi.sum() == pytest.approx(1.0)
    assert pi[focus].sum() == pytest.approx(kern.PC_BET_FOCUS) and kern.PC_BET_FOCUS >= 0.95
    assert np.ptp(pi[focus]) < 1e-15 and pi[focus].min() > pi[~focus].max()
