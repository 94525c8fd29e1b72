"""Anthropic's Message Batches API.

``POST {base}/v1/messages/batches`` ``{"requests": [{"custom_id", "params": <a Messages API body>}]}``
-> a ``message_batch`` (``id``, ``processing_status``: in_progress, canceling, ended;
``request_counts``; ``results_url``); ``GET .../batches/{id}`` polls; the results are JSONL at
``results_url`` (``{"custom_id", "result": {"type": "succeeded", "message": <a Messages API
response>}}``, or ``errored`` with ``error``, ``canceled``, ``expired``), **not in request order**:
matched on ``custom_id``. ``POST .../batches/{id}/cancel`` cancels.

A batch has no metadata field: the key is carried in every ``custom_id`` (``<8 hex digits of the
key's SHA-256>-<id>``, within the API's ``^[a-zA-Z0-9_-]{1,64}$``), so :meth:`find` recognises an
ended batch by the first line of its results; a batch still running cannot be recognised (the
caller records the batch id as soon as the create call returns).
"""

from __future__ import annotations

import hashlib
import re
from typing import Any

import httpx

from .batch import CANCELLED, ENDED, RUNNING, BatchHTTP, BatchRequest, BatchResult, BatchState, jsonl_objects, missing

CUSTOM_ID = re.compile(r"^[a-zA-Z0-9_-]{1,64}$")
MAX_LIST_PAGES = 5


def key_tag(key: str) -> str:
    return hashlib.sha256(key.encode()).hexdigest()[:8]


class AnthropicBatches:
    provider = "anthropic batch"

    def __init__(self, cfg: Any, http: httpx.AsyncClient):
        base = str(cfg.base_url).rstrip("/")
        self.url = f"{base}/messages/batches" if base.endswith("/v1") else f"{base}/v1/messages/batches"
        self.version = cfg.anthropic_version
        self.net = BatchHTTP(self.provider, http, cfg.api_key_env, float(cfg.timeout_s))

    def _headers(self) -> dict[str, str]:
        key = self.net.key()
        headers = {"anthropic-version": self.version}
        if key:
            headers["x-api-key"] = key
        return headers

    async def submit(self, requests: list[BatchRequest], key: str) -> str:
        tag = key_tag(key)
        items = []
        for r in requests:
            cid = f"{tag}-{r.custom_id}"
            if not CUSTOM_ID.match(cid):
                raise ValueError(f"custom_id {r.custom_id!r} does not fit Anthropic's ^[a-zA-Z0-9_-]{{1,64}}$")
            items.append({"custom_id": cid, "params": r.body})
        b = await self.net.json("POST", self.url, self._headers(), json={"requests": items})
        if not isinstance(b.get("id"), str):
            raise ValueError("the message batch has no 'id'")
        return b["id"]

    async def poll(self, batch_id: str) -> BatchState:
        b = await self.net.json("GET", f"{self.url}/{batch_id}", self._headers())
        if b.get("processing_status") != "ended":
            return BatchState(batch_id, RUNNING, None, b)
        return BatchState(batch_id, CANCELLED if b.get("cancel_initiated_at") else ENDED, None, b)

    async def _lines(self, b: dict[str, Any], batch_id: str) -> list[dict[str, Any]]:
        url = b.get("results_url") or f"{self.url}/{batch_id}/results"
        resp = await self.net.request("GET", str(url), self._headers())
        return jsonl_objects(resp.text)

    async def results(self, batch_id: str, custom_ids: list[str]) -> dict[str, BatchResult]:
        b = (await self.poll(batch_id)).raw
        found: dict[str, BatchResult] = {}
        wanted = set(custom_ids)
        for line in await self._lines(b, batch_id) if b.get("processing_status") == "ended" else []:
            sent = str(line.get("custom_id"))
            cid = sent.split("-", 1)[1] if "-" in sent else sent
            if cid not in wanted or cid in found:
                continue
            result = raw_result if isinstance(raw_result := line.get("result"), dict) else {}
            kind = result.get("type")
            if kind == "succeeded":
                found[cid] = BatchResult(cid, data=result.get("message"))
                continue
            why = str(kind)
            err = result.get("error")
            if isinstance(err, dict):
                inner = raw_inner if isinstance(raw_inner := err.get("error"), dict) else err
                why = f"{kind}: {inner.get('message') or inner.get('type') or ''}"
            found[cid] = BatchResult(cid, error=f"{self.provider}: {self.net.masked(why)}")
        return missing(custom_ids, found, f"{self.provider}: no result (batch {b.get('processing_status')})")

    async def cancel(self, batch_id: str) -> None:
        await self.net.json("POST", f"{self.url}/{batch_id}/cancel", self._headers())

    async def find(self, key: str) -> str | None:
        tag = key_tag(key) + "-"
        after = None
        for _ in range(MAX_LIST_PAGES):
            params: dict[str, Any] = {"limit": 100}
            if after:
                params["after_id"] = after
            page = await self.net.json("GET", self.url, self._headers(), params=params)
            data = [b for b in page.get("data") or [] if isinstance(b, dict)]
            for b in data:
                if b.get("processing_status") != "ended":
                    continue
                lines = await self._lines(b, str(b.get("id")))
                if lines and str(lines[0].get("custom_id", "")).startswith(tag):
                    return str(b.get("id"))
            if not page.get("has_more") or not data:
                return None
            after = page.get("last_id")
        return None
