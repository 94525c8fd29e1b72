"""A local OpenAI-compatible server with deterministic answers, for demos and
end-to-end tests with no network: ``llmduel fake-provider [--host H] [--port P]``.

* ``POST /v1/chat/completions``: the answer of model ``m`` to a prompt is a
  function of (m, prompt) keyed with the provider's secret (its marker key: per
  process unless ``--marker-key`` or ``LLMDUEL_FAKE_SECRET`` gives it); it starts
  with an opaque marker ``<<fake:TOKEN>>`` that carries the model's quality, sealed
  with that key: the answer names no model, two answers of one model carry
  different tokens, only the provider that wrote a marker can read it, and nobody
  who guesses model names can recompute an answer. Token usage is derived from the text lengths (about 4 characters
  per token).
* A model whose name contains ``judge`` (``fake-judge``, ``judge``) is a judge: it
  never reads the prompt's wording. It takes the first two markers in the request
  (system and user messages, in order) as answer A's and answer B's, and replies
  with the verdict text the request asks for in ``fake_verdicts`` (set it in the
  judge client's ``params``; default the built-in ``[[A]]``/``[[B]]``/``[[C]]``):
  keys ``a``, ``b``, ``tie`` and optionally ``a_strong``/``b_strong`` (used when
  one quality is at least twice the other). ``strict`` mode prefers the higher
  quality; ``bradley-terry`` mode draws A with probability q_a / (q_a + q_b) from a
  hash of the two markers, so both presentation orders agree. Fewer than two
  readable markers: a tie. So a custom judge template works as long as it shows
  answer A before answer B.
* A model's quality is ``--quality name=value`` if given, else the number in a
  ``-q<number>`` name suffix (``good-q3``, ``weak-q0.5``), else 1.0. Distinct
  qualities give the campaign a Condorcet winner: the highest quality.
* Fault injection by model name, for fault tests: a name containing
  ``fault-500``, ``fault-429`` (Retry-After: 1), ``fault-badjson``,
  ``fault-timeout`` (sleeps ``timeout_sleep_s`` then answers) or ``fault-flaky``
  (the first request with a given body fails with 503, the next succeeds).
* Hostile modes by model name: ``bomb-brackets`` or ``bomb-headings`` answer the marker
  then ``bomb_chars`` (default 1,000,000) characters of ``[`` or of ``#\n`` lines (a
  Markdown bomb); ``usage-<figure>`` reports ``<figure>`` as the completion tokens
  (``usage-1e16``, ``usage-1e30``, ``usage--5``, ``usage-nan``: any text, sent as a JSON
  number when it parses as one, else as a string); ``fault-trickle`` sends its headers,
  then one byte every ``trickle_interval_s`` (default 2 s) for ``trickle_bytes`` bytes.
* ``POST /v1/images/generations`` answers an image model with a PNG whose pixels carry the
  marker (:mod:`service.fake_images`); image parts of a chat completion count as the markers
  their pixels carry, so the judge judges two images as it judges two texts.
* ``GET /v1/models`` lists the configured models and those seen so far.
* The OpenAI Batch API (``POST /v1/files``, ``POST /v1/batches``, ``GET /v1/batches/{id}``,
  ``GET /v1/batches``, ``POST /v1/batches/{id}/cancel``, ``GET /v1/files/{id}/content``):
  :mod:`service.fake_batches`; ``--batch-delay SECONDS`` and ``--batch-failure-rate R``.
* ``GET /v1/requests`` lists every answered request in order (kind ``answer`` with
  the prompt, or ``judge`` with the markers of both answers as shown, ``first`` and
  ``second``, and ``question`` None since the judge does not read the prompt; model;
  token counts): tests count calls and recompute charges from it.
"""

from __future__ import annotations

import argparse
import asyncio
import hashlib
import hmac
import json
import math
import random
import re
import secrets
import struct
import time
from typing import TYPE_CHECKING, Any

from .fake_images import content_text, image_answer, images_generations

if TYPE_CHECKING:  # fastapi is imported lazily: the CLI imports this module to register
    from fastapi import FastAPI, Request
    from starlette.responses import JSONResponse, Response

