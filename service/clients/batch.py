"""The providers' batch APIs behind one small protocol (:class:`BatchAPI`).

A batch is a list of :class:`BatchRequest` (each the body a single call of the model's client
would send, :meth:`~.http.HTTPModelClient.build_request`, under a ``custom_id``), submitted under a
caller's ``key`` (an idempotency key: it is written into the provider's batch metadata, so the
batch can be found again by :meth:`BatchAPI.find` after a crash instead of being submitted twice).
``poll`` says where the batch is; ``results`` returns one :class:`BatchResult` per ``custom_id``,
matched on the id (never on the order of the provider's file); ``cancel`` stops it.

Kinds: ``openai`` (:mod:`.batch_openai`: ``/v1/files`` and ``/v1/batches``, also what a LiteLLM
proxy and the llmduel fake provider serve), ``anthropic`` (:mod:`.batch_anthropic`:
``/v1/messages/batches``), ``gemini`` (:mod:`.batch_gemini`: ``batchGenerateContent``);
:func:`.batch_apis.build_batch_api` picks one for a client config. A ``simulated`` model has no
batch API (``None``): its calls are made one at a time.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field
from typing import Any, Protocol

import httpx

from ..egress import EgressDenied
from ..redaction import excerpt
from .base import ClientError

#: A batch's state, as the protocol reports it.
RUNNING, ENDED, FAILED, EXPIRED, CANCELLED = "running", "ended", "failed", "expired", "cancelled"
#: The states in which a batch will change no more.
FINAL = (ENDED, FAILED, EXPIRED, CANCELLED)
#: The largest response file read (bytes): a provider's file beyond it is an error, not a memory blow-up.
MAX_RESULTS_BYTES = 256 * 1024 * 1024
#: The most of an error response read (bytes): only an excerpt of it is shown.
MAX_ERROR_BYTES = 64 * 1024
#: The most characters of a provider's error text (a batch's, a request's) kept and shown.
MAX_ERROR_CHARS = 500


@dataclass(frozen=True)
class BatchRequest:
    """One request of a batch: its id and the single call's (url, headers, body)."""

    custom_id: str
    url: str
    body: dict[str, Any]


@dataclass
class BatchState:
    """Where a batch is: ``status`` one of RUNNING, ENDED, FAILED, EXPIRED, CANCELLED; ``error`` why it failed."""

    batch_id: str
    status: str
    error: str | None = None
    raw: dict[str, Any] = field(default_factory=dict)

    @property
    def final(self) -> bool:
        return self.status in FINAL


@dataclass(frozen=True)
class BatchResult:
    """The result of one request: ``data`` the single call's response JSON, else ``error`` (sent again)."""

    custom_id: str
    data: Any = None
    error: str | None = None


class BatchAPI(Protocol):
    """A provider's batch API for one model client config."""

    provider: str

    async def submit(self, requests: list[BatchRequest], key: str) -> str: ...

    async def poll(self, batch_id: str) -> BatchState: ...

    async def results(self, batch_id: str, custom_ids: list[str]) -> dict[str, BatchResult]: ...

    async def cancel(self, batch_id: str) -> None: ...

    async def find(self, key: str) -> str | None: ...


def missing(custom_ids: list[str], found: dict[str, BatchResult], why: str) -> dict[str, BatchResult]:
    """Every id of the batch: those the provider returned nothing for carry ``why`` as their error."""
    return {cid: found.get(cid) or BatchResult(cid, error=why) for cid in custom_ids}


class BatchHTTP:
    """The HTTP part the three batch APIs share: the key from its variable, errors masked, JSON read."""

    def __init__(self, provider: str, http: httpx.AsyncClient, api_key_env: str | None, timeout_s: float = 60.0):
        self.provider = provider
        self.http = http
        self.api_key_env = api_key_env
        self.timeout_s = timeout_s

    def key(self) -> str | None:
        if self.api_key_env is None:
            return None
        key = os.environ.get(self.api_key_env)
        if not key:
            raise ClientError(f"environment variable {self.api_key_env} is not set", None, attempts=0)
        return key

    def masked(self, text: Any) -> str:
        """A provider's error text (a batch's, a request's) as it may be stored and shown: masked like
        every provider text (:func:`service.redaction.excerpt`: the client's key and any fragment of
        it, ``key=value`` secrets, credentials in URLs, token-like runs), at most :data:`MAX_ERROR_CHARS`."""
        key = os.environ.get(self.api_key_env) if self.api_key_env else None
        return excerpt(str(text), (key,) if key else (), MAX_ERROR_CHARS)

    async def request(self, method: str, url: str, headers: dict[str, str], **kw: Any) -> httpx.Response:
        key = self.key()
        try:
            async with self.http.stream(method, url, headers=headers, timeout=self.timeout_s, **kw) as resp:
                ok = 200 <= resp.status_code < 300
                body = await _read_capped(resp, MAX_RESULTS_BYTES if ok else MAX_ERROR_BYTES)
        except EgressDenied as exc:
            raise ClientError(f"{self.provider} batch API not called: {exc.message}", None) from None
        except httpx.HTTPError as exc:
            raise ClientError(
                f"{self.provider} batch API: {type(exc).__name__}: {excerpt(str(exc), (key,) if key else ())}",
                None,
                retryable=True,
            ) from None
        if body is None and ok:
            raise ClientError(f"{self.provider} batch API: response larger than {MAX_RESULTS_BYTES} bytes", None)
        # the body as read (decoded, capped): no content-encoding to apply a second time
        ctype = {"content-type": resp.headers["content-type"]} if "content-type" in resp.headers else {}
        out = httpx.Response(resp.status_code, headers=ctype, content=body or b"")
        if not ok:
            detail = excerpt(out.text[:2000], (key,) if key else ())
            raise ClientError(
                f"{self.provider} batch API returned HTTP {resp.status_code}: {detail}",
                resp.status_code,
                retryable=resp.status_code in (408, 409, 429) or resp.status_code >= 500,
            )
        return out

    async def json(self, method: str, url: str, headers: dict[str, str], **kw: Any) -> dict[str, Any]:
        resp = await self.request(method, url, headers, **kw)
        try:
            data = resp.json()
        except ValueError:
            data = None
        if not isinstance(data, dict):
            raise ClientError(f"{self.provider} batch API returned a response that is not a JSON object", None)
        return data


async def _read_capped(resp: httpx.Response, cap: int) -> bytes | None:
    """The body, read as it streams in; None as soon as it passes ``cap`` bytes (decoded, so a
    compressed bomb is stopped too) for a success, its first ``cap`` bytes for an error."""
    chunks, size = [], 0
    async for chunk in resp.aiter_bytes():
        size += len(chunk)
        if size > cap:
            if 200 <= resp.status_code < 300:
                return None
            chunks.append(chunk[: cap - (size - len(chunk))])
            break
        chunks.append(chunk)
    return b"".join(chunks)


def jsonl_objects(text: str) -> list[dict[str, Any]]:
    """The JSON objects of a JSONL file (lines that are not objects are skipped)."""
    out = []
    for line in text.splitlines():
        if not line.strip():
            continue
        try:
            item = json.loads(line)
        except ValueError:
            continue
        if isinstance(item, dict):
            out.append(item)
    return out
