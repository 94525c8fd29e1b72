"""Run leases are timed by the database's clock, never by a worker's (service/db.py ``Database.clock``).

A worker whose clock runs 30 s ahead must not take a healthy owner's run (on the code before it
did, at once, orphaning the duels in flight); one whose clock runs 30 s behind must take over a
run whose lease has expired (before, it waited 30 s more). The campaign view's ``run.active`` and the delete's
refusal read a draining run's lease by the same clock. SQLite and PostgreSQL.
"""

from __future__ import annotations

import datetime as dt

import pytest
from conftest import make_settings
from service_helpers import campaign_body, simulated_judge, skew_clock

from service.campaigns.leases import Leases
from service.db import Database
from service.models import Campaign, utcnow


@pytest.fixture
def db(db_url):
    d = Database(db_url)
    yield d
    d.dispose()


def _campaign_with_run(api, db: Database, lease_left_s: float) -> int:
    from service.schemas import CampaignCreate

    body = campaign_body("lease clock", judge=simulated_judge())
    cid = api.app.state.campaigns.lifecycle.create_campaign(CampaignCreate.model_validate(body))
    with db.write() as s:
        c = db.lock_campaign(s, cid)
        c.run_active, c.run_owner, c.run_concurrency = True, "healthy:1:owner", 1
        c.run_lease_expires_at = utcnow() + dt.timedelta(seconds=lease_left_s)  # the one host's true time
    return cid


def _owner(db: Database, cid: int) -> str | None:
    with db.read() as s:
        return s.get(Campaign, cid).run_owner


async def test_a_worker_clock_ahead_does_not_take_a_healthy_owners_run(api, db, db_url, monkeypatch):
    cid = _campaign_with_run(api, db, lease_left_s=20.0)
    skew_clock(monkeypatch, 30.0)
    skewed = Leases(make_settings(db_url), db, "skewed:2:ahead")
    assert cid not in [t[0] for t in skewed.take_over_runs_tx()]
    assert _owner(db, cid) == "healthy:1:owner"
    # nor may it start a second run over the live lease
    from service.campaigns.types import Conflict

    lifecycle = api.app.state.campaigns.lifecycle
    monkeypatch.setattr(lifecycle, "leases", skewed)
    with pytest.raises(Conflict, match="already active"):
        lifecycle.start_run_tx(cid, None, 1)


async def test_a_worker_clock_behind_takes_over_an_expired_lease_at_once(api, db, db_url, monkeypatch):
    cid = _campaign_with_run(api, db, lease_left_s=-1.0)  # its owner died; the lease ran out
    skew_clock(monkeypatch, -30.0)
    late = Leases(make_settings(db_url), db, "skewed:3:behind")
    assert cid in [t[0] for t in late.take_over_runs_tx()]
    assert _owner(db, cid) == "skewed:3:behind"
    with db.read() as s:  # the new lease is the database's now plus the lease, not the skewed clock's
        expires = s.get(Campaign, cid).run_lease_expires_at
        assert abs((expires - utcnow()).total_seconds() - late.lease_length.total_seconds()) < 5


def _stopped_while_draining(api, db: Database, lease_left_s: float) -> int:
    """A stopped campaign whose run's owner still holds its lease (by the database's clock): its task records
    the duels it has in flight (service/campaigns/expiry.py ``run_under_way``)."""
    from service.schemas import CampaignCreate

    body = campaign_body("draining run", judge=simulated_judge())
    lifecycle = api.app.state.campaigns.lifecycle
    cid = lifecycle.create_campaign(CampaignCreate.model_validate(body))
    lifecycle.stop_tx(cid)
    with db.write() as s:
        c = db.lock_campaign(s, cid)
        c.run_owner, c.run_concurrency = "draining:1:owner", 1
        c.run_lease_expires_at = utcnow() + dt.timedelta(seconds=lease_left_s)  # the one host's true time
    return cid


@pytest.mark.parametrize("skew", [30.0, -30.0])
async def test_the_view_and_delete_time_a_draining_runs_lease_by_the_database_clock(api, db, monkeypatch, skew):
    """A worker whose clock runs 30 s ahead must still report a stopped campaign's draining run active and refuse
    to delete the campaign under it (on the code before, it read the lease by its own clock: the run inactive, the
    spend not final, and the delete went through); one 30 s behind must report a lapsed lease's run inactive."""
    live = _stopped_while_draining(api, db, lease_left_s=20.0)
    lapsed = _stopped_while_draining(api, db, lease_left_s=-1.0)  # its owner died; nothing more is recorded
    skew_clock(monkeypatch, skew, modules=("service.campaigns.views", "service.campaigns.removal"))
    assert (await api.get(f"/v1/campaigns/{live}")).json()["run"]["active"] is True
    listed = {v["id"]: v["run"]["active"] for v in (await api.get("/v1/campaigns")).json()["items"]}
    assert listed[live] is True and listed[lapsed] is False
    r = await api.delete(f"/v1/campaigns/{live}")
    assert r.status_code == 409 and "background run has not ended yet" in r.json()["detail"], r.text
    assert (await api.get(f"/v1/campaigns/{lapsed}")).json()["run"]["active"] is False
    assert (await api.delete(f"/v1/campaigns/{lapsed}")).status_code == 200