DEFAULT_PORT = 8900
JUDGE_MODES = ("strict", "bradley-terry")

_MARKER = re.compile(r"<<fake:([0-9a-f]{36})>>")
#: the verdict texts a fake judge answers with unless the request's ``fake_verdicts`` says otherwise
DEFAULT_VERDICTS = {"a": "[[A]]", "b": "[[B]]", "tie": "[[C]]"}
VERDICT_KEYS = ("a", "b", "tie", "a_strong", "b_strong")
_QUALITY_SUFFIX = re.compile(r"[-_@:]q(\d+(?:\.\d+)?)$")
_VOCAB = (
    "result answer value step first second then because therefore example case "
    "check note simple clear correct detail method approach reason data model "
    "point final estimate overall likely exactly roughly consider compute derive"
).split()


def quality_from_name(name: str, default: float = 1.0) -> float:
    """The quality encoded in a ``-q<number>`` suffix, else ``default``."""
    m = _QUALITY_SUFFIX.search(name)
    return float(m.group(1)) if m else default


def parse_quality_options(items: list[str] | None) -> dict[str, float]:
    """``["name=0.9", ...]`` -> ``{"name": 0.9}``; ValueError on bad items."""
    out: dict[str, float] = {}
    for item in items or []:
        name, sep, value = item.rpartition("=")
        try:
            q = float(value)
        except ValueError:
            q = float("nan")
        if not sep or not name or not math.isfinite(q) or q < 0:
            raise ValueError(f"--quality expects NAME=NUMBER with NUMBER >= 0, got {item!r}")
        out[name] = q
    return out


def _digest(*parts: str) -> bytes:
    return hashlib.sha256("\x00".join(parts).encode()).digest()


def _uniform(*parts: str) -> float:
    return int.from_bytes(_digest(*parts)[:8], "big") / 2**64


def count_tokens(text: str) -> int:
    return max(1, math.ceil(len(text) / 4))


