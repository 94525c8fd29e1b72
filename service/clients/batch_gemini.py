"""Gemini's batch mode (``batchGenerateContent``), with inline requests.

``POST {base}/models/{model}:batchGenerateContent`` ``{"batch": {"displayName": key,
"inputConfig": {"requests": {"requests": [{"request": <a generateContent body>, "metadata":
{"key": custom_id}}]}}}}`` -> an operation ``{"name": "batches/...", "metadata": {..., "state"}}``;
``GET {base}/batches/{id}`` polls (``state``: ``BATCH_STATE_PENDING``, ``_RUNNING``,
``_SUCCEEDED``, ``_FAILED``, ``_CANCELLED``, ``_EXPIRED``); when done the responses are in
``response.inlinedResponses.inlinedResponses`` (or the batch's ``output``), each ``{"response":
<a generateContent response>}`` or ``{"error": {"code", "message"}}``, with the request's
``metadata``, **in request order**. A response is matched on its ``metadata.key`` (the request's
``custom_id``) whenever the provider echoes keys back: then a response without one is left
unmatched (its request is sent again), never guessed from its position. Only when no response
carries a key (the per-request ``metadata`` is not always echoed back) and there are exactly as
many responses as requests are they matched on their position. ``POST {base}/batches/{id}:cancel`` cancels;
``GET {base}/batches`` lists the operations (:meth:`find` matches ``displayName``).
One model per batch (the model is in the URL).
"""

from __future__ import annotations

from typing import Any

import httpx

from .batch import CANCELLED, ENDED, EXPIRED, FAILED, RUNNING, BatchHTTP, BatchRequest, BatchResult, BatchState
from .batch import missing as missing_results

_STATES = {
    "BATCH_STATE_SUCCEEDED": ENDED,
    "BATCH_STATE_FAILED": FAILED,
    "BATCH_STATE_CANCELLED": CANCELLED,
    "BATCH_STATE_EXPIRED": EXPIRED,
    "JOB_STATE_SUCCEEDED": ENDED,
    "JOB_STATE_FAILED": FAILED,
    "JOB_STATE_CANCELLED": CANCELLED,
    "JOB_STATE_EXPIRED": EXPIRED,
}
MAX_LIST_PAGES = 5


def _batch(op: dict[str, Any]) -> dict[str, Any]:
    """The batch resource of an operation (its ``metadata``), or the resource itself."""
    meta = op.get("metadata")
    return meta if isinstance(meta, dict) and ("state" in meta or "displayName" in meta) else op


def _key(item: Any) -> str | None:
    meta = item.get("metadata") if isinstance(item, dict) else None
    key = meta.get("key") if isinstance(meta, dict) else None
    return key if isinstance(key, str) else None


def _matched(items: list[Any], order: list[str], wanted: set[str]) -> list[tuple[str, dict[str, Any]]]:
    """The responses as (custom id, item): by their ``metadata.key`` whenever the provider echoes keys
    back (an item without one is then left unmatched: sent again, never guessed from its position);
    by position only when no item carries a key and there are exactly as many items as requests."""
    items = [i for i in items if isinstance(i, dict)]
    if any(_key(i) is not None for i in items):
        pairs = [(_key(i), i) for i in items]
    elif len(items) == len(order):
        pairs = list(zip(order, items))
    else:  # neither keys nor a full list: no response can be told apart; every request is sent again
        pairs = []
    out: list[tuple[str, dict[str, Any]]] = []
    seen: set[str] = set()
    for cid, item in pairs:
        if cid in wanted and cid not in seen:
            seen.add(cid)
            out.append((cid, item))
    return out


class GeminiBatches:
    provider = "gemini batch"

    def __init__(self, cfg: Any, http: httpx.AsyncClient):
        self.base = str(cfg.base_url).rstrip("/")
        self.model = str(cfg.model).removeprefix("models/")
        self.net = BatchHTTP(self.provider, http, cfg.api_key_env, float(cfg.timeout_s))
        self._order: dict[str, list[str]] = {}  # batch name -> custom ids in request order (this process)

    def _headers(self) -> dict[str, str]:
        key = self.net.key()
        return {"x-goog-api-key": key} if key else {}

    def _name(self, batch_id: str) -> str:
        return batch_id if batch_id.startswith("batches/") else f"batches/{batch_id}"

    async def submit(self, requests: list[BatchRequest], key: str) -> str:
        body = {
            "batch": {
                "displayName": key,
                "inputConfig": {
                    "requests": {"requests": [{"request": r.body, "metadata": {"key": r.custom_id}} for r in requests]}
                },
            }
        }
        op = await self.net.json(
            "POST", f"{self.base}/models/{self.model}:batchGenerateContent", self._headers(), json=body
        )
        name = op.get("name")
        if not isinstance(name, str) or not name:
            raise ValueError("the batch operation has no 'name'")
        self._order[name] = [r.custom_id for r in requests]
        return name

    async def poll(self, batch_id: str) -> BatchState:
        op = await self.net.json("GET", f"{self.base}/{self._name(batch_id)}", self._headers())
        state = str(_batch(op).get("state") or "")
        status = _STATES.get(state, RUNNING)
        if status == RUNNING and op.get("done") and isinstance(op.get("error"), dict):
            status = FAILED
        error = None
        if status == FAILED:
            err = raw_err if isinstance(raw_err := op.get("error"), dict) else {}
            error = f"batch failed: {self.net.masked(err.get('message') or state)}"
        return BatchState(batch_id, status, error, op)

    async def results(self, batch_id: str, custom_ids: list[str]) -> dict[str, BatchResult]:
        state = await self.poll(batch_id)
        op = state.raw
        holder = op.get("response") if isinstance(op.get("response"), dict) else _batch(op).get("output") or {}
        inlined = (holder.get("inlinedResponses") or {}) if isinstance(holder, dict) else {}
        items = inlined.get("inlinedResponses") if isinstance(inlined, dict) else None
        order = self._order.get(self._name(batch_id)) or self._order.get(batch_id) or custom_ids
        found: dict[str, BatchResult] = {}
        for cid, item in _matched(items if isinstance(items, list) else [], order, set(custom_ids)):
            if isinstance(item.get("response"), dict):
                found[cid] = BatchResult(cid, data=item["response"])
            else:
                err = raw_err if isinstance(raw_err := item.get("error"), dict) else {}
                found[cid] = BatchResult(
                    cid, error=f"{self.provider}: {self.net.masked(err.get('message') or 'error')}"
                )
        return missing_results(custom_ids, found, f"{self.provider}: no result ({state.status})")

    async def cancel(self, batch_id: str) -> None:
        await self.net.json("POST", f"{self.base}/{self._name(batch_id)}:cancel", self._headers())

    async def find(self, key: str) -> str | None:
        token = None
        for _ in range(MAX_LIST_PAGES):
            params: dict[str, Any] = {"pageSize": 100}
            if token:
                params["pageToken"] = token
            page = await self.net.json("GET", f"{self.base}/batches", self._headers(), params=params)
            ops = [op for op in page.get("operations") or page.get("batches") or [] if isinstance(op, dict)]
            for op in ops:
                if _batch(op).get("displayName") == key and isinstance(op.get("name"), str):
                    return op["name"]
            token = page.get("nextPageToken")
            if not token:
                return None
        return None
