"""The portfolio certificate of benchmarks/bench_pooled.py: one Ville level shared by the models.

Its validity argument (docs/algorithms.md, "The portfolio test") bounds every wrong verdict by
delta through one supermartingale; these seeded checks could refute it on the instances where
that bound is nearly attained (two equal models, two equal leaders over a third).
"""

import importlib.util
import json
import math

import numpy as np
import pytest
from conftest import REPO
from scipy.stats import binom

from algorithms import PolicyError, make_policy, policy_from_state
from algorithms.instances import resolve_instance
from algorithms.simulator import simulate, trace_trial

_PATH = REPO / "benchmarks" / "bench_pooled.py"
_spec = importlib.util.spec_from_file_location("bench_pooled", _PATH)
assert _spec is not None and _spec.loader is not None
bench = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(bench)

DELTA = 0.1
VARIANT = bench.VARIANTS["rho=0.1 z0=0.5 eta=3"]


def _limit(n: int) -> int:
    """The one-sided binomial check: more wrong verdicts than this refutes a rate <= delta (p = 0.001)."""
    return int(binom.ppf(0.999, n, DELTA))


def test_all_cash_at_the_start_is_the_betting_test_at_delta_over_l():
    """rho = 1 is dctas-pc's default (betting test, level delta / L): the same costs and verdicts, trial by trial."""
    inst = resolve_instance("synthetic:k=4")
    cost, rec, stop = bench.run(inst, 0.01, 40, 3, bench.VARIANTS["bonferroni (rho=1)"])
    r = simulate(inst, "dctas-pc", 0.01, 40, seed=3)
    assert np.array_equal(cost, r.costs)
    assert np.array_equal(rec, r.recommended) and stop.all()


@pytest.mark.parametrize(
    "name, inst, n, cap",
    [
        ("two equal models", bench.equal_models(2), 600, 10_000),
        ("two equal leaders over a third", bench.EQUAL_LEADERS, 600, 3_000),
    ],
)
def test_wrong_verdicts_at_most_delta_where_the_bound_is_nearly_attained(name, inst, n, cap):
    cost, rec, stop = bench.run(inst, DELTA, n, 11, VARIANT, max_steps=cap)
    wrong = bench.wrong_verdicts(inst, rec, stop)
    assert wrong <= _limit(n), name
    assert wrong > 0, name  # the check has power: the leader's cash makes false names reachable here


def test_a_near_tie_names_the_winner():
    cost, rec, stop = bench.run(bench.NEAR_TIE, DELTA, 200, 5, VARIANT)
    assert stop.all()
    assert bench.wrong_verdicts(bench.NEAR_TIE, rec, stop) <= int(binom.ppf(0.999, 200, DELTA))


# ------------------------------------------------------------------ threshold = "portfolio" in dctas-pc
PORT = bench.Instance(
    ["a", "b", "c"],
    [1.0, 2.0, 1.5],
    [[0.5, 0.6, 0.7], [0.4, 0.5, 0.55], [0.3, 0.45, 0.5]],
    ties=[[0, 0.3, 0.2], [0.3, 0, 0.4], [0.2, 0.4, 0]],
)


def _drive(inst, delta, seed, save_at):
    """Drive the step-wise policy with the simulator's own duels; round-trip its state at ``save_at``."""
    tr = trace_trial(inst, "dctas-pc", delta, seed, threshold="portfolio")
    pol = make_policy("dctas-pc", list(inst.costs), delta, threshold="portfolio")
    for t, ((i, j), s) in enumerate(zip(tr["pairs"], tr["scores"])):
        if t == save_at:
            pol = policy_from_state(json.loads(json.dumps(pol.to_state())))
        assert pol.next_pair() == (i, j), t
        pol.record(i, j, s)
    return tr, pol


@pytest.mark.parametrize("inst, seed", [(resolve_instance("synthetic:k=4"), 2), (PORT, 3)])
def test_the_policy_makes_the_simulators_decisions_and_its_state_replays(inst, seed):
    tr, pol = _drive(inst, 0.05, seed, save_at=150)
    assert tr["stopped"] and pol.stopped and pol.winner == tr["recommended"]
    state = pol.to_state()
    assert state["params"]["threshold"] == "portfolio" and set(state["portfolio"]) == {"wealth", "paid", "pool"}
    assert pol.certificate_log_threshold == pytest.approx(math.log(1 / 0.05))
    lw = pol.certificate_log_wealth()
    w = pol.winner
    assert all(lw[m, w] >= pol.certificate_log_threshold for m in range(inst.L) if m != w)


def test_the_simulator_option_is_the_research_kernel():
    """threshold = "portfolio" is bench_pooled's rho = 0.1, z0 = 0.5 variant with payments riding the mixture (eta = 1)."""
    inst = resolve_instance("synthetic:k=19")
    v = {"share": 1.0, "rho": 0.1, "z0": 0.5, "shape": 2, "eta": 1.0}
    cost, rec, stop = bench.run(inst, 0.01, 30, 4, v)
    r = simulate(inst, "dctas-pc", 0.01, 30, seed=4, threshold="portfolio")
    assert np.array_equal(cost, r.costs) and np.array_equal(rec, r.recommended)


@pytest.mark.parametrize(
    "inst, cap",
    [(bench.equal_models(2), 10_000), (bench.equal_models(3), 4_000), (bench.EQUAL_LEADERS, 3_000)],
)
def test_portfolio_option_wrong_verdicts_at_most_delta(inst, cap):
    r = simulate(inst, "dctas-pc", DELTA, 600, seed=21, max_steps=cap, threshold="portfolio")
    wrong = bench.wrong_verdicts(inst, r.recommended, r.stopped)
    assert wrong <= _limit(600)
    if inst.L == 2 or inst is bench.EQUAL_LEADERS:
        assert wrong > 0  # the bound is nearly attained there (docs/algorithms.md): the check has power


def test_portfolio_state_errors_and_goal():
    pol = make_policy("dctas-pc", [1.0, 1.0, 1.0], 0.1, threshold="portfolio")
    state = pol.to_state()
    bad = json.loads(json.dumps(state))
    bad["portfolio"]["pool"] = 5.0
    with pytest.raises(PolicyError, match="portfolio"):
        policy_from_state(bad)
    del bad["portfolio"]
    with pytest.raises(PolicyError, match="portfolio"):
        policy_from_state(bad)
    with pytest.raises(PolicyError, match="winner only"):
        make_policy("dctas-pc", [1.0, 1.0, 1.0], 0.1, threshold="portfolio", goal="ranking")


def test_the_campaign_view_reports_the_portfolio_level():
    from service.campaigns.verdicts import pc_evidence

    pol = make_policy("dctas-pc", [1.0, 1.0, 1.0], 0.05, threshold="portfolio")
    rng = np.random.default_rng(1)
    for _ in range(60):
        i, j = pol.next_pair()
        pol.record(i, j, float(rng.random() < (0.7 if i == 0 else 0.5)))
    ev = pc_evidence("dctas-pc", json.loads(json.dumps(pol.to_state())), ["a", "b", "c"], "running")
    assert ev is not None and ev["test"] == "portfolio" and ev["level"] == "delta"
    assert ev["log_threshold"] == pytest.approx(math.log(1 / 0.05)) and "pool" in ev["statistic"]
    assert len(ev["pairs"]) == 6 and all(math.isfinite(p["log_stat"]) for p in ev["pairs"])
