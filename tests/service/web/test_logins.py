"""Dashboard logins (service/web/logins.py) on SQLite and PostgreSQL: the key only in a
POST form, a new random cookie per login, stored hashed, expiring, revoked by logout
(this login) and "sign out everywhere" (all), and tied to the admin key."""

from __future__ import annotations

import datetime as dt
import hashlib

import httpx
from conftest import ADMIN_KEY, app_client
from sqlalchemy import select, update

from service.models import DashboardLogin, utcnow
from service.web.access import COOKIE


def _client(app) -> httpx.AsyncClient:
    transport = httpx.ASGITransport(app=app, client=("203.0.113.9", 5000))
    return httpx.AsyncClient(transport=transport, base_url="http://testserver")


async def _login(app) -> str:
    async with _client(app) as c:
        r = await c.post("/login", data={"key": ADMIN_KEY, "next": "/"})
        assert r.status_code == 303, r.text
        return r.cookies[COOKIE]


async def _reads(app, cookie: str) -> int:
    async with _client(app) as c:
        return (await c.get("/", headers={"Cookie": f"{COOKIE}={cookie}"})).status_code


async def test_logins_are_separate_stored_hashed_and_revocable(db_url):
    async with app_client(db_url) as admin:
        app = admin.app
        a, b = await _login(app), await _login(app)
        assert a != b and ADMIN_KEY not in a
        assert await _reads(app, a) == 200 and await _reads(app, b) == 200
        assert await _reads(app, a[:-1] + ("x" if a[-1] != "x" else "y")) == 401
        with app.state.db.read() as s:
            hashes = set(s.scalars(select(DashboardLogin.token_hash)).all())
        assert hashlib.sha256(a.encode()).hexdigest() in hashes and a not in hashes

        # logout ends this login only: the old cookie is refused even if kept
        async with _client(app) as c:
            r = await c.post("/logout", headers={"Cookie": f"{COOKIE}={a}"})
            assert r.status_code == 303 and 'llmduel_dashboard=""' in r.headers["set-cookie"]
        assert await _reads(app, a) == 401 and await _reads(app, b) == 200

        # sign out everywhere needs a signed-in admin, then ends every login
        c1, c2 = await _login(app), await _login(app)
        async with _client(app) as c:
            assert (await c.post("/logout/all")).status_code == 401
            assert (
                await c.post("/logout/all", headers={"Cookie": f"{COOKIE}={a}"})
            ).status_code == 401  # a revoked login
            assert await _reads(app, b) == 200
            assert (await c.post("/logout/all", headers={"Cookie": f"{COOKIE}={c1}"})).status_code == 303
        for cookie in (b, c1, c2):
            assert await _reads(app, cookie) == 401
        assert await _reads(app, await _login(app)) == 200  # a new login works again


async def test_logins_expire_and_die_with_the_admin_key(db_url):
    async with (
        app_client(db_url) as admin,
        app_client(db_url, api_key="another-admin-key-0123456789") as other,
        app_client(db_url, login_hours=1.5 / 3600) as briefly,  # 1 s cookies (int seconds)
    ):
        app, other_key, short = admin.app, other.app, briefly.app
        cookie = await _login(app)
        assert await _reads(app, cookie) == 200
        assert await _reads(other_key, cookie) == 401  # made with a key that is no longer the admin key
        # Time passes: the stored expiry moves into the past (no sleep, no race with a slow machine).
        digest = hashlib.sha256(cookie.encode()).hexdigest()
        with app.state.db.write() as s:
            s.execute(
                update(DashboardLogin)
                .where(DashboardLogin.token_hash == digest)
                .values(expires_at=utcnow() - dt.timedelta(seconds=1))
            )
        assert await _reads(app, cookie) == 401
        async with _client(short) as c:
            r = await c.post("/login", data={"key": ADMIN_KEY, "next": "/"})
            assert "max-age=1" in r.headers["set-cookie"].lower()
        with short.state.db.read() as s:
            row = s.execute(
                select(DashboardLogin.created_at, DashboardLogin.expires_at).where(
                    DashboardLogin.token_hash == hashlib.sha256(r.cookies[COOKIE].encode()).hexdigest()
                )
            ).one()
        assert row.expires_at - row.created_at == dt.timedelta(seconds=1)


async def test_the_key_is_never_taken_from_an_address(db_url):
    async with app_client(db_url) as admin:
        app = admin.app
        async with _client(app) as c:
            for path in (f"/?key={ADMIN_KEY}", f"/login?key={ADMIN_KEY}", f"/campaigns/1?key={ADMIN_KEY}"):
                r = await c.get(path)
                assert "set-cookie" not in r.headers and COOKIE not in c.cookies, path
                assert r.status_code in (200, 401), path  # /login itself is a 200 page
            r = await c.post("/login", data={"key": "wrong", "next": "/"})
            assert r.status_code == 401 and "set-cookie" not in r.headers
