"""A pair of models as stored (service/campaigns/pairs.py): the lower index first."""

from __future__ import annotations

from service.campaigns.pairs import next_pair, ordered_pair


def test_a_pair_is_stored_lower_index_first():
    assert ordered_pair(3, 1) == (1, 3) and ordered_pair(1, 3) == (1, 3)


def test_the_policys_next_pair_is_asked_with_the_pending_pairs_and_stored_lower_index_first():
    class Policy:
        asked: list = []

        def next_pair(self, *, pending):
            self.asked.append(pending)
            return 4, 2

    policy = Policy()
    assert next_pair(policy, [[0, 1]]) == (2, 4)
    assert policy.asked == [[[0, 1]]]
