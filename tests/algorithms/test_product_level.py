"""The product level of dctas-pc (docs/algorithms.md, "The product level"): each certificate at
``alpha`` with ``3 alpha + (L - 3) alpha^2 = delta`` and "no Condorcet winner" needing every model
beaten at ``beta``, valid because the pairs' outcomes are independent (sampling with replacement).

The error checks are seeded simulations with the compiled simulator, on the instances that come
closest to the bound: three models in a near-tie cycle (each can be named with one false
certificate), a winner barely ahead of many models (the verdict "no Condorcet winner" needs one
false certificate against it), and several exactly equal models. Each fails when the wrong
verdicts exceed the 99.9% quantile of Binomial(trials, delta).
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy.stats import binom

from algorithms import Instance, make_policy, policy_from_state
from algorithms.certificates import no_winner_log_level, product_levels, resolve_pc_level
from algorithms.policies import NO_CONDORCET_WINNER, PolicyError
from algorithms.simulator import simulate, trace_trial

DELTA = 0.1


def _limit(n: int) -> float:
    return float(binom.ppf(1 - 1e-3, n, DELTA))


def _wrong(r, cw: int | None) -> int:
    if cw is None:
        return int((r.stopped & (r.recommended >= 0)).sum())
    return int((r.stopped & (r.recommended != cw)).sum())


@pytest.mark.parametrize("delta", [1e-6, 0.001, 0.05, 0.1, 0.3])
@pytest.mark.parametrize("L", [2, 3, 4, 5, 11, 64, 256])
def test_the_levels_meet_both_unions_and_are_never_below_delta_over_l(delta, L):
    alpha, beta = product_levels(delta, L)
    assert 0 < beta <= alpha
    # no Condorcet winner: at most three names need one false certificate, the others two
    assert min(L, 3) * alpha + max(L - 3, 0) * alpha**2 == pytest.approx(delta, rel=1e-12)
    # a Condorcet winner: one name with one false certificate, L - 2 with two, "no winner" at beta
    assert alpha + (L - 2) * (alpha**2 + beta) <= delta * (1 + 1e-12)
    # a Condorcet winner and no name with a single false certificate (a winner over a 3-cycle): per
    # other model k, naming k and the winner beaten by k at beta both need "a* beaten by k" at alpha
    assert (L - 1) * min(alpha, alpha**2 + beta) <= delta * (1 + 1e-12)
    assert alpha >= delta / L * (1 - 1e-12)


def test_bad_arguments_are_refused():
    with pytest.raises(ValueError, match="0 < delta < 1 and L >= 2"):
        product_levels(0.0, 3)
    with pytest.raises(ValueError, match="0 < delta < 1 and L >= 2"):
        product_levels(0.1, 1)


def test_auto_is_product_only_where_the_argument_holds():
    assert resolve_pc_level("auto", threshold="betting", population=None) == "product"
    assert resolve_pc_level("auto", threshold="mixture", population=None) == "product"
    assert resolve_pc_level("auto", threshold="betting", population=40) == "delta/L"  # shared permutation
    assert resolve_pc_level("auto", threshold="kk", population=None) == "delta/L"  # a boundary, no wealth
    assert resolve_pc_level("auto", threshold="betting", population=None, goal="ranking") == "delta/L"
    with pytest.raises(ValueError, match="level product needs sampling with replacement"):
        resolve_pc_level("product", threshold="betting", population=40)
    with pytest.raises(PolicyError, match="level product needs"):
        make_policy("dctas-pc", [1.0] * 4, 0.1, population=30, level="product")
    with pytest.raises(PolicyError, match="level product needs"):
        make_policy("dctas-pc", [1.0] * 4, 0.1, threshold="stitched", level="product")


def test_the_default_policy_states_its_level_and_replays_it():
    pol = make_policy("dctas-pc", [1.0] * 6, 0.05)
    alpha, beta = product_levels(0.05, 6)
    assert pol.level == "product" and pol.to_state()["params"]["level"] == "product"
    assert pol.certificate_log_threshold == pytest.approx(-math.log(alpha))
    assert pol.certificate_log_threshold < math.log(6 / 0.05)  # cheaper than delta / L
    assert no_winner_log_level(0.05, 6, "product") == pytest.approx(-math.log(beta))
    assert policy_from_state(pol.to_state()).level == "product"
    # the tests and modes the argument does not cover keep delta / L, stated in the state as before
    assert make_policy("dctas-pc", [1.0] * 4, 0.1, population=30).to_state()["params"]["level"] == "delta/L"
    assert make_policy("dctas-pc", [1.0] * 4, 0.1, threshold="portfolio").level == "delta/L"


def _cycle_over(extra: int, gap: float) -> Instance:
    """Three models in a cycle at ``1/2 + gap`` (a beats b beats c beats a), over ``extra`` models that
    lose to all three at 0.7 and tie among themselves: no Condorcet winner, each of the three can be named
    with one false certificate."""
    L = 3 + extra
    P = np.full((L, L), 0.5)
    hi, lo = 0.5 + gap, 0.5 - gap
    for i, j in ((0, 1), (1, 2), (2, 0)):
        P[i, j], P[j, i] = hi, lo
    for i in range(3):
        for j in range(3, L):
            P[i, j], P[j, i] = 0.7, 0.3
    return Instance([f"m{i}" for i in range(L)], [1.0] * L, P.tolist(), require_condorcet=False)


def _winner_over_equals(L: int, gap: float) -> Instance:
    """A winner ahead of ``L - 1`` exactly equal models by ``gap``: each name other than the winner's needs
    ``L - 1`` false certificates, "no Condorcet winner" one against the winner and more among the equals."""
    P = np.full((L, L), 0.5)
    P[0, 1:], P[1:, 0] = 0.5 + gap, 0.5 - gap
    return Instance([f"m{i}" for i in range(L)], [1.0] * L, P.tolist())


def _winner_over_cycle(gap: float) -> Instance:
    """A winner ahead by ``gap`` of three models in a clear cycle (0.85): no name needs a single false
    certificate, and "no Condorcet winner" needs only the winner beaten at beta, by any of three: the
    case of the bound ``(L - 1) min(alpha, alpha^2 + beta)``, closest to delta at four models."""
    P = np.full((4, 4), 0.5)
    P[0, 1:], P[1:, 0] = 0.5 + gap, 0.5 - gap
    for i, j in ((1, 2), (2, 3), (3, 1)):
        P[i, j], P[j, i] = 0.85, 0.15
    return Instance([f"m{i}" for i in range(4)], [1.0] * 4, P.tolist())


def _equal(L: int) -> Instance:
    return Instance([f"m{i}" for i in range(L)], [1.0] * L, [[0.5] * L for _ in range(L)], require_condorcet=False)


@pytest.mark.parametrize(
    "name, inst, n, cap",
    [
        ("near-tie cycle over two", _cycle_over(2, 0.05), 400, 30_000),
        ("near-tie cycle over five", _cycle_over(5, 0.08), 300, 30_000),
        ("winner over seven equals", _winner_over_equals(8, 0.04), 300, 400_000),
        ("winner over a 3-cycle", _winner_over_cycle(0.02), 300, 400_000),
        ("five equal models", _equal(5), 300, 3_000),
    ],
)
def test_every_verdict_is_wrong_within_delta_at_the_product_level(name, inst, n, cap):
    r = simulate(inst, "dctas-pc", DELTA, n, seed=21, max_steps=cap)
    cw = inst.condorcet_winner
    assert _wrong(r, cw) <= _limit(n), (name, _wrong(r, cw))
    if cw is not None:
        assert (r.stopped & (r.recommended == cw)).sum() >= n - _limit(n)  # the winner is found
    elif name.startswith("near-tie cycle"):
        assert r.no_condorcet_winner.mean() > 0.9  # the right verdict is reached, beta and all


def test_no_winner_waits_for_every_model_beaten_at_beta():
    """On a clear cycle over six models the verdict is "no Condorcet winner"; the policy stepping through a
    simulated trial's duels makes the same choices and stops at the same duel, with every model beaten at
    beta (its own check, on its own wealth)."""
    inst = _cycle_over(3, 0.2)
    r = simulate(inst, "dctas-pc", DELTA, 60, seed=3, max_steps=200_000)
    assert r.stopped.all() and r.no_condorcet_winner.all()
    t = trace_trial(inst, "dctas-pc", DELTA, seed=4)
    assert t["stopped"] and t["recommended"] == -2
    pol = make_policy("dctas-pc", inst.costs, DELTA)
    waited = None  # the state of the first duel at which the verdict waited for beta
    for pair, s in zip(t["pairs"], t["scores"]):
        assert not pol.stopped
        assert pol.next_pair() == pair
        pol.record(*pair, float(s))
        if waited is None and pol.no_winner_waits():
            waited = pol.to_state()
    assert pol.stopped and pol.verdict == NO_CONDORCET_WINNER and not pol.no_winner_waits()
    assert waited is not None  # every model was beaten at alpha before each was at beta
    # the campaign view says so (service.campaigns.verdicts.pc_evidence reads the stored state)
    from service.campaigns.verdicts import pc_evidence

    ev = pc_evidence("dctas-pc", waited, list(inst.names), "running")
    assert ev is not None and ev["no_winner_waits"] is True and ev["level"] == "product"
    assert ev["no_winner_log_threshold"] == pytest.approx(no_winner_log_level(DELTA, 6, "product"))
    assert len(ev["losers"]) == 6  # every model shown beaten, at alpha
    done = pc_evidence("dctas-pc", pol.to_state(), list(inst.names), "no_condorcet_winner")
    assert done is not None and done["no_winner_waits"] is False
    LW, beta_thr = pol.certificate_log_wealth(), no_winner_log_level(DELTA, 6, "product")
    assert LW is not None and beta_thr > pol.certificate_log_threshold
    assert all((LW[m] >= beta_thr).any() for m in range(6)), LW  # every model beaten at beta
