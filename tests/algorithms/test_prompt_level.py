"""Prompt-level instances, the without-replacement confidence sequence and the reuse simulator."""

from __future__ import annotations

import numpy as np
import pytest
from conftest import REPO
from scipy.stats import binomtest

from algorithms.prompt_level import PromptInstance, bradley_terry_prompts, cs_bounds, cs_contains, log_wealth
from algorithms.prompt_sim import CAPPED, UNDECIDABLE, run_trials, simulate_campaign


def _hard_instance() -> PromptInstance:
    """3 models, 100 prompts; prompt-set gaps of the winner 0.05 and 0.01."""
    inst = bradley_terry_prompts(
        [0.15, 0.05, 0.0], 100, costs=[3, 2, 1], judge_cost=1.0, prompt_sd=1.0, tie_prob=0.1, seed=2
    )
    return inst


def _table(rows: dict[tuple[int, int], list[float]], L: int) -> np.ndarray:
    P = len(next(iter(rows.values())))
    t = np.full((L, L, P), 0.5)
    for (i, j), v in rows.items():
        t[i, j] = v
        t[j, i] = 1.0 - np.asarray(v)
    return t


# ---------------------------------------------------------------- instance


def test_from_table_rejects_bad_tables_with_a_message():
    good = _table({(0, 1): [1, 0.5, 0]}, 2)
    with pytest.raises(ValueError, match="0, 1/2 or 1"):
        PromptInstance.from_table([1, 1], 1, good * 0.9)
    bad = good.copy()
    bad[1, 0, 0] = 1.0
    with pytest.raises(ValueError, match="v_ij"):
        PromptInstance.from_table([1, 1], 1, bad)
    with pytest.raises(ValueError, match="shape"):
        PromptInstance.from_table([1, 1, 1], 1, good)
    with pytest.raises(ValueError, match="costs"):
        PromptInstance.from_table([1, -1], 1, good)


def test_prompt_set_matrix_and_winner_are_exact():
    t = _table({(0, 1): [1, 1, 0, 0.5], (0, 2): [1, 0, 0.5, 1], (1, 2): [0, 0, 1, 1]}, 3)
    inst = PromptInstance.from_table([1, 2, 3], 0.5, t)
    P = inst.preference()
    assert P[0, 1] == pytest.approx(0.625) and P[0, 2] == pytest.approx(0.625) and P[1, 2] == 0.5
    assert inst.condorcet_winner() == 0
    # turn one of 0's wins against 1 into a tie: p_01 = 1/2 exactly, no strict winner
    t[0, 1, 0], t[1, 0, 0] = 0.5, 0.5
    t[0, 1, 3], t[1, 0, 3] = 0.0, 1.0
    assert PromptInstance.from_table([1, 2, 3], 0.5, t).condorcet_winner() is None
    assert inst.every_answer_once_bound() == pytest.approx(4 * 6 + 3 * 4 * 2 * 0.5)


def test_bradley_terry_prompts_is_seeded_and_follows_the_strengths():
    a = bradley_terry_prompts([2.0, 0.0, -2.0], 400, costs=[1, 1, 1], judge_cost=1, seed=5)
    b = bradley_terry_prompts([2.0, 0.0, -2.0], 400, costs=[1, 1, 1], judge_cost=1, seed=5)
    assert np.array_equal(a.halves, b.halves)
    P = a.preference()
    assert P[0, 1] > 0.6 and P[1, 2] > 0.6 and P[0, 2] > P[0, 1]
    assert a.condorcet_winner() == 0


# ---------------------------------------------------------------- confidence sequences


def test_without_replacement_cs_covers_the_population_mean_uniformly():
    """Over 2,000 random orders the sequence misses the exact mean at some time in <= alpha of them."""
    rng = np.random.default_rng(11)
    pop = rng.choice([0.0, 0.5, 1.0], size=80, p=[0.35, 0.15, 0.5])
    mu = pop.mean()
    alpha, trials = 0.1, 2000
    misses = sum(not cs_contains(rng.permutation(pop), mu, alpha, population=pop.size) for _ in range(trials))
    assert binomtest(misses, trials, alpha, alternative="greater").pvalue > 0.01
    # a wrong mean (off by 0.15) is excluded in most orders: the check can fail
    wrong = sum(not cs_contains(rng.permutation(pop), mu - 0.15, alpha, population=pop.size) for _ in range(200))
    assert wrong > 150


def test_with_replacement_cs_covers_the_mean_uniformly():
    rng = np.random.default_rng(12)
    alpha, trials, mu = 0.1, 1000, 0.6
    misses = 0
    for _ in range(trials):
        x = np.where(rng.random(300) < mu, 1.0, 0.0)
        misses += not cs_contains(x, mu, alpha)
    assert binomtest(misses, trials, alpha, alternative="greater").pvalue > 0.01


def test_cs_collapses_to_the_exact_mean_at_n_equals_population_and_is_narrower_than_iid():
    rng = np.random.default_rng(3)
    pop = rng.choice([0.0, 0.5, 1.0], size=60)
    x = rng.permutation(pop)
    lo, hi = cs_bounds(x, 0.1, population=pop.size)
    assert lo[-1] == pytest.approx(pop.mean()) and hi[-1] == pytest.approx(pop.mean())
    assert np.all(lo <= pop.mean() + 1e-12) and np.all(hi >= pop.mean() - 1e-12)
    lo_iid, hi_iid = cs_bounds(x, 0.1)
    half = pop.size // 2
    assert hi[half] - lo[half] < hi_iid[half] - lo_iid[half]


