"""The portfolio certificate of benchmarks/bench_pooled.py: one Ville level shared by the models.

Its validity argument (docs/algorithms.md, "The portfolio test") bounds every wrong verdict by
delta through one supermartingale; these seeded checks could refute it on the instances where
that bound is nearly attained (two equal models, two equal leaders over a third).
"""

import importlib.util
import pathlib

import numpy as np
import pytest
from scipy.stats import binom

from algorithms.instances import resolve_instance
from algorithms.simulator import simulate

_PATH = pathlib.Path(__file__).resolve().parents[1] / "benchmarks" / "bench_pooled.py"
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
        ("two equal models", bench.equal_models(2), 600, 20_000),
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
