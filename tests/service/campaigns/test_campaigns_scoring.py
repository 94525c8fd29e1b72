"""The score of a verdict under each tie policy (service/campaigns/scoring.py)."""

from __future__ import annotations

import pytest

from service.campaigns.scoring import score_of


@pytest.mark.parametrize("tie_policy", ["drop", "half", "random"])
def test_scores_under_each_tie_policy(tie_policy):
    # model_i = 0 shown as "b" (a_is_i False): a vote for "b" is model_i's win
    assert score_of("b", model_i=0, model_a=1, model_b=0, tie_policy=tie_policy, seed=1, number=1) == 1.0
    assert score_of("a", model_i=0, model_a=1, model_b=0, tie_policy=tie_policy, seed=1, number=1) == 0.0
    ties = [
        score_of(c, model_i=0, model_a=0, model_b=1, tie_policy=tie_policy, seed=42, number=n)
        for c in ("tie", "both_bad")
        for n in range(1, 101)
    ]
    if tie_policy == "drop":
        assert set(ties) == {None}
    elif tie_policy == "half":
        assert set(ties) == {0.5}
    else:
        assert set(ties) == {0.0, 1.0}
        assert ties[:100] == ties[100:]  # the coin depends on the seed and the duel, not on the choice
