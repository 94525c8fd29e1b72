"""``jsonable`` (service/plain_values.py): the JSON round trip of a value, without it."""

from __future__ import annotations

from service.plain_values import _np_default, jsonable


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
