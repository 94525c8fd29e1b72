"""Archive and delete (service/campaigns/removal.py) on SQLite and PostgreSQL: an archived campaign
leaves the lists and keeps every row; a running campaign cannot be deleted; a deleted one is gone
with its duels and ledger, and the answers it paid for stay in the shared store or go, as asked."""

from __future__ import annotations

import time

from service_helpers import all_duels, campaign_body
from sqlalchemy import func, select
from test_audit_trail import _body, _duels

from service.models import Charge, Duel, StoredAnswer


async def test_an_archived_campaign_leaves_the_lists_and_keeps_its_rows(api):
    keep = (await api.post("/v1/campaigns", json=campaign_body("stays listed"))).json()["id"]
    cid = (await api.post("/v1/campaigns", json=campaign_body("to archive"))).json()["id"]
    assert (await api.post(f"/v1/campaigns/{cid}/duels")).status_code == 201
    r = await api.post(f"/v1/campaigns/{cid}/archive")
    assert r.status_code == 200 and r.json()["archived"] is True and r.json()["archived_at"]
    assert (await api.post(f"/v1/campaigns/{cid}/archive")).json()["archived_at"] == r.json()["archived_at"]
    listed = {c["id"] for c in (await api.get("/v1/campaigns", params={"limit": 500})).json()["items"]}
    assert cid not in listed and keep in listed
    archived = (await api.get("/v1/campaigns", params={"archived": "true", "limit": 500})).json()["items"]
    assert cid in {c["id"] for c in archived} and keep not in {c["id"] for c in archived}
    view = (await api.get(f"/v1/campaigns/{cid}")).json()
    assert view["archived_at"] and view["duels_created"] == 1  # readable by id, nothing lost
    page = (await api.get("/")).text
    assert f'data-id="{cid}"' not in page and f'data-id="{keep}"' in page
    assert (await api.post(f"/v1/campaigns/{cid}/unarchive")).json()["archived"] is False
    listed = {c["id"] for c in (await api.get("/v1/campaigns", params={"limit": 500})).json()["items"]}
    assert cid in listed
    assert (await api.post("/v1/campaigns/999999999/archive")).status_code == 404


async def test_delete_refuses_a_running_campaign_and_removes_an_ended_one(api):
    cid = (await api.post("/v1/campaigns", json=campaign_body("to delete"))).json()["id"]
    duel = (await api.post(f"/v1/campaigns/{cid}/duels")).json()["id"]
    r = await api.delete(f"/v1/campaigns/{cid}")
    assert r.status_code == 409 and "stop it first" in r.text
    assert (await api.get(f"/v1/duels/{duel}")).status_code == 200  # nothing was removed
    assert (await api.post(f"/v1/campaigns/{cid}/stop")).status_code == 200
    assert (await api.delete(f"/v1/campaigns/{cid}", params={"stored": "maybe"})).status_code == 422
    r = await api.delete(f"/v1/campaigns/{cid}")
    assert r.status_code == 200 and r.json() == {
        "id": cid,
        "deleted": True,
        "stored": "keep",
        "stored_removed": {"answers": 0, "verdicts": 0},
    }
    assert (await api.get(f"/v1/campaigns/{cid}")).status_code == 404
    assert (await api.get(f"/v1/duels/{duel}")).status_code == 404
    assert (await api.delete(f"/v1/campaigns/{cid}")).status_code == 404
    db = api.app.state.db
    with db.read() as s:
        assert s.scalar(select(func.count(Charge.id)).where(Charge.campaign_id == cid)) == 0
        assert s.scalar(select(func.count(Duel.id)).where(Duel.campaign_id == cid)) == 0


async def test_the_answers_it_paid_for_stay_in_the_store_or_go_as_asked(api, fake):
    tag = f"rm{time.monotonic_ns()}"
    db = api.app.state.db
    ids = []
    for stored in ("keep", "remove"):
        cid = (await api.post("/v1/campaigns", json=_body(f"{tag}{stored}", stored))).json()["id"]
        await _duels(api, cid, 4)
        assert [d for d in await all_duels(api, cid) if d["status"] == "judged"]
        ids.append((cid, stored))
    for cid, stored in ids:
        await api.post(f"/v1/campaigns/{cid}/stop")
        with db.read() as s:
            charges = list(s.scalars(select(Charge.id).where(Charge.campaign_id == cid)))
            before = s.scalar(select(func.count(StoredAnswer.id)).where(StoredAnswer.charge_id.in_(charges)))
        assert before > 0
        out = (await api.delete(f"/v1/campaigns/{cid}", params={"stored": stored})).json()
        with db.read() as s:  # the charge rows went with the campaign; the store rows that named them:
            left = s.scalar(select(func.count(StoredAnswer.id)).where(StoredAnswer.charge_id.in_(charges)))
        if stored == "keep":
            assert out["stored_removed"] == {"answers": 0, "verdicts": 0} and left == before
        else:
            assert out["stored_removed"]["answers"] == before and out["stored_removed"]["verdicts"] > 0 and left == 0


async def test_delete_waits_for_a_stopped_campaigns_batch_and_calls_still_under_way(api):
    """A stopped run's batch is still at the provider (cancelled, its finished part still to be collected and
    charged) and a pre-generated answer's call still holds budget: delete is a 409 until they end; an open batch
    row older than its window and the grace is a dead worker's and blocks nothing."""
    import datetime as dt

    from service.models import BatchJob, BudgetHold, utcnow

    cid = (await api.post("/v1/campaigns", json=campaign_body("batch in flight"))).json()["id"]
    assert (await api.post(f"/v1/campaigns/{cid}/stop")).status_code == 200
    db = api.app.state.db
    now = utcnow()
    with db.write() as s:
        job = BatchJob(
            campaign_id=cid,
            round=1,
            phase="answers",
            key="llmduel-x",
            client={"kind": "openai"},
            status="running",
            requests=[],
            owner="w",
            created_at=now,
            updated_at=now,
        )
        s.add(job)
        s.add(BudgetHold(campaign_id=cid, amount_nusd=5, purpose="pregeneration", created_at=now, expires_at=now))
        s.flush()
        job_id = job.id
    r = await api.delete(f"/v1/campaigns/{cid}")
    assert r.status_code == 409 and "still at the provider" in r.json()["detail"]
    assert (await api.get(f"/v1/campaigns/{cid}")).status_code == 200  # nothing was removed
    with db.write() as s:
        s.get(BatchJob, job_id).status = "cancelled"
        s.add(
            BudgetHold(
                campaign_id=cid,
                amount_nusd=5,
                purpose="pregeneration",
                created_at=now,
                expires_at=now + dt.timedelta(minutes=5),
            )
        )
    r = await api.delete(f"/v1/campaigns/{cid}")
    assert r.status_code == 409 and "under way" in r.json()["detail"]
    with db.write() as s:
        s.execute(BudgetHold.__table__.delete().where(BudgetHold.campaign_id == cid))
        s.get(BatchJob, job_id).status = "running"
        s.get(BatchJob, job_id).created_at = now - dt.timedelta(days=3)  # past any window: a dead worker's row
    r = await api.delete(f"/v1/campaigns/{cid}")
    assert r.status_code == 200 and r.json()["deleted"] is True
    with db.read() as s:
        assert s.get(BatchJob, job_id) is None
