"""The budget's rules (service/money/budget.py): spend + reserved + new <= budget, and when it is spent."""

from __future__ import annotations

from service.money import budget


def test_budget_reservation_and_end_conditions():
    assert not budget.over_budget(None, 10**12, 10**12, 10**12)
    assert not budget.over_budget(100, 50, 30, 20)  # exactly the budget fits
    assert budget.over_budget(100, 50, 30, 21)
    assert budget.budget_spent(100, 100) and not budget.budget_spent(100, 99) and not budget.budget_spent(None, 1)
