"""Structural assumptions (paper, Appendix C) on hand-made matrices that hold or fail by construction."""

import numpy as np
import pytest

from algorithms.assumptions import (
    check_assumptions,
    condorcet_winner,
    general_identifiability,
    low_noise_model,
    moderate_stochastic_transitivity,
    relaxed_stochastic_transitivity,
    stochastic_triangle_inequality,
    strong_stochastic_transitivity,
    total_order,
    weak_stochastic_transitivity,
)
from algorithms.bradley_terry import elo_to_preference


def from_upper(L, entries):
    """Matrix from {(i, j): p_ij} for i < j."""
    P = np.full((L, L), 0.5)
    for (i, j), p in entries.items():
        P[i, j] = p
        P[j, i] = 1 - p
    return P


# A Bradley-Terry matrix: every assumption holds.
BT = elo_to_preference([1200, 1100, 1050, 900])

# A 3-cycle 0 > 1 > 2 > 0 plus a Condorcet-free structure.
CYCLE = from_upper(3, {(0, 1): 0.6, (1, 2): 0.6, (0, 2): 0.4})

# Condorcet winner 0, but 1 > 2 > 3 > 1 cycle below it.
CW_CYCLE = from_upper(4, {(0, 1): 0.6, (0, 2): 0.6, (0, 3): 0.6, (1, 2): 0.7, (2, 3): 0.7, (1, 3): 0.3})

# Totally ordered 0 > 1 > 2 with Delta_02 = 0.12 < max(0.1, 0.15): SST fails, MST holds (>= 0.1).
SST_FAIL = from_upper(3, {(0, 1): 0.60, (1, 2): 0.65, (0, 2): 0.62})

# Totally ordered 0 > 1 > 2 with Delta_02 = 0.05 < min(0.1, 0.15): MST fails, WST holds.
MST_FAIL = from_upper(3, {(0, 1): 0.60, (1, 2): 0.65, (0, 2): 0.55})

# Totally ordered with Delta_02 = 0.4 > Delta_01 + Delta_12 = 0.2: STI fails, SST holds.
STI_FAIL = from_upper(3, {(0, 1): 0.6, (1, 2): 0.6, (0, 2): 0.9})

# 0 beats 1 (0.55) but 1 has the larger row sum (crushes 2): LNM fails.
LNM_FAIL = from_upper(3, {(0, 1): 0.55, (0, 2): 0.52, (1, 2): 0.95})

# Exact tie between 1 and 2 below a Condorcet winner: TO fails (tie), CW holds.
TIE = from_upper(3, {(0, 1): 0.7, (0, 2): 0.7, (1, 2): 0.5})


def test_bradley_terry_matrix_satisfies_everything():
    r = check_assumptions(BT, ["a", "b", "c", "d"])
    assert all(v["holds"] for v in r.values()), {k: v for k, v in r.items() if not v["holds"]}
    assert r["CW"]["winner"] == "a"
    assert r["TO"]["order"] == ["a", "b", "c", "d"]
    assert r["gamma-RST"]["gamma"] == pytest.approx(1.0)
    assert r["GIA"]["arm"] == "a"
    assert set(r) == {"LNM", "TO", "SST", "gamma-RST", "MST", "WST", "STI", "GIA", "CW"}


def test_cycle_breaks_transitivity_and_condorcet():
    assert not condorcet_winner(CYCLE)["holds"]
    to = total_order(CYCLE)
    assert not to["holds"]
    i, j, k = to["example"]["i"], to["example"]["j"], to["example"]["k"]
    assert CYCLE[i, j] > 0.5 and CYCLE[j, k] > 0.5 and CYCLE[k, i] > 0.5
    w = weak_stochastic_transitivity(CYCLE)
    assert not w["holds"]
    e = w["example"]
    assert CYCLE[e["i"], e["j"]] > 0.5 and CYCLE[e["j"], e["k"]] > 0.5 and CYCLE[e["i"], e["k"]] <= 0.5
    sti = stochastic_triangle_inequality(CYCLE)
    assert sti["holds"] is False and sti["applicable"] is False
    assert relaxed_stochastic_transitivity(CYCLE)["gamma"] == 0.0


