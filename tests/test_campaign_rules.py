"""The campaign's pure rules (limits, expiry, draws, scoring, plain values) that every transaction path shares,
the HTTP status of each domain error, and the hot path's statements compiled from Core."""

from __future__ import annotations

import datetime as dt

import pytest

from service.api.errors import domain_status
from service.campaigns.draws import draw_prompt_and_side
from service.campaigns.expiry import is_stale
from service.campaigns.limits import max_duels_reached
from service.campaigns.pairs import ordered_pair
from service.campaigns.scoring import score_of
from service.campaigns.types import CampaignEnded, Conflict, DomainError, Forbidden, NotFound, Unprocessable
from service.cycle import pg_driver
from service.money import budget, reserve
from service.plain_values import _np_default, jsonable

MODELS = [{"name": "a", "cost": 0.001}, {"name": "b", "cost": 0.002}, {"name": "c", "cost": 0.004}]


def test_expected_judge_cost_is_the_mean_so_far_rounded_up():
    assert reserve.expected_judge_nusd(0, 5) == 0
    assert reserve.expected_judge_nusd(10, 3) == 4  # 3.33 -> 4
    assert reserve.expected_judge_nusd(9, 3) == 3
    assert reserve.expected_judge_nusd(7, 0) == 7  # no duel done yet: the spend so far
    assert reserve.expected_duel_nusd(MODELS, 0, 2, 10, 3) == 5_000_000 + 4


def test_budget_reservation_and_end_conditions():
    assert not budget.over_budget(None, 10**12, 10**12, 10**12)
    assert not budget.over_budget(100, 50, 30, 20)  # exactly the budget fits
    assert budget.over_budget(100, 50, 30, 21)
    assert max_duels_reached(10, 7, 3) and not max_duels_reached(10, 7, 2)
    assert not max_duels_reached(None, 10**9, 10**9)
    assert budget.budget_spent(100, 100) and not budget.budget_spent(100, 99) and not budget.budget_spent(None, 1)
    now = dt.datetime(2026, 1, 1, tzinfo=dt.timezone.utc)
    assert is_stale(now, now) and not is_stale(now + dt.timedelta(microseconds=1), now)


def test_pair_order_and_the_seeded_draws():
    assert ordered_pair(3, 1) == (1, 3) and ordered_pair(1, 3) == (1, 3)
    draws = {draw_prompt_and_side(7, n, 5) for n in range(1, 200)}
    assert {p for p, _ in draws} == set(range(5)) and {s for _, s in draws} == {True, False}
    assert draw_prompt_and_side(7, 3, 5) == draw_prompt_and_side(7, 3, 5)


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


def test_each_domain_error_has_its_http_status():
    assert [
        domain_status(e("x")) for e in (NotFound, Conflict, CampaignEnded, Forbidden, Unprocessable, DomainError)
    ] == [404, 409, 409, 403, 422, 400]
    assert not hasattr(DomainError("x"), "status_code")


def test_the_asyncpg_statements_are_the_core_statements_compiled_once():
    for compiled in (
        pg_driver.PG_IN_FLIGHT,
        pg_driver.PG_LOCK_FOR_PLAN,
        pg_driver.PG_VOTED,
        pg_driver._pg_plan_write(("campaign_id", "status", "number")),
    ):
        assert "%(" not in compiled.sql
        assert [f"${n}" in compiled.sql for n in range(1, len(compiled.names) + 1)] == [True] * len(compiled.names)
    assert pg_driver.PG_IN_FLIGHT.names == ("cid",)
    assert "'calling'" in pg_driver.PG_IN_FLIGHT.sql and "'pending'" in pg_driver.PG_IN_FLIGHT.sql
    assert pg_driver.PG_VOTED.sql.startswith("WITH u AS") and "FOR UPDATE" in pg_driver.PG_LOCK_FOR_PLAN.sql


# ---------------------------------------------------------------- jsonable: the JSON round trip, without it
def _round_trip(value):
    import json

    return json.loads(json.dumps(value, default=_np_default))


def _same(a, b) -> bool:
    """Equal as JSON values, and of the same Python types (1 vs 1.0 vs True), NaN equal to NaN."""
    import math

    if type(a) is not type(b):
        return False
    if isinstance(a, dict):
        return list(a) == list(b) and all(_same(a[k], b[k]) for k in a)
    if isinstance(a, list):
        return len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b))
    if isinstance(a, float) and math.isnan(a):
        return math.isnan(b)
    return a == b


def test_jsonable_equals_the_json_round_trip_on_generated_values():
    import numpy as np
    from hypothesis import given, settings
    from hypothesis import strategies as st

    from algorithms.vocabulary import CampaignStatus

    scalars = st.one_of(
        st.none(),
        st.booleans(),
        st.integers(-(2**70), 2**70),
        st.floats(allow_nan=True, allow_infinity=True),
        st.text(max_size=8),
        st.sampled_from(list(CampaignStatus)),
        st.integers(-(2**31), 2**31).map(np.int64),
        st.floats(allow_nan=False, width=32).map(np.float32),
        st.floats().map(np.float64),
        st.booleans().map(np.bool_),
    )
    values = st.recursive(
        scalars,
        lambda inner: st.one_of(
            st.lists(inner, max_size=4),
            st.lists(inner, max_size=4).map(tuple),
            st.dictionaries(st.text(max_size=5), inner, max_size=4),
            st.dictionaries(st.integers(-3, 3), inner, max_size=3),  # non-string keys: the round trip's own way
            st.lists(st.floats(allow_nan=False), max_size=4).map(np.array),
        ),
        max_leaves=20,
    )

    @settings(max_examples=400, deadline=None)
    @given(values)
    def check(value):
        assert _same(jsonable(value), _round_trip(value))

    check()


def test_jsonable_of_a_policy_snapshot_is_what_the_round_trip_gives():
    import numpy as np

    from algorithms import make_policy

    policy = make_policy("dctas-pc", [1.0, 2.0, 3.0, 1.0], 0.01)
    rng = np.random.default_rng(3)
    for _ in range(200):
        i, j = policy.next_pair()
        policy.record(i, j, float(rng.choice([0.0, 0.5, 1.0])))
    for value in (policy.summary(), policy.to_state()):
        assert _same(jsonable(value), _round_trip(value))
