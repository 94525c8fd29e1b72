"""``campaign.settled``: the webhook event written once an ending's spend is final (``spend_final``), for a
campaign whose ``webhook_events`` asks for it (service/webhook_events.py, service/campaigns/webhooks.py
``settled_events_tx``). The receiver is a real HTTP server on 127.0.0.1 (tests/service/campaigns/test_webhooks.py's),
every request checked with the verification code docs/reliability.md publishes; SQLite and PostgreSQL."""

from __future__ import annotations

import asyncio
import json
import time

import pytest
from service_helpers import campaign_body, simulated_judge
from test_lost_commits import _body
from test_run_settled import _ledger
from test_spend_final import _gated
from test_webhooks import _events, _hooks, documented_verifier

BOTH = ["campaign.ended", "campaign.settled"]


async def _until(what: str, cond, timeout: float = 60.0):
    deadline = time.monotonic() + timeout
    while not (got := cond()):
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        await asyncio.sleep(0.02)
    return got


def _payloads(rx) -> list[tuple[str, dict]]:
    return [(r["headers"]["X-Llmduel-Event"], json.loads(r["body"])) for r in rx.requests]


async def test_the_settled_event_carries_the_final_spend_after_the_run_drains(db_url, receiver_factory):
    """A run stopped while its duel's answers are held at the provider: campaign.ended goes out at once with a
    spend that is not final; no campaign.settled is written while the answers are out; once they are stored
    (charged late) and the run has drained, campaign.settled goes out with spend_final true and the spend equal
    to the ledger, signed like every event."""
    verify = documented_verifier()
    rx = receiver_factory([200])
    async with _hooks(db_url, run_lease_seconds=600.0, run_heartbeat_seconds=0.2) as api:
        gate, calls = _gated(api.app)
        try:
            body = dict(_body("settled-hook"), webhook_url=rx.url, webhook_events=BOTH)
            created = (await api.post("/v1/campaigns", json=body)).json()
            cid, secret = created["id"], created["webhook_secret"]
            assert created["webhook_events"] == BOTH
            assert (await api.post(f"/v1/campaigns/{cid}/run", json={"concurrency": 1})).status_code == 202
            await _until("both answers held at the provider", lambda: gate.waiting >= 2)
            assert (await api.post(f"/v1/campaigns/{cid}/stop")).status_code == 200
            await _until("campaign.ended delivered", lambda: len(rx.requests) >= 1)
            webhooks = api.app.state.campaigns.webhooks
            assert webhooks.settled_events_tx() == 0  # the answers are still out: not final
            assert [e.event_type for e in _events(api.app.state.db, cid)] == ["campaign.ended"]
            gate.open.set()
            await _until("campaign.settled delivered", lambda: len(rx.requests) >= 2)
            await _until("the campaign to mirror it", lambda: _events(api.app.state.db, cid)[-1].state == "delivered")
            spend, total, late = _ledger(api.app, cid)
            view = (await api.get(f"/v1/campaigns/{cid}")).json()
        finally:
            gate.open.set()
            await calls._http.aclose()
            calls._http = None
    (ended_type, ended), (settled_type, settled) = _payloads(rx)
    assert (ended_type, settled_type) == ("campaign.ended", "campaign.settled")
    assert ended["campaign"]["spend_final"] is False
    assert settled["event"] == "campaign.settled" and settled["campaign_id"] == cid
    assert settled["campaign"]["spend_final"] is True and settled["campaign"]["run"]["active"] is False
    assert late == 2 and round(settled["campaign"]["spend"] * 1e9) == spend == total > 0
    assert settled["campaign"]["spend"] > ended["campaign"]["spend"]  # the late answers are in it
    assert all(verify(secret, r["body"], r["headers"]["X-Llmduel-Signature"]) for r in rx.requests)
    assert len({r["headers"]["X-Llmduel-Event-Id"] for r in rx.requests}) == 2
    assert view["webhook_state"] == "sent" and view["spend_final"] is True


async def test_each_ending_sends_the_events_asked_for(db_url, receiver_factory):
    """campaign.settled alone: no campaign.ended; a campaign continued and ended again gets a second
    campaign.settled; a campaign that asked for nothing in particular gets campaign.ended alone."""
    rx = receiver_factory([200])
    judge = simulated_judge([[0.5, 0.9], [0.1, 0.5]])
    async with _hooks(db_url) as api:
        only = campaign_body(name="settled only", costs=(0.01, 0.02), judge=judge, max_duels=2, webhook_url=rx.url)
        cid = (await api.post("/v1/campaigns", json=dict(only, webhook_events=["campaign.settled"]))).json()["id"]
        plain = campaign_body(name="ended only", costs=(0.01, 0.02), judge=judge, max_duels=1, webhook_url=rx.url)
        other = (await api.post("/v1/campaigns", json=plain)).json()
        assert other["webhook_events"] == ["campaign.ended"]
        for _ in range(2):
            assert (await api.post(f"/v1/campaigns/{cid}/duels")).status_code == 201
        assert (await api.post(f"/v1/campaigns/{other['id']}/duels")).status_code == 201
        await _until("two events delivered", lambda: len(rx.requests) >= 2)
        r = await api.patch(f"/v1/campaigns/{cid}", json={"max_duels": 4})
        assert r.status_code == 200 and r.json()["status"] == "running", r.text
        for _ in range(2):
            assert (await api.post(f"/v1/campaigns/{cid}/duels")).status_code == 201
        await _until("the second ending's event", lambda: len(rx.requests) >= 3)
        db = api.app.state.db
        events = {c: [e.event_type for e in _events(db, c)] for c in (cid, other["id"])}
    assert events == {cid: ["campaign.settled", "campaign.settled"], other["id"]: ["campaign.ended"]}, events
    by_campaign = [(t, p["campaign_id"], p["campaign"]["duels"]) for t, p in _payloads(rx)]
    assert sorted(by_campaign) == sorted(
        [("campaign.settled", cid, 2), ("campaign.ended", other["id"], 1), ("campaign.settled", cid, 4)]
    )


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        ({"webhook_events": ["campaign.settled"]}, "needs a webhook_url"),
        ({"webhook_url": "https://example.com/hook", "webhook_events": []}, "webhook_events"),
        ({"webhook_url": "https://example.com/hook", "webhook_events": ["campaign.started"]}, "webhook_events"),
        (
            {"webhook_url": "https://example.com/hook", "webhook_events": ["campaign.ended", "campaign.ended"]},
            "at most once",
        ),
    ],
    ids=["no-url", "empty", "unknown", "twice"],
)
async def test_a_bad_choice_of_events_is_a_422_naming_it(api, extra, message):
    r = await api.post("/v1/campaigns", json=dict(campaign_body(name="bad events"), **extra))
    assert r.status_code == 422 and message in r.text, r.text
    assert "bad events" not in [
        c["name"] for c in (await api.get("/v1/campaigns", params={"limit": 200})).json()["items"]
    ]
