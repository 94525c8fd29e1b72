"""Image models: a model entry with ``output: image`` answers a prompt with one image.

* OpenAI and any OpenAI-compatible server with the images route (LiteLLM's proxy, the llmduel
  fake provider): ``POST {base_url}/images/generations`` with ``{"model", "prompt",
  "response_format": "b64_json", **params}`` (``size``, ``quality``, ``style``, ... in
  ``params``); the answer is ``data[0].b64_json``. ``gpt-image`` models always answer in
  base64 and refuse ``response_format``, so it is not sent to them.
* Gemini: ``generateContent`` with ``generationConfig.responseModalities`` ``["TEXT",
  "IMAGE"]`` (unless ``params`` sets it); the answer is the first ``inlineData`` part.

The image is checked as a prompt image is (:func:`service.images.checks.check_image`: formats,
bytes, pixels, integrity); a refused one is a failed call. The answer's ``text`` names the image
(``[image sha256:<hex>]``, the form prompts use); the caller stores the bytes in the image store
(:mod:`service.images.store`) and the text in the answer store, so an image answer is paid once and
reused like a text one. ``params.n`` (OpenAI's route only) asks for several images a call: the
first usable one is the answer, the others follow it as (name, bytes) pairs, and the call is
charged per image returned (service/campaigns/spares.py keeps them for later duels); an image of
several that the checks refuse is charged (the provider made it) and dropped, and the call fails
only when none is usable.
"""

from __future__ import annotations

import base64
import binascii
from typing import Any

from ..images.checks import ImageError, check_image
from .config import images_per_call
from .gemini import GeminiClient
from .http import ResponseShapeError, _token
from .openai import OpenAIClient


def image_marker(sha256: str) -> str:
    """The text of an image answer: the image's name (service/prompts.py uses the same form)."""
    return f"[image sha256:{sha256}]"


def _image(b64: Any) -> tuple[str, bytes]:
    """(marker text, bytes) of a base64 image from a response; ResponseShapeError when it is refused."""
    if not isinstance(b64, str) or not b64:
        raise ResponseShapeError("no base64 image in the response")
    try:
        raw = base64.b64decode(b64, validate=True)
    except (binascii.Error, ValueError):
        raise ResponseShapeError("the image's base64 is invalid") from None
    try:
        image = check_image(raw)
    except ImageError as exc:
        raise ResponseShapeError(f"the image is refused: {exc}") from None
    return image_marker(image.sha256), raw


class OpenAIImageClient(OpenAIClient):
    """``POST {base_url}/images/generations`` (OpenAI's images API, ``b64_json``)."""

    provider = "openai-compatible images endpoint"

    def build_request(self, prompt, api_key, turns=None):
        cfg = self.config
        body: dict[str, Any] = {"model": cfg.model, "prompt": prompt}
        if "gpt-image" not in cfg.model.lower():
            body["response_format"] = "b64_json"
        body.update(cfg.params)
        headers = {"authorization": f"Bearer {api_key}"} if api_key else {}
        return f"{cfg.base_url}/images/generations", headers, body

    def parse_response(self, data):
        if not isinstance(data, dict):
            raise ResponseShapeError("response is not a JSON object")
        items = data.get("data")
        if not isinstance(items, list) or not items or not isinstance(items[0], dict):
            raise ResponseShapeError("no 'data' in the response")
        # at most the images asked for (params.n): a server sending more is not paid for them
        billed = items[: self._count]
        images, refused = [], None
        for item in billed:
            try:
                images.append(_image(item.get("b64_json") if isinstance(item, dict) else None))
            except ResponseShapeError as exc:
                refused = refused or exc
        if not images:  # nothing usable: a failed call, as for one image
            raise refused or ResponseShapeError("no image in the response")
        usage = data.get("usage") or {}
        if not isinstance(usage, dict):
            usage = {}
        tin = _token(usage.get("input_tokens", usage.get("prompt_tokens")), "input_tokens")
        tout = _token(usage.get("output_tokens", usage.get("completion_tokens")), "output_tokens")
        text, raw = images[0]
        # every image returned was made and billed by the provider, a refused one included: the call
        # is charged for len(billed) images, and the refused ones are dropped (never shown)
        return text, tin, tout, raw, images[1:], len(billed)

    @property
    def _count(self) -> int:
        return images_per_call({"kind": "openai", "params": self.config.params})


class GeminiImageClient(GeminiClient):
    """Gemini ``generateContent`` asked for an image (``responseModalities``)."""

    def build_request(self, prompt, api_key, turns=None):
        url, headers, body = super().build_request(prompt, api_key, turns)
        gen = body.setdefault("generationConfig", {})
        gen.setdefault("responseModalities", ["TEXT", "IMAGE"])
        return url, headers, body

    def parse_response(self, data):
        _, tin, tout = super().parse_response(data)
        parts = ((data.get("candidates") or [{}])[0].get("content") or {}).get("parts") or []
        for p in parts:
            inline = (p.get("inlineData") or p.get("inline_data")) if isinstance(p, dict) else None
            if isinstance(inline, dict):
                text, raw = _image(inline.get("data"))
                return text, tin, tout, raw
        raise ResponseShapeError("no image part (inlineData) in the response")
