"""The certified leaderboard (``goal: top_k`` / ``ranking``): tiers, goals, the policy, its error rate."""

from __future__ import annotations

import numpy as np
import pytest
from scipy.stats import binom

from algorithms.leaderboard import (
    certified_tiers,
    claim_is_wrong,
    goal_reached,
    top_k_set,
    true_tiers,
    validate_goal,
)
from algorithms.leaderboard_sim import goal_campaign, top_k_is_wrong
from algorithms.policies import PolicyError, make_policy, policy_from_state


def _beat(L: int, edges: list[tuple[int, int]]) -> np.ndarray:
    B = np.zeros((L, L), dtype=bool)
    for u, v in edges:
        B[u, v] = True
    return B


def test_tiers_split_only_where_every_cross_pair_is_certified():
    # 0 beats everyone; 1 beats 3; 1-2 and 2-3 undecided: {1, 2, 3} stays one open tier
    tiers = certified_tiers(_beat(4, [(0, 1), (0, 2), (0, 3), (1, 3)]))
    assert [t.models for t in tiers] == [(0,), (1, 2, 3)]
    assert [t.status for t in tiers] == ["ranked", "open"]
    assert goal_reached(tiers, "top_k", 1) == "certified"
    assert goal_reached(tiers, "top_k", 2) is None
    assert goal_reached(tiers, "ranking", None) is None
    assert top_k_set(tiers, 2) == [0, 1, 2, 3]
    # one more certificate (2 beats 3) still leaves 1-2 open: 1 > 3 and 2 > 3 make {1, 2} > {3}
    tiers = certified_tiers(_beat(4, [(0, 1), (0, 2), (0, 3), (1, 3), (2, 3)]))
    assert [t.models for t in tiers] == [(0,), (1, 2), (3,)]
    assert goal_reached(tiers, "top_k", 3) == "certified" and top_k_set(tiers, 3) == [0, 1, 2]


def test_a_certified_cycle_is_a_final_tier_and_exact_ties_a_tie():
    cycle = certified_tiers(_beat(4, [(0, 1), (1, 2), (2, 0), (0, 3), (1, 3), (2, 3)]))
    assert [(t.models, t.status) for t in cycle] == [((0, 1, 2), "undecidable"), ((3,), "ranked")]
    assert goal_reached(cycle, "ranking", None) == "undecidable"
    assert goal_reached(cycle, "top_k", 1) == "undecidable"
    assert goal_reached(cycle, "top_k", 3) == "certified"
    tie = np.zeros((3, 3), dtype=bool)
    tie[1, 2] = tie[2, 1] = True
    tiers = certified_tiers(_beat(3, [(0, 1), (0, 2)]), tie)
    assert [(t.models, t.status) for t in tiers] == [((0,), "ranked"), ((1, 2), "tie")]
    assert goal_reached(tiers, "ranking", None) == "certified"


def test_true_tiers_and_wrong_claims():
    P = np.array([[0.5, 0.6, 0.7], [0.4, 0.5, 0.5], [0.3, 0.5, 0.5]])
    assert true_tiers(P) == [[0], [1, 2]]
    assert not claim_is_wrong(P, [[0], [1, 2]])
    assert claim_is_wrong(P, [[0], [1], [2]])  # 1 over 2 where p = 1/2
    assert top_k_is_wrong(P, [0, 1]) and not top_k_is_wrong(P, [0])


@pytest.mark.parametrize(
    "goal, k, message",
    [
        ("top_k", None, "needs k"),
        ("top_k", 3, "must be in"),
        ("ranking", 1, "goes with goal top_k"),
        ("best", None, "unknown goal"),
    ],
)
def test_bad_goals_are_refused(goal, k, message):
    with pytest.raises(ValueError, match=message):
        validate_goal(goal, k, 3)
    with pytest.raises(PolicyError, match=message):
        make_policy("dctas-pc", [1, 1, 1], 0.1, goal=goal, k=k)


def test_policy_state_round_trip_continues_identically():
    P = np.array([[0.5, 0.7, 0.8], [0.3, 0.5, 0.65], [0.2, 0.35, 0.5]])
    rng = np.random.default_rng(3)
    pol = make_policy("dctas-pc", [1, 2, 3], 0.1, goal="top_k", k=1)
    for _ in range(40):
        i, j = pol.next_pair()
        pol.record(i, j, float(rng.random() < P[i, j]))
    twin = policy_from_state(pol.to_state())
    assert twin.summary() == pol.summary()
    for _ in range(200):
        pair = pol.next_pair()
        assert twin.next_pair() == pair
        s = float(rng.random() < P[pair])
        pol.record(*pair, s)
        twin.record(*pair, s)
    assert pol.stopped and twin.summary() == pol.summary()
    assert pol.summary()["top_k"] == [0] and pol.winner == 0


def test_adaptive_sampling_is_cheaper_than_uniform_for_the_same_certificate():
    P = np.array([[0.5, 0.7, 0.8, 0.9], [0.3, 0.5, 0.6, 0.7], [0.2, 0.4, 0.5, 0.6], [0.1, 0.3, 0.4, 0.5]])
    costs = np.array([1.0, 2.0, 3.0, 4.0])
    ada = [goal_campaign(P, costs, 0.1, "top_k", 1, s, "adaptive") for s in range(6)]
    uni = [goal_campaign(P, costs, 0.1, "top_k", 1, s, "uniform") for s in range(6)]
    assert all(r.reached == "certified" and r.top_k == [0] for r in ada + uni)
    assert np.mean([r.cost for r in ada]) < 0.6 * np.mean([r.cost for r in uni])


