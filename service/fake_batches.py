"""The fake provider's OpenAI Batch API (files and batches), so batch campaigns run offline.

Routes, with the shapes of OpenAI's ``/v1/files`` and ``/v1/batches`` references:

* ``POST /v1/files`` (multipart form: ``purpose`` = ``batch``, ``file`` = a JSONL file) -> a file
  object ``{"id": "file-...", "object": "file", "bytes", "created_at", "filename", "purpose"}``;
  ``GET /v1/files/{id}`` the object, ``GET /v1/files/{id}/content`` its bytes (input, output and
  error files alike).
* ``POST /v1/batches`` ``{"input_file_id", "endpoint", "completion_window":
  "24h", "metadata"?}`` -> a batch object (``status``, ``request_counts`` ``{total, completed,
  failed}``, ``output_file_id``, ``error_file_id``, ``metadata``, the ``*_at`` times);
  ``GET /v1/batches/{id}``; ``GET /v1/batches?limit=&after=`` (newest first, ``has_more``);
  ``POST /v1/batches/{id}/cancel``. ``endpoint`` is ``/v1/chat/completions`` or
  ``/v1/images/generations`` (the provider's images route: an image model's requests), and every
  line's ``url`` must be the batch's ``endpoint``, as OpenAI requires.

A batch is ``in_progress`` until ``batch_delay_s`` seconds after its creation; the first read after
that runs every line through the provider's own route (chat completion or images) (the same answers, verdicts and
token counts as a direct call, each listed in ``GET /v1/requests`` with its ``batch`` id) and
completes it. Each line fails with probability ``batch_failure_rate`` (seeded): it then goes to the
error file (``{"id", "custom_id", "response": null, "error": {"code", "message"}}``) and is not
answered; a line the chat route refuses goes there with its ``response`` (``status_code``, ``body``).
Output lines are ``{"id", "custom_id", "response": {"status_code": 200, "request_id", "body"},
"error": null}``, written in reverse input order, so a client that matches on ``custom_id`` is
checked (as OpenAI documents: the output order need not be the input order).
"""

from __future__ import annotations

import email.parser
import email.policy
import json
import math
import random
import re
import secrets
import time
from typing import TYPE_CHECKING, Any, Awaitable, Callable

if TYPE_CHECKING:
    from fastapi import FastAPI, Request
    from starlette.responses import Response

#: What a batch line is answered with (its body, the batch's id, its endpoint): (HTTP status, JSON body).
Respond = Callable[[bytes, str, str], Awaitable[tuple[int, Any]]]

MAX_FILE_BYTES = 200 * 1024 * 1024
MAX_LINES = 50_000
MAX_METADATA_KEYS = 16
ENDPOINT = "/v1/chat/completions"
ENDPOINTS = (ENDPOINT, "/v1/images/generations")
_CUSTOM_ID = re.compile(r"^.{1,512}$", re.S)


def _error(status: int, message: str) -> Response:
    from starlette.responses import JSONResponse

    return JSONResponse({"error": {"message": message, "type": "invalid_request_error", "code": None}}, status)


def parse_multipart(content_type: str, raw: bytes) -> dict[str, tuple[str | None, bytes]]:
    """A multipart/form-data body as ``{field: (filename or None, bytes)}`` (no third-party parser)."""
    if not content_type.lower().startswith("multipart/form-data"):
        raise ValueError("expected a multipart/form-data body")
    msg = email.parser.BytesParser(policy=email.policy.HTTP).parsebytes(
        b"Content-Type: " + content_type.encode("latin-1") + b"\r\n\r\n" + raw
    )
    if not msg.is_multipart():
        raise ValueError("malformed multipart body")
    out: dict[str, tuple[str | None, bytes]] = {}
    for part in msg.iter_parts():
        name = part.get_param("name", header="content-disposition")
        if not isinstance(name, str):
            continue
        payload = part.get_payload(decode=True)
        out[name] = (part.get_filename(), payload if isinstance(payload, bytes) else b"")
    return out


