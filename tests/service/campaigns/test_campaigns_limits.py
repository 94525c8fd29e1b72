"""A campaign's limits (service/campaigns/limits.py): its duel cap counts the duels done and in flight."""

from __future__ import annotations

from service.campaigns.limits import max_duels_reached


def test_the_duel_cap_counts_the_duels_done_and_in_flight():
    assert max_duels_reached(10, 7, 3) and not max_duels_reached(10, 7, 2)
    assert not max_duels_reached(None, 10**9, 10**9)
