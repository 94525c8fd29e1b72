"""Warnings for ``params`` keys a provider does not document.

A client's ``params`` go into the request body as they are, so a misspelt key
(``temprature``) is silently ignored by some servers and refused by others only at the
first call. Nothing here refuses a key: OpenAI-compatible servers other than OpenAI's own
(vLLM, Ollama, llama.cpp, LiteLLM) take parameters of their own, and providers add new ones.
For the three providers whose request bodies are published, a key outside the documented
set is a **warning** on the campaign (``config_warnings``), with the closest documented key.

Sources (the providers' API references): OpenAI "Create chat completion"; Anthropic
"Messages"; Gemini ``GenerateContentRequest`` and ``GenerationConfig`` (which accept
camelCase and snake_case spellings).
"""

from __future__ import annotations

import difflib
import re
from typing import Any
from urllib.parse import urlsplit

OPENAI_PARAMS = frozenset(
    {
        "audio",
        "frequency_penalty",
        "function_call",
        "functions",
        "logit_bias",
        "logprobs",
        "max_completion_tokens",
        "max_tokens",
        "metadata",
        "modalities",
        "parallel_tool_calls",
        "prediction",
        "presence_penalty",
        "prompt_cache_key",
        "reasoning_effort",
        "response_format",
        "safety_identifier",
        "seed",
        "service_tier",
        "stop",
        "store",
        "stream_options",
        "temperature",
        "tool_choice",
        "tools",
        "top_logprobs",
        "top_p",
        "user",
        "verbosity",
        "web_search_options",
    }
)
ANTHROPIC_PARAMS = frozenset(
    {
        "container",
        "context_management",
        "max_tokens",
        "mcp_servers",
        "metadata",
        "service_tier",
        "stop_sequences",
        "temperature",
        "thinking",
        "tool_choice",
        "tools",
        "top_k",
        "top_p",
    }
)
GEMINI_PARAMS = frozenset(
    {
        # GenerateContentRequest (top level)
        "cachedContent",
        "labels",
        "safetySettings",
        "toolConfig",
        "tools",
        # GenerationConfig
        "candidateCount",
        "enableEnhancedCivicAnswers",
        "frequencyPenalty",
        "imageConfig",
        "logprobs",
        "maxOutputTokens",
        "mediaResolution",
        "presencePenalty",
        "responseJsonSchema",
        "responseLogprobs",
        "responseMimeType",
        "responseModalities",
        "responseSchema",
        "routingConfig",
        "seed",
        "speechConfig",
        "stopSequences",
        "temperature",
        "thinkingConfig",
        "topK",
        "topP",
        "generationConfig",
    }
)
# The OpenAI list applies to OpenAI's own host only: other OpenAI-compatible servers have their own.
OPENAI_HOSTS = frozenset({"api.openai.com"})


def _camel(key: str) -> str:
    return re.sub(r"_([a-z])", lambda m: m.group(1).upper(), key)


def documented_params(client: dict[str, Any]) -> frozenset[str] | None:
    """The documented ``params`` keys of a client config, or None when the server's set is not known."""
    kind = client.get("kind")
    if kind == "openai":
        host = (urlsplit(str(client.get("base_url") or "https://api.openai.com/v1")).hostname or "").lower()
        return OPENAI_PARAMS if host in OPENAI_HOSTS else None
    if kind == "anthropic":
        return ANTHROPIC_PARAMS
    if kind == "gemini":
        return GEMINI_PARAMS
    return None


def params_warnings(owner: str, client: dict[str, Any]) -> list[str]:
    """One warning per ``params`` key of ``client`` its provider does not document (``owner``
    names the model or the judge in the message)."""
    known = documented_params(client)
    params = client.get("params") or {}
    if known is None or not isinstance(params, dict):
        return []
    out = []
    for key in sorted(params):
        spelled = _camel(key) if client.get("kind") == "gemini" else key
        if spelled in known:
            continue
        close = difflib.get_close_matches(spelled, sorted(known), n=1, cutoff=0.6)
        hint = f" (did you mean {close[0]!r}?)" if close else ""
        out.append(f"{owner}: params.{key} is not a documented {client['kind']} parameter{hint}; it is sent as is")
    return out


def judge_clients(judge: dict[str, Any], owner: str = "judge") -> list[tuple[str, dict[str, Any]]]:
    """(owner, client config) of every LLM call a judge config makes: an LLM judge, a jury's
    jurors, a hybrid judge's automatic judge."""
    out = []
    if isinstance(judge.get("client"), dict):
        out.append((owner, judge["client"]))
    for n, member in enumerate(judge.get("judges") or []):
        if isinstance(member, dict):
            out.extend(judge_clients(member, f"{owner} {n + 1}"))
    if isinstance(judge.get("llm"), dict):
        out.extend(judge_clients(judge["llm"], owner))
    return out


def campaign_params_warnings(models: list[dict[str, Any]], judge: dict[str, Any] | None) -> list[str]:
    """The ``params`` warnings of every model's client and of the judge's clients."""
    out = [w for m in models for w in params_warnings(f"model {m['name']!r}", m.get("client") or {})]
    for owner, client in judge_clients(judge or {}):
        out.extend(params_warnings(owner, client))
    return out


def same_model(a: dict[str, Any], b: dict[str, Any]) -> bool:
    """Do two client configs call the same model of the same server (kind, model, base URL)?"""
    if a.get("kind") != b.get("kind") or a.get("kind") == "simulated":
        return False
    model_a, model_b = str(a.get("model") or "").strip().lower(), str(b.get("model") or "").strip().lower()
    url_a, url_b = (str(x.get("base_url") or "").rstrip("/").lower() for x in (a, b))
    return bool(model_a) and model_a == model_b and url_a == url_b