# an exact tie at the top (40% tied duels), a near-tie at 0.52 and an exact tie below
NEAR_TIES = np.array([[0.5, 0.5, 0.65, 0.8], [0.5, 0.5, 0.52, 0.7], [0.35, 0.48, 0.5, 0.5], [0.2, 0.3, 0.5, 0.5]])
NEAR_TIES_T = np.array([[0, 0.4, 0, 0], [0.4, 0, 0, 0], [0, 0, 0, 0.3], [0, 0, 0.3, 0]])
EQUAL3 = np.full((3, 3), 0.5)
EQUAL3_T = np.where(np.eye(3) > 0, 0.0, 0.3)


def test_error_rate_at_most_delta_with_ties_and_near_ties():
    """Seeded: every reported order (at the certificate or at the cap) is checked against the instance;
    the count must pass the one-sided binomial check at delta (99.9% quantile)."""
    delta, trials = 0.1, 50
    errors = 0
    for P, T, goal, k, cap in (
        (NEAR_TIES, NEAR_TIES_T, "ranking", None, 500),
        (NEAR_TIES, NEAR_TIES_T, "top_k", 2, 500),
        (EQUAL3, EQUAL3_T, "ranking", None, 400),
    ):
        for seed in range(trials):
            r = goal_campaign(P, np.ones(P.shape[0]), delta, goal, k, seed, ties=T, cap=cap)
            errors += int(r.wrong or (r.top_k is not None and len(r.top_k) == k and top_k_is_wrong(P, r.top_k)))
    assert errors <= binom.ppf(0.999, 3 * trials, delta)


def test_a_campaign_file_asks_for_a_top_k(tmp_path):
    from service.campaign_files import read_campaign_file
    from service.schemas import CampaignCreate

    camp = tmp_path / "camp.yaml"
    camp.write_text(
        "name: board\ngoal: top_k\nk: 2\nmodels:\n"
        + "".join(f"  - {{name: m{n}, cost: 1, client: {{kind: simulated}}}}\n" for n in range(4))
        + "judge: {kind: human}\nprompts: [hi, there]\n"
    )
    body = CampaignCreate.model_validate(read_campaign_file(camp))
    assert (body.goal, body.k) == ("top_k", 2)


def test_without_replacement_exact_ties_make_final_tiers():
    """Pairs judged on every prompt are known exactly: 1 ties 3 on the prompt set, 1 beats 2 and 2 beats 3,
    so {1, 2, 3} is one final tier (no order exists) and the ranking ends."""
    n_prompts = 20
    # per pair, its outcome on each prompt (position q of the shared permutation)
    table = {
        (0, 1): [1.0] * 16 + [0.0] * 4,
        (0, 2): [1.0] * 16 + [0.0] * 4,
        (0, 3): [1.0] * 16 + [0.0] * 4,
        (1, 2): [1.0] * 12 + [0.0] * 8,
        (1, 3): [1.0] * 8 + [0.5] * 4 + [0.0] * 8,
        (2, 3): [1.0] * 12 + [0.0] * 8,
    }
    rng = np.random.default_rng(5)
    for pair in table:
        rng.shuffle(table[pair])
    pol = make_policy("dctas-pc", [1, 1, 1, 1], 0.1, population=n_prompts, goal="ranking")
    used = dict.fromkeys(table, 0)
    while not pol.stopped:
        i, j = pol.next_pair()
        pol.record(i, j, table[(i, j)][used[(i, j)]])
        used[(i, j)] += 1
    assert [(list(t.models), t.status) for t in pol.tiers()] == [([0], "ranked"), ([1, 2, 3], "undecidable")]
    assert pol.goal_verdict == "undecidable" and pol.winner == 0 and max(used.values()) <= n_prompts
    assert policy_from_state(pol.to_state()).summary() == pol.summary()


def test_betting_field_intervals_hold_for_every_model_at_once_along_the_path():
    """Seeded: 40 paths of uniformly chosen pairs among 3 models with ties; at 30, 150 and 600 duels every
    model's interval (level 0.8) must cover its win rate against the field; the paths with a miss at any
    check must pass the one-sided binomial check at 0.2. The intervals are narrower than the per-model ones."""
    from algorithms.ranking import anytime_field_intervals, betting_field_intervals

    P = np.array([[0.5, 0.7, 0.9], [0.3, 0.5, 0.6], [0.1, 0.4, 0.5]])
    truth = (P.sum(axis=1) - 0.5) / 2
    pairs = [(0, 1), (0, 2), (1, 2)]
    missed, narrower = 0, 0
    for seed in range(40):
        rng = np.random.default_rng(seed)
        W, N = np.zeros((3, 3)), np.zeros((3, 3))
        miss = False
        for t in range(1, 601):
            i, j = pairs[rng.integers(3)]
            u = rng.random()
            s = 1.0 if u < P[i, j] - 0.1 else (0.5 if u < P[i, j] + 0.1 else 0.0)  # 20% ties
            W[i, j] += s
            W[j, i] += 1 - s
            N[i, j] += 1
            N[j, i] += 1
            if t in (30, 150, 600):
                lo, hi = betting_field_intervals(W, N, 0.8)
                miss |= not np.all((lo <= truth) & (truth <= hi))
        a_lo, a_hi = anytime_field_intervals(W, N, 0.8)
        narrower += int(np.all(hi - lo < a_hi - a_lo))
        missed += int(miss)
    assert missed <= binom.ppf(0.999, 40, 0.2)
    assert narrower == 40