class FakeProvider:
    """The logic behind the app (usable without HTTP)."""

    def __init__(
        self,
        qualities: dict[str, float] | None = None,
        *,
        judge_mode: str = "strict",
        default_quality: float = 1.0,
        api_key: str | None = None,
        failure_rate: float = 0.0,
        seed: int = 0,
        latency_s: float = 0.0,
        timeout_sleep_s: float = 30.0,
        marker_key: str | None = None,
        rpm_quota: int | None = None,
        bomb_chars: int = 1_000_000,
        trickle_interval_s: float = 2.0,
        trickle_bytes: int = 100,
    ) -> None:
        if judge_mode not in JUDGE_MODES:
            raise ValueError(f"judge_mode must be one of {JUDGE_MODES}, got {judge_mode!r}")
        if not 0.0 <= failure_rate <= 1.0:
            raise ValueError("failure_rate must be in [0, 1]")
        self.qualities = dict(qualities or {})
        self.judge_mode = judge_mode
        self.default_quality = default_quality
        self._api_key = api_key
        self.failure_rate = failure_rate
        self._rng = random.Random(seed)
        self.latency_s = latency_s
        self.timeout_sleep_s = timeout_sleep_s
        self.bomb_chars = bomb_chars
        self.trickle_interval_s = trickle_interval_s
        self.trickle_bytes = trickle_bytes
        self._marker_key = marker_key.encode() if marker_key else secrets.token_bytes(16)
        self.seen: set[str] = set()
        self._flaky_seen: set[bytes] = set()
        self.stats = {"requests": 0, "answers": 0, "judgements": 0, "errors": 0, "rate_limited": 0}
        # A provider's quota: at most rpm_quota accepted requests in any 60 s; past it, 429 with Retry-After.
        if rpm_quota is not None and rpm_quota < 1:
            raise ValueError("rpm_quota must be at least 1")
        self.rpm_quota = rpm_quota
        self._accepted: list[float] = []  # monotonic times of the requests the quota let through
        # Every answered request, in order (GET /v1/requests): what tests count calls and prices from.
        self.requests: list[dict[str, Any]] = []

    def quality(self, model: str) -> float:
        if model in self.qualities:
            return self.qualities[model]
        return quality_from_name(model, self.default_quality)

    # -- answers ---------------------------------------------------------------
    def _pad(self, nonce: bytes) -> bytes:
        return hashlib.sha256(self._marker_key + b"\x00" + nonce).digest()[:8]

    def _tag(self, nonce: bytes, body: bytes) -> bytes:
        return hashlib.sha256(self._marker_key + b"\x01" + nonce + body).digest()[:4]

    def seal(self, quality: float, nonce: bytes) -> str:
        """The opaque marker of an answer of quality ``quality`` (6-byte nonce, 8 sealed bytes, 4-byte tag)."""
        body = bytes(x ^ y for x, y in zip(struct.pack(">d", quality), self._pad(nonce)))
        return f"<<fake:{(nonce + body + self._tag(nonce, body)).hex()}>>"

    def unseal(self, token: str) -> float | None:
        """The quality in a marker's token, or ``None`` when this provider did not write it."""
        raw = bytes.fromhex(token)
        nonce, body, tag = raw[:6], raw[6:14], raw[14:]
        if not hmac.compare_digest(tag, self._tag(nonce, body)):
            return None
        q = struct.unpack(">d", bytes(x ^ y for x, y in zip(body, self._pad(nonce))))[0]
        return q if math.isfinite(q) and q >= 0 else None

    def _keyed(self, *parts: str) -> bytes:
        """HMAC-SHA256 of ``parts`` under the marker key: what only this provider can compute."""
        return hmac.new(self._marker_key, "\x00".join(parts).encode(), hashlib.sha256).digest()

    def answer(self, model: str, prompt: str) -> str:
        """The marker, then words drawn from the keyed hash of (model, prompt): someone who guesses the
        model names cannot recompute an answer (nor its nonce) without the provider's key."""
        d = self._keyed("words", model, prompt)
        n = 8 + d[0] % 24
        words = [_VOCAB[(d[1 + i % 30] + 7 * i) % len(_VOCAB)] for i in range(n)]
        return self.seal(self.quality(model), self._keyed("nonce", model, prompt)[:6]) + " " + " ".join(words) + "."

    @staticmethod
    def is_judge(model: str) -> bool:
        return "judge" in model.lower()

    def judge(self, request_text: str, verdicts: dict[str, str] | None = None) -> str:
        """A verdict from the first two markers of ``request_text`` (answer A's, then answer B's)."""
        return self.judge_with_probabilities(request_text, verdicts)[0]

    def _qualities(self, request_text: str) -> list[tuple[str, float]]:
        return [(m.group(1), q) for m in _MARKER.finditer(request_text) if (q := self.unseal(m.group(1))) is not None]

    def judge_with_probabilities(
        self, request_text: str, verdicts: dict[str, str] | None = None
    ) -> tuple[str, dict[str, float]]:
        """:meth:`judge`'s verdict text and the judge's probability of each verdict key: with qualities
        ``q_a``, ``q_b`` a tie 0.1 and the rest split in proportion ``q_a : q_b``, the strong key taking its
        side's share when it is the verdict; no two readable markers: tie 0.6, a and b 0.2 each."""
        table = {**DEFAULT_VERDICTS, **(verdicts or {})}
        marks = self._qualities(request_text)
        if len(marks) < 2:
            probs = {"a": 0.2, "b": 0.2, "tie": 0.6}
            return f"Fewer than two answers carry a readable marker; calling it even.\n\n{table['tie']}", probs
        (ta, qa), (tb, qb) = marks[0], marks[1]
        total = qa + qb
        pa = 0.5 if total <= 0 else qa / total
        probs = {"a": 0.9 * pa, "b": 0.9 * (1.0 - pa), "tie": 0.1}
        if self.judge_mode == "strict" or qa == qb:
            side = "a" if qa > qb else "b" if qb > qa else "tie"
        else:
            # order-consistent Bernoulli(qa / (qa + qb)) from the unordered pair of markers
            (t1, q1, s1), (t2, q2, s2) = sorted([(ta, qa, "a"), (tb, qb, "b")])
            total = q1 + q2
            p_first = 0.5 if total == 0 else q1 / total
            side = s1 if _uniform("bt", t1, t2) < p_first else s2
        if side != "tie":
            win, lose = (qa, qb) if side == "a" else (qb, qa)
            if win >= 2 * lose and f"{side}_strong" in table:
                probs[f"{side}_strong"] = probs.pop(side)
                side = f"{side}_strong"
        return f"Judged from the answers' quality markers.\n\n{table[side]}", probs

    def _check_auth(self, request: Request) -> JSONResponse | None:
        if self._api_key is None:
            return None
        if request.headers.get("authorization") != f"Bearer {self._api_key}":
            return _error(401, "Incorrect API key provided.", "invalid_request_error")
        return None

    def _over_quota(self) -> Response | None:
        """429 with Retry-After when ``rpm_quota`` requests were accepted in the last 60 s."""
        if self.rpm_quota is None:
            return None
        now = time.monotonic()
        self._accepted = [t for t in self._accepted if t > now - 60.0]
        if len(self._accepted) >= self.rpm_quota:
            self.stats["rate_limited"] += 1
            resp = _error(429, "Rate limit reached for requests per minute", "rate_limit_error")
            resp.headers["retry-after"] = str(max(1, math.ceil(self._accepted[0] + 60.0 - now)))
            return resp
        self._accepted.append(now)
        return None

    async def chat_completions(self, request: Request) -> Response:
        self.stats["requests"] += 1
        denied = self._check_auth(request) or self._over_quota()
        if denied is not None:
            self.stats["errors"] += 1
            return denied
        return await self.respond(await request.body())

    async def respond(self, raw: bytes, batch_id: str | None = None) -> Response:
        """The chat completion of one request body (the route's, or a batch line's with its ``batch_id``)."""
        from starlette.responses import JSONResponse

        try:
            body = json.loads(raw)
        except ValueError:
            return _error(400, "request body is not valid JSON")
        if not isinstance(body, dict):
            return _error(400, "request body must be a JSON object")
        model = body.get("model")
        messages = body.get("messages")
        if not isinstance(model, str) or not model:
            return _error(400, "'model' is required")
        if not isinstance(messages, list) or not messages or not all(isinstance(m, dict) for m in messages):
            return _error(400, "'messages' must be a non-empty list of message objects")
        if body.get("stream"):
            return _error(400, "streaming is not supported by the fake provider")
        self.seen.add(model)
        logprobs: dict[str, Any] | None = None

        fault = await self._fault(model, raw)
        if fault is not None:
            self.stats["errors"] += 1
            return fault
        if self.latency_s > 0:
            await asyncio.sleep(self.latency_s)

        # image parts count as the markers their pixels carry (service/fake_images.py)
        prompt = content_text(messages[-1].get("content"))
        all_text = "\n".join(content_text(m.get("content")) for m in messages)
        if self.is_judge(model):
            verdicts = body.get("fake_verdicts")
            if verdicts is not None and (
                not isinstance(verdicts, dict)
                or not set(verdicts) <= set(VERDICT_KEYS)
                or not all(isinstance(v, str) for v in verdicts.values())
            ):
                return _error(400, f"'fake_verdicts' must be an object of strings with keys among {VERDICT_KEYS}")
            self.stats["judgements"] += 1
            text, probs = self.judge_with_probabilities(all_text, verdicts)
            finish = "stop"
            if body.get("logprobs") is True:
                logprobs = judge_logprobs(
                    text, probs, {**DEFAULT_VERDICTS, **(verdicts or {})}, body.get("top_logprobs")
                )
        else:
            self.stats["answers"] += 1
            text = self.answer(model, prompt) + self._bomb(model)
            finish = "stop"
            limit = body.get("max_completion_tokens", body.get("max_tokens"))
            if isinstance(limit, int) and not isinstance(limit, bool) and limit > 0 and count_tokens(text) > limit:
                text = text[: 4 * limit]
                finish = "length"
        pt, ct = count_tokens(all_text), count_tokens(text)
        entry: dict[str, Any] = {"model": model, "prompt_tokens": pt, "completion_tokens": ct}
        reported: Any = reported_usage(model, ct)
        if self.is_judge(model):
            # the answers a judge request shows, as their markers in order (a marker stands for one
            # model's answer to one prompt, so the pair also names the prompt); the prompt's wording is not read
            marks = _MARKER.findall(all_text)
            entry.update(
                kind="judge",
                question=None,
                first=marks[0] if marks else None,
                second=marks[1] if len(marks) > 1 else None,
            )
        else:
            entry.update(kind="answer", prompt=prompt)
        if batch_id is not None:
            entry["batch"] = batch_id
        if len(self.requests) < 1_000_000:
            self.requests.append(entry)
        return JSONResponse(
            {
                "id": "chatcmpl-fake-" + self._keyed("id", model, all_text).hex()[:16],
                "object": "chat.completion",
                "created": int(time.time()),
                "model": model,
                "choices": [
                    {
                        "index": 0,
                        "message": {"role": "assistant", "content": text},
                        "finish_reason": finish,
                        "logprobs": logprobs,
                    }
                ],
                "usage": {"prompt_tokens": pt, "completion_tokens": reported, "total_tokens": pt + ct},
            }
        )

    def _bomb(self, model: str) -> str:
        if "bomb-brackets" in model:
            return " " + "[" * self.bomb_chars
        if "bomb-headings" in model:
            return "\n" + "#\n" * (self.bomb_chars // 2)
        return ""

    def _trickle(self) -> Response:
        from starlette.responses import StreamingResponse

        async def drip():
            for _ in range(self.trickle_bytes):
                yield b" "
                await asyncio.sleep(self.trickle_interval_s)

        return StreamingResponse(drip(), media_type="application/json")

    async def _fault(self, model: str, raw: bytes) -> Response | None:
        if "fault-500" in model:
            return _error(500, "injected server error", "server_error")
        if "fault-429" in model:
            resp = _error(429, "injected rate limit", "rate_limit_error")
            resp.headers["retry-after"] = "1"
            return resp
        if "fault-badjson" in model:
            from starlette.responses import Response

            return Response(b'{"choices": [ this is not json', media_type="application/json")
        if "fault-trickle" in model:
            return self._trickle()
        if "fault-timeout" in model:
            await asyncio.sleep(self.timeout_sleep_s)
        if "fault-flaky" in model:
            key = hashlib.sha256(raw).digest()
            if key not in self._flaky_seen:
                self._flaky_seen.add(key)
                return _error(503, "injected transient failure", "server_error")
        if self.failure_rate > 0 and self._rng.random() < self.failure_rate:
            return _error(503, "injected random failure", "server_error")
        return None

    def models(self) -> dict[str, Any]:
        names = sorted(set(self.qualities) | self.seen)
        return {
            "object": "list",
            "data": [{"id": n, "object": "model", "created": 0, "owned_by": "llmduel-fake"} for n in names],
        }


_USAGE = re.compile(r"usage-(.+)$")


_TOKENS = re.compile(r"\[\[|\]\]|[^\[\]]+")


def judge_logprobs(text: str, probs: dict[str, float], table: dict[str, str], top: Any) -> dict[str, Any]:
    """A judge reply's ``choices[0].logprobs`` in OpenAI's shape (``content``: per token ``token``,
    ``logprob``, ``bytes`` and ``top_logprobs``): the reply cut at ``[[`` and ``]]``, so a verdict
    ``[[X]]`` has the token ``X``, whose alternatives are the labels of the verdict table with the
    judge's probabilities (:meth:`FakeProvider.judge_with_probabilities`), at most ``top`` of them
    (``top_logprobs``; 0 or absent: none); every other token is certain."""
    n = top if isinstance(top, int) and not isinstance(top, bool) and top > 0 else 0
    labels: dict[str, float] = {}
    for key, p in probs.items():
        inner = re.fullmatch(r"\[\[(.+)\]\]", table.get(key, ""))
        if inner and p > 0:
            labels[inner.group(1)] = labels.get(inner.group(1), 0.0) + p
    content = []
    for tok in _TOKENS.findall(text):
        if tok in labels:
            alts = sorted(labels.items(), key=lambda kv: -kv[1])
            lp = math.log(labels[tok])
        else:
            alts, lp = [(tok, 1.0)], 0.0
        top_alts = [{"token": t, "logprob": math.log(p), "bytes": list(t.encode())} for t, p in alts[:n]]
        content.append({"token": tok, "logprob": lp, "bytes": list(tok.encode()), "top_logprobs": top_alts})
    return {"content": content, "refusal": None}


def reported_usage(model: str, counted: int) -> Any:
    """The completion tokens a ``usage-<figure>`` model reports (a JSON number when ``<figure>``
    parses as a finite one, else the text), or ``counted``."""
    m = _USAGE.search(model)
    if m is None:
        return counted
    raw = m.group(1)
    try:
        value = float(raw)
    except ValueError:
        return raw
    if not math.isfinite(value):
        return raw
    return int(value) if value.is_integer() and abs(value) < 2**63 else value


def _error(status: int, message: str, typ: str = "invalid_request_error") -> JSONResponse:
    from starlette.responses import JSONResponse

    return JSONResponse({"error": {"message": message, "type": typ, "code": None}}, status_code=status)


def create_fake_provider_app(qualities: dict[str, float] | None = None, **options: Any) -> FastAPI:
    """The ASGI app. ``options``: judge_mode, default_quality, api_key,
    failure_rate, seed, latency_s, timeout_sleep_s, marker_key, rpm_quota, bomb_chars,
    trickle_interval_s, trickle_bytes (see :class:`FakeProvider`);
    batch_delay_s, batch_failure_rate (the OpenAI batch routes, :mod:`service.fake_batches`,
    whose object is ``app.state.batches``).
    The provider object is ``app.state.provider`` (its ``stats`` count requests)."""
    from fastapi import FastAPI
    from starlette.responses import JSONResponse

    from .fake_batches import FakeBatches

    batch_options = {k: options.pop(k) for k in ("batch_delay_s", "batch_failure_rate") if k in options}
    provider = FakeProvider(qualities, **options)
    app = FastAPI(title="llmduel fake provider", version="1", docs_url=None, redoc_url=None, openapi_url=None)
    app.state.provider = provider

    async def batch_line(raw: bytes, batch_id: str, endpoint: str) -> tuple[int, Any]:
        provider.stats["requests"] += 1
        if endpoint == "/v1/images/generations":
            resp = await image_answer(provider, raw, batch_id)
        else:
            resp = await provider.respond(raw, batch_id)
        return resp.status_code, json.loads(bytes(resp.body))

    batches = FakeBatches(batch_line, seed=options.get("seed", 0), **batch_options)
    app.state.batches = batches
    batches.add_routes(app, provider._check_auth)

    # plain Starlette routes: the endpoint gets the Request, no annotation magic needed
    async def chat_completions(request):
        return await provider.chat_completions(request)

    async def models(request):
        return JSONResponse(provider.models())

    async def requests(request):
        return JSONResponse({"requests": provider.requests, "stats": provider.stats})

    async def health(request):
        return JSONResponse({"status": "ok"})

    async def images(request):
        return await images_generations(provider, request)

    app.add_route("/v1/chat/completions", chat_completions, methods=["POST"])
    app.add_route("/v1/images/generations", images, methods=["POST"])
    app.add_route("/v1/models", models, methods=["GET"])
    app.add_route("/v1/requests", requests, methods=["GET"])
    app.add_route("/health", health, methods=["GET"])
    return app


# ---------------------------------------------------------------- CLI
def add_fake_provider_parser(subparsers: Any) -> argparse.ArgumentParser:
    """Register ``fake-provider`` on an argparse subparsers object."""
    p = subparsers.add_parser(
        "fake-provider",
        help="run a local OpenAI-compatible server with deterministic answers",
        description=(__doc__ or "").split("\n\n")[0],
    )
    _add_arguments(p)
    p.set_defaults(handler=run, func=run)
    return p


def _add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--host", default="127.0.0.1", help="bind address (default 127.0.0.1)")
    p.add_argument("--port", type=int, default=DEFAULT_PORT, help=f"port (default {DEFAULT_PORT})")
    p.add_argument(
        "--quality",
        action="append",
        default=[],
        metavar="NAME=VALUE",
        help="quality of a model (higher is better); repeatable. Default: the -q<number> suffix of the name, else 1.0",
    )
    p.add_argument(
        "--judge-mode",
        choices=JUDGE_MODES,
        default="strict",
        help="strict: the higher quality always wins; bradley-terry: wins with probability q_a/(q_a+q_b)",
    )
    p.add_argument(
        "--api-key-env", default=None, metavar="VAR", help="require 'Authorization: Bearer $VAR' on requests"
    )
    p.add_argument("--failure-rate", type=float, default=0.0, help="random 503 rate (default 0)")
    p.add_argument("--seed", type=int, default=0, help="seed of the failure draws")
    p.add_argument("--latency", type=float, default=0.0, help="seconds added to each answer")
    p.add_argument(
        "--marker-key",
        default=None,
        metavar="TEXT",
        help="the provider's secret: seals the quality markers and keys the answer texts "
        "(default: LLMDUEL_FAKE_SECRET, else random per process)",
    )
    p.add_argument(
        "--rpm-quota",
        type=int,
        default=None,
        metavar="N",
        help="accept at most N requests in any 60 s, then answer 429 with Retry-After (a provider's quota)",
    )
    p.add_argument("--bomb-chars", type=int, default=1_000_000, help="length of a bomb-* model's answer")
    p.add_argument(
        "--trickle-interval", type=float, default=2.0, help="seconds between the bytes of a fault-trickle answer"
    )
    p.add_argument(
        "--batch-delay",
        type=float,
        default=0.0,
        metavar="SECONDS",
        help="a batch (POST /v1/batches) stays in_progress this long before it completes (default 0)",
    )
    p.add_argument(
        "--batch-failure-rate",
        type=float,
        default=0.0,
        metavar="R",
        help="each request of a batch fails (error file) with probability R (default 0)",
    )
    p.add_argument("--log-level", default="warning", help="uvicorn log level")


def run(args: argparse.Namespace) -> int:
    """Serve until interrupted. Returns a process exit code."""
    import os
    import sys

    import uvicorn

    try:
        qualities = parse_quality_options(args.quality)
    except ValueError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    api_key = None
    if args.api_key_env:
        api_key = os.environ.get(args.api_key_env)
        if not api_key:
            print(f"error: environment variable {args.api_key_env} is not set", file=sys.stderr)
            return 2
    marker_key = args.marker_key
    if marker_key is None:
        from .config import Settings, SettingsError

        try:
            marker_key = Settings.from_env().fake_secret
        except SettingsError as exc:
            print(f"error: {exc}", file=sys.stderr)
            return 2
    try:
        app = create_fake_provider_app(
            qualities,
            judge_mode=args.judge_mode,
            api_key=api_key,
            failure_rate=args.failure_rate,
            seed=args.seed,
            latency_s=args.latency,
            marker_key=marker_key,
            rpm_quota=args.rpm_quota,
            bomb_chars=args.bomb_chars,
            trickle_interval_s=args.trickle_interval,
            batch_delay_s=args.batch_delay,
            batch_failure_rate=args.batch_failure_rate,
        )
    except ValueError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    host = f"[{args.host}]" if ":" in args.host else args.host
    print(
        f"fake provider: OpenAI-compatible API at http://{host}:{args.port}/v1 "
        f"(judge mode {args.judge_mode}; Ctrl-C to stop)",
        file=sys.stderr,
        flush=True,
    )
    uvicorn.run(app, host=args.host, port=args.port, log_level=args.log_level)
    return 0


def main(argv: list[str] | None = None) -> int:
    """``python -m service.fake_provider [options]`` (same options as the subcommand)."""
    parser = argparse.ArgumentParser(prog="llmduel fake-provider")
    _add_arguments(parser)
    return run(parser.parse_args(argv))


if __name__ == "__main__":
    raise SystemExit(main())
