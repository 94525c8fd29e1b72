"""Annotator tokens: cached per process while its revocation watch is fresh, refused by
every process within REVOCATION_SECONDS of a revocation (SQLite and PostgreSQL).

Two apps on one database stand for two workers of ``llmduel serve --workers 2``.
"""

from __future__ import annotations

import asyncio
import time

import pytest
from conftest import app_client
from service_helpers import campaign_body

from service import auth


@pytest.fixture
async def two_workers(db_url, monkeypatch):
    lookups = {"n": 0}
    real = auth.TokenCache.lookup

    def counted(tokens, digest):
        if tokens.cached(digest) is None:
            lookups["n"] += 1
        return real(tokens, digest)

    monkeypatch.setattr(auth.TokenCache, "lookup", counted)
    async with app_client(db_url) as one, app_client(db_url) as two:
        clients = [one, two]
        apps = [c.app for c in clients]
        watches = [a.state.campaigns.background.spawn(auth.watch_revocations(a.state.campaigns.tokens)) for a in apps]
        yield apps, clients, watches, lookups
        for w in watches:
            w.cancel()


async def _token(client) -> tuple[int, dict, str]:
    r = await client.post("/v1/campaigns", json=campaign_body(name="token cache"))
    assert r.status_code == 201, r.text
    cid = r.json()["id"]
    r = await client.post(f"/v1/campaigns/{cid}/annotators", json={"label": "ann"})
    assert r.status_code == 201, r.text
    return cid, r.json(), r.json()["token"]


async def _wait_for_watch(app) -> None:
    for _ in range(100):
        if time.monotonic() - app.state.campaigns.tokens.polled_at < auth.REVOCATION_SECONDS:
            return
        await asyncio.sleep(0.05)
    raise AssertionError("the revocation watch never polled")


async def test_a_cached_token_costs_no_lookup_and_a_revocation_reaches_the_other_worker(two_workers):
    apps, (a, b), _, lookups = two_workers
    cid, annotator, token = await _token(a)
    await _wait_for_watch(apps[1])
    who = {"Authorization": f"Bearer {token}"}
    before = lookups["n"]
    for _ in range(20):
        assert (await b.get(f"/v1/campaigns/{cid}", headers=who)).status_code == 200
    assert lookups["n"] - before == 1  # looked up once, then trusted from the cache

    r = await a.delete(f"/v1/campaigns/{cid}/annotators/{annotator['id']}")
    assert r.status_code == 200, r.text
    assert (await a.get(f"/v1/campaigns/{cid}", headers=who)).status_code == 401  # at once where revoked
    t0 = time.monotonic()
    while (await b.get(f"/v1/campaigns/{cid}", headers=who)).status_code == 200:
        assert time.monotonic() - t0 < auth.REVOCATION_SECONDS + 0.5, "the other worker still accepts the token"
        await asyncio.sleep(0.05)


async def test_without_a_fresh_watch_the_cache_is_not_trusted(two_workers):
    apps, (a, b), watches, lookups = two_workers
    cid, annotator, token = await _token(a)
    await _wait_for_watch(apps[1])
    who = {"Authorization": f"Bearer {token}"}
    assert (await b.get(f"/v1/campaigns/{cid}", headers=who)).status_code == 200
    watches[1].cancel()  # the watch of worker b stops (as when its polls fail)
    apps[1].state.campaigns.tokens.polled_at -= auth.REVOCATION_SECONDS  # its last poll is now too old
    before = lookups["n"]
    for _ in range(3):
        assert (await b.get(f"/v1/campaigns/{cid}", headers=who)).status_code == 200
    assert lookups["n"] - before == 3  # every request looks the token up
    r = await a.delete(f"/v1/campaigns/{cid}/annotators/{annotator['id']}")
    assert r.status_code == 200, r.text
    assert (await b.get(f"/v1/campaigns/{cid}", headers=who)).status_code == 401  # refused at once


async def test_a_revocation_stamped_by_a_clock_far_behind_is_still_seen(two_workers):
    """The watch compares no clocks: a worker whose clock is a day behind revokes, and the
    other worker refuses the token within REVOCATION_SECONDS all the same."""
    import datetime as dt

    from sqlalchemy import update

    from service.models import Annotator, utcnow

    apps, (a, b), _, _ = two_workers
    cid, annotator, token = await _token(a)
    await _wait_for_watch(apps[1])
    who = {"Authorization": f"Bearer {token}"}
    assert (await b.get(f"/v1/campaigns/{cid}", headers=who)).status_code == 200  # cached in b
    with apps[0].state.db.write() as s:
        s.execute(
            update(Annotator).where(Annotator.id == annotator["id"]).values(revoked_at=utcnow() - dt.timedelta(days=1))
        )
    t0 = time.monotonic()
    while (await b.get(f"/v1/campaigns/{cid}", headers=who)).status_code == 200:
        assert time.monotonic() - t0 < auth.REVOCATION_SECONDS + 0.5, "the other worker still accepts the token"
        await asyncio.sleep(0.05)
