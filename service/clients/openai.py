"""OpenAI-compatible chat completions (OpenAI, vLLM, Ollama, llama.cpp server,
OpenRouter, LiteLLM, the llmduel fake provider, ...)."""

from __future__ import annotations

from typing import Any

from .content import openai_content
from .http import HTTPModelClient, ResponseShapeError, _token


class OpenAIClient(HTTPModelClient):
    """``POST {base_url}/chat/completions`` with ``Authorization: Bearer <key>``
    (no Authorization header when ``api_key_env`` is not set)."""

    kind = "openai"
    provider = "openai-compatible endpoint"

    def build_request(self, prompt, api_key, turns=None):
        cfg = self.config
        messages = []
        if cfg.system:
            messages.append({"role": "system", "content": cfg.system})
        messages.extend({"role": "user", "content": openai_content(t)} for t in (turns or [prompt]))
        body: dict[str, Any] = {"model": cfg.model, "messages": messages, **cfg.params}
        headers = {"authorization": f"Bearer {api_key}"} if api_key else {}
        return f"{cfg.base_url}/chat/completions", headers, body

    def parse_logprobs(self, data):
        """``choices[0].logprobs.content``: per output token ``token``, ``logprob`` and ``top_logprobs``
        (a list of ``{token, logprob}``), returned when the request sets ``logprobs: true`` and
        ``top_logprobs: N`` (OpenAI, "Create chat completion"; vLLM and others follow it)."""
        lp = data["choices"][0].get("logprobs")
        content = lp.get("content") if isinstance(lp, dict) else None
        if not isinstance(content, list) or not content:
            return None
        return tuple(
            (str(t["token"]), tuple((str(a["token"]), float(a["logprob"])) for a in (t.get("top_logprobs") or [])))
            for t in content
        )

    def parse_response(self, data):
        if not isinstance(data, dict):
            raise ResponseShapeError("response is not a JSON object")
        choices = data.get("choices")
        if not isinstance(choices, list) or not choices:
            raise ResponseShapeError("no 'choices' in the response")
        message = choices[0].get("message")
        if not isinstance(message, dict):
            raise ResponseShapeError("choices[0] has no 'message'")
        content = message.get("content")
        if content is None:
            text = ""
        elif isinstance(content, str):
            text = content
        elif isinstance(content, list):  # content parts
            text = "".join(
                p.get("text", "") for p in content if isinstance(p, dict) and p.get("type", "text") == "text"
            )
        else:
            raise ResponseShapeError("choices[0].message.content is neither a string nor a list")
        usage = data.get("usage") or {}
        if not isinstance(usage, dict):
            usage = {}
        return (
            text,
            _token(usage.get("prompt_tokens"), "prompt_tokens"),
            _token(usage.get("completion_tokens"), "completion_tokens"),
        )