def test_condorcet_winner_above_a_cycle():
    r = check_assumptions(CW_CYCLE, list("wxyz"))
    assert r["CW"]["holds"] and r["CW"]["winner"] == "w"
    assert not r["TO"]["holds"] and not r["WST"]["holds"] and not r["MST"]["holds"] and not r["SST"]["holds"]
    assert not r["gamma-RST"]["holds"]
    assert set(r["WST"]["example"].values()) == {"x", "y", "z"}
    assert r["STI"]["applicable"] is False and r["STI"]["holds"] is False
    # GIA: w's row does not dominate x's at k = y (0.6 < 0.7)
    assert not r["GIA"]["holds"]


def test_sst_fails_mst_holds():
    s = strong_stochastic_transitivity(SST_FAIL)
    assert not s["holds"]
    assert s["example"] == {"i": 0, "j": 1, "k": 2}
    assert s["margin"] == pytest.approx(0.12 - 0.15)
    assert moderate_stochastic_transitivity(SST_FAIL)["holds"]
    assert weak_stochastic_transitivity(SST_FAIL)["holds"]
    g = relaxed_stochastic_transitivity(SST_FAIL)
    assert g["holds"] and g["gamma"] == pytest.approx(0.12 / 0.15)


def test_mst_fails_wst_holds():
    m = moderate_stochastic_transitivity(MST_FAIL)
    assert not m["holds"] and m["example"] == {"i": 0, "j": 1, "k": 2}
    assert weak_stochastic_transitivity(MST_FAIL)["holds"]
    assert total_order(MST_FAIL)["holds"]
    assert relaxed_stochastic_transitivity(MST_FAIL)["gamma"] == pytest.approx(0.05 / 0.15)


def test_sti_fails_when_the_long_edge_is_too_strong():
    s = stochastic_triangle_inequality(STI_FAIL)
    assert s["applicable"] and not s["holds"]
    assert s["example"] == {"i": 0, "j": 1, "k": 2}
    assert strong_stochastic_transitivity(STI_FAIL)["holds"]
    assert stochastic_triangle_inequality(SST_FAIL)["holds"]


def test_low_noise_model():
    r = low_noise_model(LNM_FAIL)
    assert not r["holds"]
    assert r["example"] == {"i": 0, "j": 1}
    assert low_noise_model(BT)["holds"]
    # the Condorcet winner still exists
    assert condorcet_winner(LNM_FAIL)["winner"] == 0


def test_exact_tie_breaks_total_order_only():
    to = total_order(TIE)
    assert not to["holds"] and to["example"]["tie"] is True
    assert {to["example"]["i"], to["example"]["j"]} == {1, 2}
    assert condorcet_winner(TIE)["holds"]
    assert weak_stochastic_transitivity(TIE)["holds"]  # no chain i > j > k exists


def test_general_identifiability_definition():
    # row 0 dominates: GIA holds
    assert general_identifiability(BT)["holds"]
    # 0 beats everyone, but 1 beats 2 by more than 0 does: fails at (i=0, j=1, k=2)
    P = from_upper(3, {(0, 1): 0.55, (0, 2): 0.6, (1, 2): 0.8})
    g = general_identifiability(P)
    assert not g["holds"]
    assert g["example"] == {"i": 0, "j": 1, "k": 2}
    assert condorcet_winner(P)["holds"]


def test_check_assumptions_validates_input():
    with pytest.raises(ValueError, match="square"):
        check_assumptions(np.ones((2, 3)) * 0.5)
    with pytest.raises(ValueError, match="complementary"):
        check_assumptions([[0.5, 0.7], [0.7, 0.5]])
    with pytest.raises(ValueError, match="names"):
        check_assumptions(BT, ["a"])


def test_report_is_json_safe():
    import json

    r = check_assumptions(CW_CYCLE, list("wxyz"))
    assert json.loads(json.dumps(r)) == r


def test_violation_counts():
    # SST_FAIL has exactly one chain (0 > 1 > 2) and it violates SST
    assert strong_stochastic_transitivity(SST_FAIL)["violations"] == 1
    # in the 3-cycle every rotation of the cycle is a WST-violating chain
    assert weak_stochastic_transitivity(CYCLE)["violations"] == 3
    assert low_noise_model(LNM_FAIL)["violations"] == 1
