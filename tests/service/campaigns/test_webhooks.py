"""Webhooks from the durable outbox: signed, only 2xx delivered, retried, resent after a crash.

The receiver is a real HTTP server on 127.0.0.1; it checks each request with the
verification code published in docs/reliability.md (executed from the page).
"""

from __future__ import annotations

import asyncio
import json
import re
import time
from types import SimpleNamespace

import pytest
from conftest import REPO, app_client
from service_helpers import campaign_body
from sqlalchemy import select


def documented_verifier():
    """``verify_llmduel_signature`` exactly as docs/reliability.md shows it."""
    page = (REPO / "docs" / "reliability.md").read_text()
    blocks = re.findall(r"```python\n(.*?)```", page, re.S)
    code = next(b for b in blocks if "# verify an llmduel webhook request" in b)
    namespace: dict = {}
    exec(compile(code, "docs/reliability.md", "exec"), namespace)
    return namespace["verify_llmduel_signature"]


def _hooks(db_url, **overrides):
    """``app_client`` with quick webhook retries and heartbeats."""
    values = dict(webhook_retry_seconds=0.1, webhook_timeout_seconds=2.0, run_heartbeat_seconds=0.2)
    values.update(overrides)
    return app_client(db_url, **values)


def _events(db, cid):
    from service.models import WebhookEvent

    with db.read() as s:
        rows = s.execute(select(WebhookEvent.__table__).where(WebhookEvent.campaign_id == cid)).mappings().all()
        return [SimpleNamespace(**row) for row in rows]


async def _wait_state(api, cid, state, timeout=20.0):
    deadline = time.monotonic() + timeout
    while (view := (await api.get(f"/v1/campaigns/{cid}")).json())["webhook_state"] != state:
        assert time.monotonic() < deadline, view["webhook_state"]
        await asyncio.sleep(0.05)
    return view


async def test_signed_event_redirect_and_500_retried_then_delivered(db_url, receiver_factory):
    verify = documented_verifier()
    rx = receiver_factory([307, 500, 204])
    async with _hooks(db_url) as api:
        app = api.app
        created = (await api.post("/v1/campaigns", json=campaign_body(name="hook", webhook_url=rx.url))).json()
        cid, secret = created["id"], created["webhook_secret"]
        assert secret.startswith("whsec_") and len(secret) > 40
        got = (await api.get(f"/v1/campaigns/{cid}")).json()
        assert got.get("webhook_secret") is None  # shown once, at creation only
        assert (await api.post(f"/v1/campaigns/{cid}/stop")).status_code == 200
        view = await _wait_state(api, cid, "sent")
        assert view["webhook_error"] is None  # the 307 and the 500 before were not the last word
    assert len(rx.requests) == 3  # 307 and 500 were not deliveries
    assert rx.other_paths == []  # the redirect was not followed
    ids = {r["headers"]["X-Llmduel-Event-Id"] for r in rx.requests}
    assert len(ids) == 1 and next(iter(ids)).startswith("evt_")
    assert [r["headers"]["X-Llmduel-Delivery-Attempt"] for r in rx.requests] == ["1", "2", "3"]
    assert len({r["body"] for r in rx.requests}) == 1  # the payload is frozen at the first attempt
    for r in rx.requests:
        assert r["headers"]["X-Llmduel-Event"] == "campaign.ended"
        assert verify(secret, r["body"], r["headers"]["X-Llmduel-Signature"])
        assert not verify(secret + "x", r["body"], r["headers"]["X-Llmduel-Signature"])
        assert not verify(secret, r["body"] + b" ", r["headers"]["X-Llmduel-Signature"])
    payload = json.loads(rx.requests[0]["body"])
    assert payload["id"] == next(iter(ids)) and payload["event"] == "campaign.ended"
    assert payload["campaign_id"] == cid and payload["status"] == "stopped"
    report = payload["campaign"]  # the campaign's view, not a hand-picked set of fields
    assert report["id"] == cid and report["status"] == "stopped" and report["end_reason"] == "stopped by the admin"
    assert set(view) - {"webhook_state", "updated_at", "webhook_secret"} <= set(report)
    db = app.state.db
    (ev,) = _events(db, cid)
    assert ev.state == "delivered" and ev.attempts == 3 and ev.delivered_at is not None and ev.claimed_by is None


async def test_a_receiver_that_always_fails_gets_max_attempts_then_failed(db_url, receiver_factory):
    rx = receiver_factory([500])
    async with _hooks(db_url, webhook_max_attempts=3) as api:
        app = api.app
        cid = (await api.post("/v1/campaigns", json=campaign_body(name="hook fails", webhook_url=rx.url))).json()["id"]
        await api.post(f"/v1/campaigns/{cid}/stop")
        view = await _wait_state(api, cid, "failed")
        assert view["webhook_error"] == "HTTP 500"  # the campaign view says why
        await asyncio.sleep(0.5)  # no further attempt comes
    assert len(rx.requests) == 3
    (ev,) = _events(app.state.db, cid)
    assert ev.state == "failed" and ev.last_error == "HTTP 500" and ev.delivered_at is None


