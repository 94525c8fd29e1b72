"""The seeded draws of a campaign (service/campaigns/draws.py): every prompt and both sides come up,
and the same seed and duel number draw the same."""

from __future__ import annotations

from service.campaigns.draws import draw_prompt_and_side


def test_the_seeded_draws():
    draws = {draw_prompt_and_side(7, n, 5) for n in range(1, 200)}
    assert {p for p, _ in draws} == set(range(5)) and {s for _, s in draws} == {True, False}
    assert draw_prompt_and_side(7, 3, 5) == draw_prompt_and_side(7, 3, 5)
