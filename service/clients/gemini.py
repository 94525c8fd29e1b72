"""Google Gemini generateContent."""

from __future__ import annotations

from typing import Any

from .content import gemini_parts
from .http import HTTPModelClient, ResponseShapeError, _token

# params keys that belong at the top level of the request; all others go into
# generationConfig (temperature, maxOutputTokens, topP, thinkingConfig, ...).
_TOP_LEVEL = {"safetySettings", "tools", "toolConfig", "cachedContent", "labels"}


class GeminiClient(HTTPModelClient):
    """``POST {base_url}/models/{model}:generateContent`` with the key in the
    ``x-goog-api-key`` header (never in the URL, so it cannot leak into logs)."""

    kind = "gemini"
    provider = "gemini"

    def build_request(self, prompt, api_key, turns=None):
        cfg = self.config
        model = cfg.model.removeprefix("models/")
        body: dict[str, Any] = {"contents": [{"role": "user", "parts": gemini_parts(t)} for t in (turns or [prompt])]}
        if cfg.system:
            body["systemInstruction"] = {"parts": [{"text": cfg.system}]}
        gen = {k: v for k, v in cfg.params.items() if k not in _TOP_LEVEL}
        if gen:
            body["generationConfig"] = gen
        body.update({k: v for k, v in cfg.params.items() if k in _TOP_LEVEL})
        headers = {"x-goog-api-key": api_key} if api_key else {}
        return f"{cfg.base_url}/models/{model}:generateContent", headers, body

    def parse_logprobs(self, data):
        """``candidates[0].logprobsResult``: ``chosenCandidates`` (one ``{token, logProbability}`` per decoding
        step) and ``topCandidates`` (per step, ``candidates`` sorted by log probability), returned when
        ``generationConfig`` sets ``responseLogprobs: true`` and ``logprobs: N`` (Gemini API,
        ``GenerateContentResponse``, ``LogprobsResult``)."""
        res = data["candidates"][0].get("logprobsResult")
        if not isinstance(res, dict):
            return None
        chosen = res.get("chosenCandidates") or []
        top = res.get("topCandidates") or []
        if not isinstance(chosen, list) or not chosen:
            return None
        out = []
        for n, c in enumerate(chosen):
            alts = top[n].get("candidates") or [] if n < len(top) and isinstance(top[n], dict) else []
            pairs = tuple((str(a["token"]), float(a.get("logProbability", 0.0))) for a in alts)
            out.append((str(c.get("token", "")), pairs or ((str(c.get("token", "")), float(c["logProbability"])),)))
        return tuple(out)

    def parse_response(self, data):
        if not isinstance(data, dict):
            raise ResponseShapeError("response is not a JSON object")
        candidates = data.get("candidates")
        if not isinstance(candidates, list) or not candidates:
            reason = (data.get("promptFeedback") or {}).get("blockReason")
            raise ResponseShapeError(
                f"no candidates (prompt blocked: {reason})" if reason else "no candidates in the response"
            )
        content = candidates[0].get("content") or {}
        parts = content.get("parts") or []
        text = "".join(p.get("text", "") for p in parts if isinstance(p, dict) and not p.get("thought"))
        usage = data.get("usageMetadata") or {}
        if not isinstance(usage, dict):
            usage = {}
        tin = _token(usage.get("promptTokenCount"), "promptTokenCount")
        tout = None
        if tin is not None:
            # candidatesTokenCount is absent for an empty answer; thinking tokens bill as output.
            tout = (_token(usage.get("candidatesTokenCount"), "candidatesTokenCount") or 0) + (
                _token(usage.get("thoughtsTokenCount"), "thoughtsTokenCount") or 0
            )
        return text, tin, tout