def test_log_wealth_validates_its_inputs():
    with pytest.raises(ValueError, match="in \\[0, 1\\]"):
        log_wealth([0.2, 1.5], 0.5)
    with pytest.raises(ValueError, match="population"):
        log_wealth([0.2, 0.5, 1.0], 0.5, population=2)


# ---------------------------------------------------------------- campaigns


@pytest.mark.parametrize("mode", ["reuse", "wor"])
def test_error_rate_at_most_delta_against_the_prompt_set_winner(mode):
    inst = _hard_instance()
    assert inst.condorcet_winner() == 0
    delta, trials = 0.1, 1000
    r = run_trials(inst, mode, delta, trials, seed=1000)
    assert r["capped"] == 0
    assert binomtest(r["errors"], trials, delta, alternative="greater").pvalue > 0.01
    assert r["errors"] > 0  # the instance is hard enough for the test to bite


def _spend_from_trace(inst: PromptInstance, r, mode: str) -> float:
    L = inst.n_models
    pairs = [(i, j) for i in range(L) for j in range(i + 1, L)]
    if mode == "fresh":
        return sum(inst.fresh_duel_cost(*pairs[k]) for k in r.trace_pairs)
    answers = {(a, p) for k, p in zip(r.trace_pairs, r.trace_prompts) for a in pairs[k]}
    verdicts = set(zip(r.trace_pairs.tolist(), r.trace_prompts.tolist()))
    return sum(inst.costs[a] for a, _ in answers) + 2 * inst.judge_cost * len(verdicts)


@pytest.mark.parametrize("mode", ["fresh", "reuse", "wor"])
def test_spend_is_what_the_duels_bought_and_reuse_stays_under_the_every_answer_once_bound(mode):
    inst = bradley_terry_prompts([0.3, 0.15, 0.0, -0.1], 50, costs=[4, 2, 1, 1], judge_cost=1.5, tie_prob=0.1, seed=1)
    for seed in range(20):
        r = simulate_campaign(inst, mode, 0.05, seed, trace=True)
        assert r.outcome != CAPPED and r.duels == r.trace_pairs.size
        assert r.spend == pytest.approx(_spend_from_trace(inst, r, mode))
        if mode != "fresh":
            assert r.spend <= inst.every_answer_once_bound() + 1e-9


def test_without_replacement_never_picks_an_exhausted_pair_and_shares_one_order():
    # 12 prompts, gaps that need most of the prompt set: pairs run out of prompts
    inst = bradley_terry_prompts([0.2, 0.1, 0.0], 12, costs=[1, 1, 1], judge_cost=1, tie_prob=0.2, seed=4)
    exhausted_seen = 0
    for seed in range(50):
        r = simulate_campaign(inst, "wor", 0.05, seed, trace=True)
        orders = []
        for k in range(3):
            prompts = r.trace_prompts[r.trace_pairs == k]
            assert prompts.size == r.pair_counts[k] <= inst.n_prompts
            assert np.unique(prompts).size == prompts.size  # without replacement
            orders.append(prompts)
            exhausted_seen += prompts.size == inst.n_prompts
        longest = max(orders, key=len)
        for o in orders:  # every pair follows the same secret permutation
            assert np.array_equal(o, longest[: o.size])
    assert exhausted_seen > 0


def test_exact_tie_on_the_prompt_set_ends_undecidable_with_no_winner():
    # 0 and 1 tie exactly on the prompt set and both beat 2 clearly: no Condorcet winner
    P = 8
    t = _table({(0, 1): [1, 0] * (P // 2), (0, 2): [1] * P, (1, 2): [1] * P}, 3)
    inst = PromptInstance.from_table([1, 1, 1], 1, t)
    assert inst.condorcet_winner() is None
    for seed in range(20):
        r = simulate_campaign(inst, "wor", 0.05, seed, trace=True)
        assert r.outcome == UNDECIDABLE and r.says_no_winner
        assert r.pair_counts[0] == P  # the tie is known exactly only after every prompt
        assert r.spend <= inst.every_answer_once_bound()
    # with replacement the same instance never ends: the i.i.d. rule can only hit the cap
    r = simulate_campaign(inst, "reuse", 0.05, 0, max_duels=20_000)
    assert r.outcome == CAPPED


def test_simulate_campaign_validates_its_inputs():
    inst = _hard_instance()
    with pytest.raises(ValueError, match="mode"):
        simulate_campaign(inst, "sometimes", 0.1, 0)
    with pytest.raises(ValueError, match="delta"):
        simulate_campaign(inst, "wor", 1.5, 0)


def test_benchmark_script_runs_and_prints_every_mode():
    import subprocess
    import sys

    out = subprocess.run(
        [sys.executable, str(REPO / "benchmarks" / "bench_reuse_sim.py"), "--trials", "5", "--prompts", "20"],
        capture_output=True,
        text=True,
        timeout=300,
        check=True,
    ).stdout
    for word in ("fresh", "reuse", "wor", "spend ratios", "4 models x 20 prompts, clear", "small gaps"):
        assert word in out
    bad = subprocess.run(
        [sys.executable, str(REPO / "benchmarks" / "bench_reuse_sim.py"), "--trials", "0"],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert bad.returncode == 2 and "--trials" in bad.stderr and "Traceback" not in bad.stderr
