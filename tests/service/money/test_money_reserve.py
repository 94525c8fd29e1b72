"""What a duel reserves (service/money/reserve.py): the expected judge cost, the mean so far rounded up."""

from __future__ import annotations

from service.money import reserve

MODELS = [{"name": "a", "cost": 0.001}, {"name": "b", "cost": 0.002}, {"name": "c", "cost": 0.004}]


def test_expected_judge_cost_is_the_mean_so_far_rounded_up():
    assert reserve.expected_judge_nusd(0, 5) == 0
    assert reserve.expected_judge_nusd(10, 3) == 4  # 3.33 -> 4
    assert reserve.expected_judge_nusd(9, 3) == 3
    assert reserve.expected_judge_nusd(7, 0) == 7  # no duel done yet: the spend so far
    assert reserve.expected_duel_nusd(MODELS, 0, 2, 10, 3) == 5_000_000 + 4
