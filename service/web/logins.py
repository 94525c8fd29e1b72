"""Dashboard logins: one row per sign-in, with an expiry and a revocation.

A successful ``POST /login`` makes a random cookie value (``dl_`` + 43 URL-safe
characters); only its SHA-256 is stored, in ``dashboard_logins``, with the time it
expires (``Settings.login_hours`` later, 12 h by default) and the id of the admin
key it was made with (an HMAC of a fixed label under the key, not the key). A
cookie opens the dashboards while its row is unexpired, unrevoked and made with the
current admin key. **choice**: a table, not a signed cookie plus a revocation
list: every check is one primary-key-sized lookup, revocation is immediate on every
worker (no cache), and "log out everywhere" is one UPDATE.

* ``POST /logout`` revokes this login; ``POST /logout/all`` revokes every login.
* Changing the admin key invalidates every login made with the old one.
* Rows past their expiry are deleted when a new login is made.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import hmac
import secrets

from sqlalchemy import delete, select, update

from ..models import DashboardLogin, utcnow

COOKIE_PREFIX = "dl_"
MAX_COOKIE_LENGTH = 100


def key_id(admin_key: str) -> str:
    """The id of an admin key stored with a login: it names the key without revealing it."""
    return hmac.new(admin_key.encode("utf-8"), b"llmduel dashboard login key id v2", hashlib.sha256).hexdigest()[:32]


def _digest(value: str) -> str | None:
    if not value.startswith(COOKIE_PREFIX) or len(value) > MAX_COOKIE_LENGTH:
        return None
    return hashlib.sha256(value.encode("utf-8", "surrogatepass")).hexdigest()


def create(db, admin_key: str, lifetime_seconds: int) -> str:
    """A new login's cookie value (shown once; only its hash is stored)."""
    value = COOKIE_PREFIX + secrets.token_urlsafe(32)
    now = utcnow()
    with db.write() as s:
        s.execute(delete(DashboardLogin).where(DashboardLogin.expires_at < now))
        s.add(
            DashboardLogin(
                token_hash=_digest(value),
                key_id=key_id(admin_key),
                created_at=now,
                expires_at=now + dt.timedelta(seconds=lifetime_seconds),
            )
        )
    return value


def is_valid(db, admin_key: str | None, value: str | None) -> bool:
    """Whether ``value`` is the cookie of a live login made with ``admin_key``."""
    if not admin_key or not value:
        return False
    digest = _digest(value)
    if digest is None:
        return False
    with db.read() as s:
        row = s.execute(
            select(DashboardLogin.key_id, DashboardLogin.expires_at).where(
                DashboardLogin.token_hash == digest, DashboardLogin.revoked_at.is_(None)
            )
        ).first()
    if row is None or row.expires_at <= utcnow():
        return False
    return hmac.compare_digest(row.key_id, key_id(admin_key))


def revoke(db, value: str | None) -> bool:
    """Revoke the login behind ``value`` (logout); whether there was one to revoke."""
    digest = _digest(value or "")
    if digest is None:
        return False
    with db.write() as s:
        result = s.execute(
            update(DashboardLogin)
            .where(DashboardLogin.token_hash == digest, DashboardLogin.revoked_at.is_(None))
            .values(revoked_at=utcnow())
        )
        return bool(result.rowcount)


def revoke_all(db) -> int:
    """Revoke every live login (log out everywhere); how many there were."""
    now = utcnow()
    with db.write() as s:
        result = s.execute(
            update(DashboardLogin)
            .where(DashboardLogin.revoked_at.is_(None), DashboardLogin.expires_at > now)
            .values(revoked_at=now)
        )
        return int(result.rowcount or 0)
