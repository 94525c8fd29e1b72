"""When a duel lapses (service/campaigns/expiry.py): at its expiry time, not a microsecond before."""

from __future__ import annotations

import datetime as dt

from service.campaigns.expiry import is_stale


def test_a_duel_is_stale_from_its_expiry_time_on():
    now = dt.datetime(2026, 1, 1, tzinfo=dt.timezone.utc)
    assert is_stale(now, now) and not is_stale(now + dt.timedelta(microseconds=1), now)
