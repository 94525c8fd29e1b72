"""The fake provider's images (:mod:`service.fake_provider`): ``POST /v1/images/generations``, and
image content parts in chat completions.

* An image model's answer is a deterministic PNG of (model, prompt), keyed with the provider's
  secret. Its first row's pixels carry the answer's sealed marker (the same opaque token a text
  answer starts with: it holds the model's quality, names no model, and only this provider can
  read it), so the provider's judge tells two images apart without any name; the rest of the
  picture is a pattern drawn from the keyed hash, sharper (more stripes, higher contrast) for a
  stronger model, so a person sees the difference too. Like real providers' images, the PNG
  carries a text chunk naming the model (``Software``), which annotators must never receive.
* In a chat completion, an ``image_url`` part with a ``data:`` URL counts as the marker its pixels
  carry (none for an image not made here): a judge request showing two images is judged like one
  showing two texts; an answer to a prompt with images depends on the images' bytes too.

Pillow reads and writes every image; nothing here parses a format by hand.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import io
import json
import re
import time
from typing import TYPE_CHECKING, Any

from PIL import Image, PngImagePlugin, UnidentifiedImageError

if TYPE_CHECKING:
    from starlette.requests import Request
    from starlette.responses import JSONResponse, Response

#: What the first row of a fake image starts with, before the marker's token.
MAGIC = b"FAKEIMG1"
_SIZE = re.compile(r"(\d{1,4})x(\d{1,4})")
DEFAULT_SIZE = (96, 96)
MAX_SIDE = 1024
MAX_IMAGES = 10  # images per request (OpenAI's images API takes n from 1 to 10)
TOKEN_BYTES = 18  # a marker's token: 6-byte nonce, 8 sealed bytes, 4-byte tag


def image_size(value: Any) -> tuple[int, int] | None:
    """``"256x256"`` -> (256, 256); None when absent or not a size the fake provider draws."""
    if value is None:
        return DEFAULT_SIZE
    m = _SIZE.fullmatch(str(value))
    if m is None:
        return None
    w, h = int(m.group(1)), int(m.group(2))
    return (w, h) if 16 <= w <= MAX_SIDE and 16 <= h <= MAX_SIDE else None


def draw(marker: str, quality: float, seed: bytes, *, size: tuple[int, int], model: str) -> bytes:
    """The PNG of one answer: the marker's token in the first row, a keyed pattern, a text chunk."""
    w, h = size
    token = bytes.fromhex(marker[len("<<fake:") : -2])
    stripes = 2 + min(30, int(quality * 4))  # a stronger model draws a finer, higher-contrast pattern
    contrast = min(1.0, 0.25 + quality / 4)
    base = [seed[0], seed[1], seed[2]]
    pixels = bytearray()
    for y in range(h):
        for x in range(w):
            on = ((x * stripes) // w + (y * stripes) // h) % 2
            for c in range(3):
                v = base[c] if on else 255 - base[c]
                pixels.append(int(128 + (v - 128) * contrast))
    head = MAGIC + token
    pixels[: len(head)] = head
    image = Image.frombytes("RGB", (w, h), bytes(pixels))
    info = PngImagePlugin.PngInfo()
    info.add_text("Software", f"llmduel fake provider, model {model}")
    out = io.BytesIO()
    image.save(out, format="PNG", pnginfo=info)
    return out.getvalue()


def read_marker(data: bytes) -> str | None:
    """The marker an image's first row carries (``<<fake:TOKEN>>``), or None."""
    try:
        with Image.open(io.BytesIO(data)) as im:
            if im.size[0] * im.size[1] * 3 < len(MAGIC) + TOKEN_BYTES:
                return None
            row = im.convert("RGB").tobytes()[: len(MAGIC) + TOKEN_BYTES]
    except (UnidentifiedImageError, OSError, ValueError, SyntaxError):
        return None
    if not row.startswith(MAGIC):
        return None
    return f"<<fake:{row[len(MAGIC) :].hex()}>>"


def _data_url_bytes(url: Any) -> bytes | None:
    if not isinstance(url, str) or not url.startswith("data:") or ";base64," not in url:
        return None
    try:
        return base64.b64decode(url.partition(",")[2], validate=True)
    except (binascii.Error, ValueError):
        return None


def content_text(content: Any) -> str:
    """A message's text, each ``image_url`` part as the marker it carries (or its sha256 when none)."""
    if isinstance(content, str):
        return content
    if not isinstance(content, list):
        return ""
    out = []
    for p in content:
        if not isinstance(p, dict):
            continue
        if p.get("type", "text") == "text":
            out.append(str(p.get("text", "")))
        elif p.get("type") == "image_url":
            raw = _data_url_bytes((p.get("image_url") or {}).get("url"))
            if raw is not None:
                out.append(read_marker(raw) or f"[image {hashlib.sha256(raw).hexdigest()[:16]}]")
    return "".join(out)


def _error(status: int, message: str) -> JSONResponse:
    from starlette.responses import JSONResponse

    return JSONResponse({"error": {"message": message, "type": "invalid_request_error", "code": None}}, status)


async def images_generations(provider: Any, request: Request) -> Response:
    """``POST /v1/images/generations`` of ``provider`` (a :class:`service.fake_provider.FakeProvider`):
    ``n`` PNGs (1 to ``MAX_IMAGES``, default 1) as ``b64_json``, each distinct."""
    provider.stats["requests"] += 1
    denied = provider._check_auth(request) or provider._over_quota()
    if denied is not None:
        provider.stats["errors"] += 1
        return denied
    return await image_answer(provider, await request.body())


async def image_answer(provider: Any, raw: bytes, batch_id: str | None = None) -> Response:
    """The images of one request body (the route's, or a batch line's with its ``batch_id``)."""
    from starlette.responses import JSONResponse

    try:
        body = json.loads(raw)
    except ValueError:
        return _error(400, "request body is not valid JSON")
    if not isinstance(body, dict) or not isinstance(body.get("model"), str) or not body["model"]:
        return _error(400, "'model' is required")
    model, prompt = body["model"], body.get("prompt")
    if not isinstance(prompt, str) or not prompt:
        return _error(400, "'prompt' is required")
    size = image_size(body.get("size"))
    if size is None:
        return _error(400, f"'size' must be WIDTHxHEIGHT, each side 16 to {MAX_SIDE}")
    n = body.get("n", 1)
    if not isinstance(n, int) or isinstance(n, bool) or not 1 <= n <= MAX_IMAGES:
        return _error(400, f"'n' must be a whole number from 1 to {MAX_IMAGES}")
    provider.seen.add(model)
    fault = await provider._fault(model, raw)
    if fault is not None:
        provider.stats["errors"] += 1
        return fault
    provider.stats["answers"] += 1
    # image k of a request: the first as a request for one draws it, the others keyed by k (distinct images);
    # every call draws anew (its sequence number in the keys), as a provider samples each request
    calls = provider.stats.setdefault("image_calls", 0)
    provider.stats["image_calls"] = calls + 1
    data, markers = [], []
    for k in range(n):
        tail = () if (k, n) == (0, 1) else (f"{calls}:{k}",)
        marker = provider.seal(provider.quality(model), provider._keyed("nonce", model, prompt, *tail)[:6])
        png = draw(
            marker, provider.quality(model), provider._keyed("image", model, prompt, *tail), size=size, model=model
        )
        data.append({"b64_json": base64.b64encode(png).decode()})
        markers.append(marker[7:-2])
    if len(provider.requests) < 1_000_000:
        entry = {"model": model, "kind": "image", "prompt": prompt, "marker": markers[0], "n": n, "markers": markers}
        if batch_id is not None:
            entry["batch"] = batch_id
        provider.requests.append(entry)
    return JSONResponse({"created": int(time.time()), "data": data})
