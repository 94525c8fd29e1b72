"""OpenAI's Batch API (also a LiteLLM proxy's and the llmduel fake provider's).

``POST {base_url}/files`` (multipart, ``purpose=batch``) uploads the JSONL input, one line per
request ``{"custom_id", "method": "POST", "url": "/v1/chat/completions", "body"}`` (an image model's:
``"/v1/images/generations"``, which OpenAI's Batch API also takes); ``POST
{base_url}/batches`` ``{"input_file_id", "endpoint", "completion_window": "24h", "metadata":
{"llmduel_key": key}}`` starts it; ``GET {base_url}/batches/{id}`` polls (``status``: validating,
in_progress, finalizing, completed, failed, expired, cancelling, cancelled); the results are the
output file (``{"custom_id", "response": {"status_code", "body"}}``) and the error file
(``{"custom_id", "error": {"code", "message"}}``), read with ``GET {base_url}/files/{id}/content``
and matched on ``custom_id``. An expired batch returns the part it finished; the rest has no line.
One model per batch (OpenAI requires it).
"""

from __future__ import annotations

import asyncio
import json
from typing import Any

import httpx

from .base import ClientError
from .batch import (
    CANCELLED,
    ENDED,
    EXPIRED,
    FAILED,
    RUNNING,
    BatchHTTP,
    BatchRequest,
    BatchResult,
    BatchState,
    jsonl_objects,
    missing,
)

METADATA_KEY = "llmduel_key"
ENDPOINT = "/v1/chat/completions"
#: An image model's requests (``output: image``, :mod:`.images`): OpenAI's Batch API takes ``/v1/images/generations``.
IMAGES_ENDPOINT = "/v1/images/generations"
_STATES = {"completed": ENDED, "failed": FAILED, "expired": EXPIRED, "cancelled": CANCELLED}
MAX_LIST_PAGES = 10  # find(): the newest 1,000 batches of the account
#: How many times the input file's upload is tried after an error that may pass (a kept-alive connection the
#: server closed as it was reused, a 5xx, a 429). An upload starts nothing: one sent twice leaves an unused file.
UPLOAD_TRIES = 3
UPLOAD_PAUSE_S = 0.5


class OpenAIBatches:
    provider = "openai batch"

    def __init__(self, cfg: Any, http: httpx.AsyncClient):
        self.base = str(cfg.base_url).rstrip("/")
        self.net = BatchHTTP(self.provider, http, cfg.api_key_env, float(cfg.timeout_s))

    def _headers(self) -> dict[str, str]:
        key = self.net.key()
        return {"authorization": f"Bearer {key}"} if key else {}

    async def submit(self, requests: list[BatchRequest], key: str) -> str:
        endpoint = endpoint_of(requests)
        lines = "".join(
            json.dumps({"custom_id": r.custom_id, "method": "POST", "url": endpoint, "body": r.body}) + "\n"
            for r in requests
        )
        f = await self._upload(f"{key}.jsonl", lines.encode())
        body = {
            "input_file_id": f.get("id"),
            "endpoint": endpoint,
            "completion_window": "24h",
            "metadata": {METADATA_KEY: key},
        }
        b = await self.net.json("POST", f"{self.base}/batches", self._headers(), json=body)
        if not isinstance(b.get("id"), str):
            raise ValueError("the batch object has no 'id'")
        return b["id"]

    async def _upload(self, filename: str, data: bytes) -> dict[str, Any]:
        """The input file's object, its upload tried again after an error that may pass (:data:`UPLOAD_TRIES`)."""
        attempt = 1
        while True:
            try:
                return await self.net.json(
                    "POST",
                    f"{self.base}/files",
                    self._headers(),
                    data={"purpose": "batch"},
                    files={"file": (filename, data, "application/jsonl")},
                )
            except ClientError as exc:
                if not exc.retryable or attempt >= UPLOAD_TRIES:
                    raise
            await asyncio.sleep(UPLOAD_PAUSE_S * attempt)
            attempt += 1

    async def poll(self, batch_id: str) -> BatchState:
        b = await self.net.json("GET", f"{self.base}/batches/{batch_id}", self._headers())
        status = _STATES.get(str(b.get("status")), RUNNING)
        error = None
        if status == FAILED:
            errs = (b.get("errors") or {}).get("data") if isinstance(b.get("errors"), dict) else None
            first = errs[0] if isinstance(errs, list) and errs and isinstance(errs[0], dict) else {}
            error = f"batch failed: {self.net.masked(first.get('message') or 'no reason given')}"
        return BatchState(batch_id, status, error, b)

    async def _file(self, file_id: Any) -> list[dict[str, Any]]:
        if not isinstance(file_id, str) or not file_id:
            return []
        resp = await self.net.request("GET", f"{self.base}/files/{file_id}/content", self._headers())
        return jsonl_objects(resp.text)

    async def results(self, batch_id: str, custom_ids: list[str]) -> dict[str, BatchResult]:
        b = (await self.poll(batch_id)).raw
        wanted = set(custom_ids)
        found: dict[str, BatchResult] = {}
        for line in await self._file(b.get("output_file_id")) + await self._file(b.get("error_file_id")):
            cid = line.get("custom_id")
            if cid not in wanted or cid in found:
                continue
            resp = raw_resp if isinstance(raw_resp := line.get("response"), dict) else {}
            err = raw_err if isinstance(raw_err := line.get("error"), dict) else None
            if err is None and resp.get("status_code") == 200:
                found[cid] = BatchResult(cid, data=resp.get("body"))
            else:
                why = (err or {}).get("message") or f"HTTP {resp.get('status_code')}"
                found[cid] = BatchResult(cid, error=f"{self.provider}: {self.net.masked(why)}")
        return missing(custom_ids, found, f"{self.provider}: no result (batch {b.get('status')})")

    async def cancel(self, batch_id: str) -> None:
        await self.net.json("POST", f"{self.base}/batches/{batch_id}/cancel", self._headers())

    async def find(self, key: str) -> str | None:
        after = None
        for _ in range(MAX_LIST_PAGES):
            params: dict[str, Any] = {"limit": 100}
            if after:
                params["after"] = after
            page = await self.net.json("GET", f"{self.base}/batches", self._headers(), params=params)
            data = raw_data if isinstance(raw_data := page.get("data"), list) else []
            for b in data:
                if isinstance(b, dict) and (b.get("metadata") or {}).get(METADATA_KEY) == key:
                    return str(b.get("id"))
            if not page.get("has_more") or not data:
                return None
            after = data[-1].get("id") if isinstance(data[-1], dict) else None
        return None


def endpoint_of(requests: list[BatchRequest]) -> str:
    """The batch's endpoint: the images route for an image model's requests (their single call's URL ends
    with ``/images/generations``), else chat completions. One endpoint per batch (OpenAI requires it)."""
    images = {r.url.rstrip("/").endswith("/images/generations") for r in requests}
    if len(images) > 1:
        raise ValueError("one batch cannot mix image and chat requests")
    return IMAGES_ENDPOINT if images == {True} else ENDPOINT
