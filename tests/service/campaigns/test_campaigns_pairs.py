"""A pair of models as stored (service/campaigns/pairs.py): the lower index first."""

from __future__ import annotations

from service.campaigns.pairs import ordered_pair


def test_a_pair_is_stored_lower_index_first():
    assert ordered_pair(3, 1) == (1, 3) and ordered_pair(1, 3) == (1, 3)
