"""Provider rate limits shared by every worker and campaign (the client's side).

A client config may say ``rpm`` (requests per minute) and ``tpm`` (tokens per minute,
input plus output) for its **credential**: the provider's base URL and API key (the
key's value, hashed: two campaigns naming different variables that hold the same key
share one quota). Before each HTTP attempt the client asks a :class:`RateLimiter` for
a slot; after the call it reports the tokens used; after a 429 it passes the
server's ``Retry-After`` on, so every worker waits, not only the one that was told.

The limiter that shares the quota through the database is
:class:`service.ratelimits.DatabaseRateLimiter`; this module holds only what a client
needs to talk to one, so the clients never import the database layer.
"""

from __future__ import annotations

import hashlib
from contextvars import ContextVar
from dataclasses import dataclass
from typing import Any, Awaitable, Callable, Protocol

from .base import ClientError

#: The window of ``rpm`` and ``tpm``, in seconds.
WINDOW_S = 60.0


#: Whether the call under way may still send a request (None: always). The service sets it for
#: each model and judge call (its duel still in flight, its campaign still running); the limiter
#: asks it after every wait for a slot and the client before every retry, so a call queued when
#: its campaign ends is never sent (:func:`check_still_wanted`).
SEND_GUARD: ContextVar[Callable[[], Awaitable[bool]] | None] = ContextVar("llmduel_send_guard", default=None)

#: The error of a call dropped before it was sent because its campaign ended or its duel was cancelled.
NOT_SENT = "not sent: its campaign ended or its duel was cancelled while the call waited"


async def check_still_wanted(attempts: int = 0) -> None:
    """Raise :class:`ClientError` (:data:`NOT_SENT`, not retryable) when :data:`SEND_GUARD` says
    the call under way must not send another request."""
    guard = SEND_GUARD.get()
    if guard is not None and not await guard():
        raise ClientError(NOT_SENT, None, attempts)


@dataclass(frozen=True)
class Quota:
    """One credential's limits: ``key`` (a hash naming the credential), ``rpm``, ``tpm``."""

    key: str
    rpm: int | None
    tpm: int | None


class RateLimiter(Protocol):
    """What a client asks before and after each HTTP attempt."""

    async def acquire(self, quota: Quota, tokens: int) -> int:
        """Wait until one more request of ``tokens`` tokens fits ``quota`` in the last
        :data:`WINDOW_S` seconds (and any ``Retry-After`` has passed); returns a slot id."""

    async def settle(self, slot: int, tokens: int | None) -> None:
        """The request of ``slot`` used ``tokens`` tokens (None: unknown, keep the estimate)."""

    async def block(self, quota: Quota, seconds: float) -> None:
        """The provider answered 429 with ``Retry-After: seconds``: nobody sends on this
        credential before then."""


def credential_key(kind: str, base_url: str, api_key: str | None) -> str:
    """The name of a credential's shared quota: SHA-256 of provider kind, base URL and
    the key's value (never stored or shown itself)."""
    h = hashlib.sha256()
    for part in (kind, base_url, api_key or ""):
        h.update(part.encode("utf-8", "surrogatepass"))
        h.update(b"\0")
    return h.hexdigest()[:40]


def quota_of(config: Any, api_key: str | None) -> Quota | None:
    """The quota of a client config, or None when it sets neither ``rpm`` nor ``tpm``."""
    rpm, tpm = getattr(config, "rpm", None), getattr(config, "tpm", None)
    if rpm is None and tpm is None:
        return None
    return Quota(credential_key(str(config.kind), str(config.base_url), api_key), rpm, tpm)


def estimated_tokens(prompt: str, turns: list | None, max_output: int | None, client: dict | None = None) -> int:
    """The tokens a request may use, counted against ``tpm`` before it is sent: its input
    at one token per 4 UTF-8 bytes (rounded up), its images (:class:`.content.UserTurn`) at
    the per-provider image-token rule of ``client`` (its stored JSON) that the budget's bound
    uses (:func:`service.images.tokens.image_input_tokens`), plus its output limit
    (``max_tokens``); the provider's reported usage replaces the estimate afterwards."""
    text = "".join(t if isinstance(t, str) else t.text for t in turns) if turns else prompt
    images = [im for t in turns or () if not isinstance(t, str) for im in t.images]
    return (
        (len(text.encode("utf-8", "surrogatepass")) + 3) // 4
        + (_image_tokens(images, client or {}) if images else 0)
        + int(max_output or 0)
    )


def _image_tokens(images: list, client: dict) -> int:
    """Input tokens of ``images`` (:class:`.content.ImagePart`) for ``client``, from their pixel sizes."""
    from ..images.checks import image_size
    from ..images.tokens import image_input_tokens

    return sum(image_input_tokens(client, *image_size(im.data)) for im in images)
