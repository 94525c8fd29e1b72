"""Secrets never stored or shown: one rule for provider keys echoed back in text.

A provider may echo its API key, whole or in pieces, into an answer, an error
message or a judge's reasoning. Everything the service stores or shows from a
provider goes through :func:`redact`: any run of text made of substrings of a
configured key that are at least :data:`MIN_FRAGMENT` characters long is replaced
by :data:`MASK`. A key shorter than that is replaced where it occurs whole.

**choice**: 8 characters. Shorter runs of a random key's characters occur in
ordinary text by chance (``"sk-proj-"`` alone is 8 characters and is replaced,
which only hides a well-known prefix); a fragment of 8 random key characters
carries about 48 bits, too much to show.

The configured keys of a campaign are the values of the environment variables its
client configs name in ``api_key_env`` (at any depth of its model and judge configs),
read when the text is stored, plus the admin key.
"""

from __future__ import annotations

import functools
import os
import re
import threading
from collections import OrderedDict
from typing import Any, Iterable

MIN_FRAGMENT = 8
MASK = "***"


def configured_keys(*configs: Any, extra: Iterable[str | None] = ()) -> tuple[str, ...]:
    """The secret values named by ``api_key_env`` anywhere in ``configs`` (dicts/lists), plus ``extra``."""
    found: set[str] = {k for k in extra if k}
    for config in configs:
        for env in _key_env_names(config):
            if os.environ.get(env):
                found.add(os.environ[env])
    return tuple(sorted(found))


_NAMES: OrderedDict[int, tuple[Any, tuple[str, ...]]] = OrderedDict()
_NAMES_SIZE = 512
_NAMES_LOCK = threading.Lock()
_BIG = 32  # lists at least this long are remembered


def _key_env_names(config: Any) -> tuple[str, ...]:
    """The ``api_key_env`` names in ``config``. A large list (a simulated judge's preference matrix
    of 256 models holds 65,536 numbers) is walked once per object, not at every verdict: the
    entry keeps the object alive, so its id is not reused; configurations are never mutated."""
    if isinstance(config, dict):
        names: set[str] = set()
        env = config.get("api_key_env")
        if isinstance(env, str):
            names.add(env)
        for v in config.values():
            names.update(_key_env_names(v))
        return tuple(sorted(names))
    if not isinstance(config, (list, tuple)):
        return ()
    big = len(config) >= _BIG
    if big:
        with _NAMES_LOCK:
            hit = _NAMES.get(id(config))
        if hit is not None and hit[0] is config:
            return hit[1]
    found: set[str] = set()
    for v in config:
        if isinstance(v, (dict, list, tuple)):
            found.update(_key_env_names(v))
    out = tuple(sorted(found))
    if big:
        with _NAMES_LOCK:
            _NAMES[id(config)] = (config, out)
            while len(_NAMES) > _NAMES_SIZE:
                _NAMES.popitem(last=False)
    return out


_PROBE = 4  # characters of the cheap first pass


@functools.lru_cache(maxsize=256)
def _pieces(key: str) -> tuple[frozenset[str], frozenset[str]]:
    """The key's ``MIN_FRAGMENT``-character pieces and its ``_PROBE``-character pieces."""
    return (
        frozenset(key[i : i + MIN_FRAGMENT] for i in range(len(key) - MIN_FRAGMENT + 1)),
        frozenset(key[i : i + _PROBE] for i in range(len(key) - _PROBE + 1)),
    )


def _spans(text: str, key: str) -> list[tuple[int, int]]:
    """The ``MIN_FRAGMENT``-character windows of ``text`` that are pieces of ``key`` (their
    union covers every longer fragment), or the occurrences of a short key."""
    if len(key) < MIN_FRAGMENT:
        out, pos = [], text.find(key)
        while pos >= 0:
            out.append((pos, pos + len(key)))
            pos = text.find(key, pos + 1)
        return out
    pieces, probes = _pieces(key)
    # A window at s contains the _PROBE characters at the multiple of _PROBE in [s, s + 4],
    # and they are a piece of the key too: only windows next to such a probe hit are checked.
    n = len(text)
    hits = [p for p in range(0, n - _PROBE + 1, _PROBE) if text[p : p + _PROBE] in probes]
    out = []
    for p in hits:
        for s in range(max(0, p - _PROBE), p + 1):
            if s + MIN_FRAGMENT <= n and text[s : s + MIN_FRAGMENT] in pieces:
                out.append((s, s + MIN_FRAGMENT))
    return out


def redact(text: str, keys: Iterable[str]) -> str:
    """``text`` with every fragment (>= :data:`MIN_FRAGMENT` characters) of every key masked."""
    if not text:
        return text
    spans: list[tuple[int, int]] = []
    for key in keys:
        if key:
            spans += _spans(text, key)
    if not spans:
        return text
    spans.sort()
    out, pos, start, end = [], 0, *spans[0]
    for s, e in spans[1:]:
        if s <= end:  # overlapping or adjacent pieces form one masked run
            end = max(end, e)
            continue
        out += [text[pos:start], MASK]
        pos, start, end = end, s, e
    out += [text[pos:start], MASK, text[end:]]
    return "".join(out)


def redact_json(value: Any, keys: Iterable[str]) -> Any:
    """:func:`redact` on every string (and dict key) of a JSON value."""
    keys = tuple(keys)
    if not keys:
        return value
    if isinstance(value, str):
        return redact(value, keys)
    if isinstance(value, dict):
        return {redact_json(k, keys): redact_json(v, keys) for k, v in value.items()}
    if isinstance(value, list):
        return [redact_json(v, keys) for v in value]
    return value


# ---------------------------------------------------------------- short excerpts of error bodies
#: Characters of a model server's error body kept in a duel's error (after masking).
EXCERPT_CHARS = 80
_NAMED_SECRET = re.compile(
    r"(?i)\b(api[_-]?key|access[_-]?token|token|secret|password|passwd|pwd|authorization|cookie|session)"
    r"(\"?\s*[:=]\s*\"?)([^\s\"',;&]+)"
)
_AUTH_SCHEME = re.compile(r"(?i)\b(bearer|basic)(\s+)([A-Za-z0-9._~+/=-]{6,})")
_URL_CREDENTIALS = re.compile(r"(?i)(\b[a-z][a-z0-9+.-]*://)[^/\s@]+@")
# A long run of token-like characters mixing letters and digits: a key, a hash, a session id.
_TOKEN_LIKE = re.compile(r"[A-Za-z0-9_\-+/=.]{20,}")


def _masked_token(m: re.Match[str]) -> str:
    run = m.group(0)
    return MASK if any(c.isdigit() for c in run) and any(c.isalpha() for c in run) else run


def excerpt(text: str, keys: Iterable[str] = (), limit: int = EXCERPT_CHARS) -> str:
    """A short, masked excerpt of an untrusted body (a model server's error): whitespace
    collapsed; configured keys, ``key=value`` secrets, credentials in URLs and long
    token-like runs replaced by :data:`MASK`; at most ``limit`` characters (``…`` when cut)."""
    out = " ".join(redact(text or "", tuple(keys)).split())
    out = _URL_CREDENTIALS.sub(lambda m: m.group(1) + MASK + "@", out)
    out = _AUTH_SCHEME.sub(lambda m: m.group(1) + m.group(2) + MASK, out)
    out = _NAMED_SECRET.sub(lambda m: m.group(1) + m.group(2) + MASK, out)
    out = _TOKEN_LIKE.sub(_masked_token, out)
    return out if len(out) <= limit else out[: limit - 1].rstrip() + "…"
