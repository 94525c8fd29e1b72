"""Anthropic Messages API."""

from __future__ import annotations

from typing import Any

from .config import DEFAULT_ANTHROPIC_MAX_TOKENS
from .content import anthropic_content
from .http import HTTPModelClient, ResponseShapeError, _token


class AnthropicClient(HTTPModelClient):
    """``POST {base_url}/v1/messages`` with ``x-api-key`` and ``anthropic-version``.

    ``max_tokens`` is required by the API: taken from ``params`` or 1024.
    """

    kind = "anthropic"
    provider = "anthropic"

    def build_request(self, prompt, api_key, turns=None):
        cfg = self.config
        params = dict(cfg.params)
        body: dict[str, Any] = {
            "model": cfg.model,
            "max_tokens": params.pop("max_tokens", DEFAULT_ANTHROPIC_MAX_TOKENS),
            "messages": [{"role": "user", "content": anthropic_content(t)} for t in (turns or [prompt])],
        }
        if cfg.system:
            body["system"] = cfg.system
        body.update(params)
        base = cfg.base_url
        url = f"{base}/messages" if base.endswith("/v1") else f"{base}/v1/messages"
        headers = {"anthropic-version": cfg.anthropic_version}
        if api_key:
            headers["x-api-key"] = api_key
        return url, headers, body

    def parse_response(self, data):
        if not isinstance(data, dict):
            raise ResponseShapeError("response is not a JSON object")
        content = data.get("content")
        if not isinstance(content, list):
            raise ResponseShapeError("no 'content' list in the response")
        text = "".join(b.get("text", "") for b in content if isinstance(b, dict) and b.get("type") == "text")
        usage = data.get("usage") or {}
        if not isinstance(usage, dict):
            usage = {}
        tin = _token(usage.get("input_tokens"), "input_tokens")
        if tin is not None:
            # prompt caching: cached tokens are reported separately (billed at other rates;
            # counted here at the input price, an upper bound for cache reads).
            for extra in ("cache_creation_input_tokens", "cache_read_input_tokens"):
                tin += _token(usage.get(extra), extra) or 0
        return text, tin, _token(usage.get("output_tokens"), "output_tokens")