class FakeBatches:
    """Files and batches of one fake provider (in memory)."""

    def __init__(self, respond: Respond, *, batch_delay_s: float = 0.0, batch_failure_rate: float = 0.0, seed: int = 0):
        if not math.isfinite(batch_delay_s) or batch_delay_s < 0:
            raise ValueError("batch_delay must be a finite number >= 0")
        if not 0.0 <= batch_failure_rate <= 1.0:  # NaN fails this too
            raise ValueError("batch_failure_rate must be in [0, 1]")
        self.respond = respond
        self.batch_delay_s = batch_delay_s
        self.batch_failure_rate = batch_failure_rate
        self._rng = random.Random(f"batch:{seed}")
        self.files: dict[str, dict[str, Any]] = {}
        self.contents: dict[str, bytes] = {}
        self.batches: dict[str, dict[str, Any]] = {}  # insertion order = creation order
        self._created_mono: dict[str, float] = {}

    # ------------------------------------------------------------ files
    def add_file(self, data: bytes, filename: str, purpose: str) -> dict[str, Any]:
        fid = "file-" + secrets.token_hex(12)
        obj = {
            "id": fid,
            "object": "file",
            "bytes": len(data),
            "created_at": int(time.time()),
            "filename": filename,
            "purpose": purpose,
        }
        self.files[fid] = obj
        self.contents[fid] = data
        return obj

    async def upload(self, request: Request) -> Response:
        from starlette.responses import JSONResponse

        raw = await request.body()
        if len(raw) > MAX_FILE_BYTES + 65536:
            return _error(413, f"file larger than {MAX_FILE_BYTES} bytes")
        try:
            form = parse_multipart(request.headers.get("content-type", ""), raw)
        except ValueError as exc:
            return _error(400, str(exc))
        purpose = form.get("purpose", (None, b""))[1].decode("utf-8", "replace").strip()
        if purpose != "batch":
            return _error(400, "'purpose' must be 'batch'")
        if "file" not in form:
            return _error(400, "'file' is required")
        filename, data = form["file"]
        return JSONResponse(self.add_file(data, filename or "input.jsonl", purpose))

    def file(self, fid: str, content: bool) -> Response:
        from starlette.responses import JSONResponse, Response

        if fid not in self.files:
            return _error(404, f"No such File object: {fid}")
        if content:
            return Response(self.contents[fid], media_type="application/octet-stream")
        return JSONResponse(self.files[fid])

    # ------------------------------------------------------------ batches
    def _check_input(self, data: bytes, endpoint: str = ENDPOINT) -> list[dict[str, Any]] | str:
        try:
            text = data.decode("utf-8")
        except UnicodeDecodeError:
            return "the input file is not UTF-8"
        lines = [ln for ln in text.splitlines() if ln.strip()]
        if not lines:
            return "the input file has no requests"
        if len(lines) > MAX_LINES:
            return f"the input file has more than {MAX_LINES} requests"
        out, seen = [], set()
        for n, line in enumerate(lines, 1):
            try:
                item = json.loads(line)
            except ValueError:
                return f"line {n} is not valid JSON"
            if not isinstance(item, dict) or not isinstance(item.get("body"), dict):
                return f"line {n}: expected an object with 'custom_id', 'method', 'url' and 'body'"
            cid = item.get("custom_id")
            if not isinstance(cid, str) or not _CUSTOM_ID.match(cid):
                return f"line {n}: 'custom_id' must be a string of 1 to 512 characters"
            if cid in seen:
                return f"line {n}: duplicate custom_id {cid!r}"
            seen.add(cid)
            if item.get("method") != "POST" or item.get("url") != endpoint:
                return f"line {n}: method must be POST and url {endpoint} (the batch's endpoint)"
            out.append(item)
        return out

    async def create(self, request: Request) -> Response:
        from starlette.responses import JSONResponse

        try:
            body = json.loads(await request.body())
        except ValueError:
            return _error(400, "request body is not valid JSON")
        if not isinstance(body, dict):
            return _error(400, "request body must be a JSON object")
        fid = body.get("input_file_id")
        if not isinstance(fid, str) or fid not in self.files:
            return _error(400, "'input_file_id' must name an uploaded file")
        endpoint = body.get("endpoint")
        if endpoint not in ENDPOINTS:
            return _error(400, f"'endpoint' must be one of {', '.join(ENDPOINTS)}")
        if body.get("completion_window") != "24h":
            return _error(400, "'completion_window' must be '24h'")
        metadata = body.get("metadata") or {}
        if (
            not isinstance(metadata, dict)
            or len(metadata) > MAX_METADATA_KEYS
            or not all(isinstance(k, str) and len(k) <= 64 for k in metadata)
            or not all(isinstance(v, str) and len(v) <= 512 for v in metadata.values())
        ):
            return _error(400, "'metadata' must be at most 16 string keys (64 chars) with string values (512 chars)")
        lines = self._check_input(self.contents[fid], endpoint)
        if isinstance(lines, str):
            return _error(400, lines)
        now = int(time.time())
        bid = "batch_" + secrets.token_hex(12)
        self.batches[bid] = {
            "id": bid,
            "object": "batch",
            "endpoint": endpoint,
            "errors": None,
            "input_file_id": fid,
            "completion_window": "24h",
            "status": "in_progress",
            "output_file_id": None,
            "error_file_id": None,
            "created_at": now,
            "in_progress_at": now,
            "expires_at": now + 24 * 3600,
            "finalizing_at": None,
            "completed_at": None,
            "failed_at": None,
            "expired_at": None,
            "cancelling_at": None,
            "cancelled_at": None,
            "request_counts": {"total": len(lines), "completed": 0, "failed": 0},
            "metadata": dict(metadata),
        }
        self._created_mono[bid] = time.monotonic()
        return JSONResponse(self.batches[bid])

    async def _advance(self, bid: str) -> dict[str, Any]:
        """Run a batch whose delay has passed (once)."""
        b = self.batches[bid]
        if b["status"] != "in_progress" or time.monotonic() - self._created_mono[bid] < self.batch_delay_s:
            return b
        b["status"] = "finalizing"  # a concurrent read sees it under way, never runs it twice
        lines = self._check_input(self.contents[b["input_file_id"]], b["endpoint"])
        assert isinstance(lines, list)
        out: list[dict] = []
        err: list[dict] = []
        for item in lines:
            rid = "batch_req_" + secrets.token_hex(8)
            if self.batch_failure_rate > 0 and self._rng.random() < self.batch_failure_rate:
                err.append(
                    {
                        "id": rid,
                        "custom_id": item["custom_id"],
                        "response": None,
                        "error": {"code": "server_error", "message": "injected batch failure"},
                    }
                )
                continue
            status, data = await self.respond(json.dumps(item["body"]).encode(), bid, b["endpoint"])
            line = {
                "id": rid,
                "custom_id": item["custom_id"],
                "response": {"status_code": status, "request_id": rid, "body": data},
                "error": None,
            }
            (out if status == 200 else err).append(line)
        now = int(time.time())
        if out:
            data = "".join(json.dumps(x) + "\n" for x in reversed(out)).encode()
            b["output_file_id"] = self.add_file(data, f"{bid}_output.jsonl", "batch_output")["id"]
        if err:
            data = "".join(json.dumps(x) + "\n" for x in err).encode()
            b["error_file_id"] = self.add_file(data, f"{bid}_error.jsonl", "batch_output")["id"]
        b["request_counts"] = {"total": len(lines), "completed": len(out), "failed": len(err)}
        b.update(status="completed", finalizing_at=now, completed_at=now)
        return b

    async def retrieve(self, bid: str) -> Response:
        from starlette.responses import JSONResponse

        if bid not in self.batches:
            return _error(404, f"No such Batch object: {bid}")
        return JSONResponse(await self._advance(bid))

    async def listing(self, request: Request) -> Response:
        from starlette.responses import JSONResponse

        try:
            limit = int(request.query_params.get("limit", "20"))
        except ValueError:
            return _error(400, "'limit' must be an integer")
        if not 1 <= limit <= 100:
            return _error(400, "'limit' must be in [1, 100]")
        ids = list(reversed(self.batches))
        after = request.query_params.get("after")
        if after is not None:
            ids = ids[ids.index(after) + 1 :] if after in ids else []
        page = [await self._advance(i) for i in ids[:limit]]
        return JSONResponse(
            {
                "object": "list",
                "data": page,
                "first_id": page[0]["id"] if page else None,
                "last_id": page[-1]["id"] if page else None,
                "has_more": len(ids) > limit,
            }
        )

    async def cancel(self, bid: str) -> Response:
        from starlette.responses import JSONResponse

        if bid not in self.batches:
            return _error(404, f"No such Batch object: {bid}")
        b = self.batches[bid]
        if b["status"] not in ("in_progress", "validating"):
            return _error(400, f"Cannot cancel a batch with status '{b['status']}'")
        now = int(time.time())
        b.update(status="cancelled", cancelling_at=now, cancelled_at=now)
        b["request_counts"] = {**b["request_counts"], "failed": 0, "completed": 0}
        return JSONResponse(b)

    def add_routes(self, app: FastAPI, guard: Callable[[Request], Response | None]) -> None:
        """The routes on ``app``; ``guard`` (the provider's key check) answers first when it refuses."""

        async def upload(request):
            return guard(request) or await self.upload(request)

        async def file(request):
            return guard(request) or self.file(request.path_params["fid"], False)

        async def content(request):
            return guard(request) or self.file(request.path_params["fid"], True)

        async def batches(request):
            if denied := guard(request):
                return denied
            if request.method == "POST":
                return await self.create(request)
            return await self.listing(request)

        async def batch(request):
            return guard(request) or await self.retrieve(request.path_params["bid"])

        async def cancel(request):
            return guard(request) or await self.cancel(request.path_params["bid"])

        app.add_route("/v1/files", upload, methods=["POST"])
        app.add_route("/v1/files/{fid}", file, methods=["GET"])
        app.add_route("/v1/files/{fid}/content", content, methods=["GET"])
        app.add_route("/v1/batches", batches, methods=["GET", "POST"])
        app.add_route("/v1/batches/{bid}", batch, methods=["GET"])
        app.add_route("/v1/batches/{bid}/cancel", cancel, methods=["POST"])