async def test_a_send_interrupted_by_a_crash_is_sent_again_after_the_claim_expires(db_url, receiver_factory):
    verify = documented_verifier()
    # The first process must still be inside its request when it "dies": its timeout (2 s) leaves
    # a loaded machine time to see the request arrive and cancel it; its claims last 2 x 2 + 1 = 5 s.
    rx = receiver_factory([200], hang_first=3.0)
    async with _hooks(db_url, webhook_timeout_seconds=2.0) as api:
        first = api.app
        created = (await api.post("/v1/campaigns", json=campaign_body(name="hook crash", webhook_url=rx.url))).json()
        cid, secret = created["id"], created["webhook_secret"]
        await api.post(f"/v1/campaigns/{cid}/stop")
        deadline = time.monotonic() + 10
        while not rx.requests:  # the request reached the receiver, which holds it
            assert time.monotonic() < deadline
            await asyncio.sleep(0.02)
        first.state.campaigns.background.cancel_all()  # the process dies mid-request
        await asyncio.sleep(0.05)
        (ev,) = _events(first.state.db, cid)
        assert ev.state == "pending" and ev.attempts == 1 and ev.claimed_by == first.state.campaigns.webhooks.owner_id
        crashed = time.monotonic()
        async with _hooks(db_url, webhook_timeout_seconds=0.5) as api2:
            second = api2.app
            second.state.campaigns.keeper.ensure()  # what the app's startup does
            await _wait_state(api2, cid, "sent", timeout=60)
        assert time.monotonic() - crashed >= 3.0  # not before the claim expired
    assert len(rx.requests) == 2
    first_id, second_id = (r["headers"]["X-Llmduel-Event-Id"] for r in rx.requests)
    assert first_id == second_id  # the receiver can dedupe
    assert rx.requests[1]["headers"]["X-Llmduel-Delivery-Attempt"] == "2"
    assert all(verify(secret, r["body"], r["headers"]["X-Llmduel-Signature"]) for r in rx.requests)
    (ev,) = _events(second.state.db, cid)
    assert ev.state == "delivered" and ev.attempts == 2


async def test_processes_sending_at_once_deliver_a_due_event_once(db_url, receiver_factory):
    rx = receiver_factory([200])
    async with _hooks(db_url) as api, _hooks(db_url) as other:
        a, b = api.app, other.app
        cid = (await api.post("/v1/campaigns", json=campaign_body(name="hook race", webhook_url=rx.url))).json()["id"]
        a.state.campaigns.lifecycle.stop_tx(cid)  # the ending commits its event; nobody has sent it yet
        sent = await asyncio.gather(*(app.state.campaigns.webhooks.deliver_webhooks() for app in (a, b, a, b)))
    assert sum(sent) == 1 and len(rx.requests) == 1  # each claim is taken by one sender
    (ev,) = _events(a.state.db, cid)
    assert ev.state == "delivered" and ev.attempts == 1


# ---------------------------------------------------------------- the upgrade
@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def empty_db_url(request, tmp_path):
    """A new, empty database (not migrated) on each backend."""
    if request.param == "sqlite":
        yield f"sqlite:///{tmp_path / 'upgrade.db'}"
        return
    import uuid

    import psycopg
    from sqlalchemy.engine import make_url

    base = make_url(request.getfixturevalue("pg_url"))  # skips when no server is reachable
    name = f"llmduel_upgrade_{uuid.uuid4().hex[:8]}"
    conninfo = base.set(drivername="postgresql", database="postgres").render_as_string(hide_password=False)
    with psycopg.connect(conninfo, autocommit=True) as conn:
        conn.execute(f'CREATE DATABASE "{name}"')
    yield base.set(database=name).render_as_string(hide_password=False)
    with psycopg.connect(conninfo, autocommit=True) as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


async def test_a_webhook_left_sending_before_the_upgrade_is_delivered_after_it(empty_db_url, receiver_factory):
    from sqlalchemy import create_engine, text

    from service.db import upgrade_database

    rx = receiver_factory([200])
    upgrade_database(empty_db_url, "0001")
    engine = create_engine(empty_db_url)
    columns = (
        "name, algorithm, delta, tie_policy, status, models, n_prompts, judge, seed, webhook_url, policy_state, "
        "counts, stats, event_seq, spend_nusd, judge_spend_nusd, duels_created, duels_judged, duels_counted, "
        "duels_failed, run_active, run_concurrency, webhook_state, version, created_at, updated_at"
    )
    with engine.begin() as conn:
        for state in ("sending", "sent", "none"):  # stuck by a crash mid-send; already sent; no webhook
            conn.execute(
                text(
                    f"INSERT INTO campaigns ({columns}) VALUES ('old {state}', 'dctas', 0.05, 'half', 'stopped', "
                    f'\'[{{"name": "a", "cost": 1.0, "client": {{"kind": "simulated"}}}}]\', 1, '
                    f"'{{\"kind\": \"human\"}}', 1, '{rx.url}', '{{}}', '{{}}', '{{}}', 0, 0, 0, 0, 0, 0, 0, false, 1, "
                    f"'{state}', 0, CURRENT_TIMESTAMP, CURRENT_TIMESTAMP)"
                )
            )
        ids = dict(conn.execute(text("SELECT webhook_state, id FROM campaigns")).all())
    engine.dispose()
    upgrade_database(empty_db_url, "head")
    async with _hooks(empty_db_url) as api:
        app = api.app
        app.state.campaigns.keeper.ensure()
        await _wait_state(api, ids["sending"], "sent")
        assert (await api.get(f"/v1/campaigns/{ids['sent']}")).json()["webhook_state"] == "sent"
        assert (await api.get(f"/v1/campaigns/{ids['none']}")).json()["webhook_state"] == "none"
        await asyncio.sleep(0.5)  # one keeper beat more: nothing else is sent
    assert len(rx.requests) == 1
    payload = json.loads(rx.requests[0]["body"])
    assert payload["campaign_id"] == ids["sending"] and payload["status"] == "stopped"
    assert [e.id for e in _events(app.state.db, ids["sending"])] == [f"evt_migrated_{ids['sending']}"]
