"""Validation of a model's ``client`` config.

``validate_client_config(cfg)`` returns a new, normalised dict (defaults filled
in) or raises ``ValueError`` whose message names the offending field. Values that
might be secrets are never echoed back in error messages.
"""

from __future__ import annotations

import math
import re
from typing import Any

KINDS = ("simulated", "openai", "anthropic", "gemini")

DEFAULT_BASE_URLS = {
    "openai": "https://api.openai.com/v1",
    "anthropic": "https://api.anthropic.com",
    "gemini": "https://generativelanguage.googleapis.com/v1beta",
}
# openai-compatible servers (vLLM, Ollama, llama.cpp) often need no key: no default.
DEFAULT_API_KEY_ENVS = {
    "openai": None,
    "anthropic": "ANTHROPIC_API_KEY",
    "gemini": "GEMINI_API_KEY",
}
DEFAULT_ANTHROPIC_VERSION = "2023-06-01"
DEFAULT_ANTHROPIC_MAX_TOKENS = 1024

_HTTP_FIELDS = {
    "kind",
    "base_url",
    "model",
    "api_key_env",
    "params",
    "price",
    "system",
    "timeout_s",
    "max_attempts",
    "backoff_base_s",
    "backoff_max_s",
    "max_retry_after_s",
    "max_cost_per_query",
}
_ALLOWED = {
    "simulated": {"kind", "seed", "failure_rate", "latency_s"},
    "openai": _HTTP_FIELDS,
    "anthropic": _HTTP_FIELDS | {"anthropic_version"},
    "gemini": _HTTP_FIELDS,
}
# params that the client itself sets; overriding them would break the request.
_RESERVED_PARAMS = {
    "openai": {"model", "messages", "stream", "n"},
    "anthropic": {"model", "messages", "stream", "system"},
    "gemini": {"contents", "systemInstruction", "system_instruction"},
}
_ENV_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]{0,127}$")


def _err(field: str, msg: str) -> ValueError:
    return ValueError(f"client.{field}: {msg}")


def finite_number(v: Any) -> float | None:
    """``v`` as a finite float, or ``None`` (bools, strings, NaN, inf, huge ints)."""
    if isinstance(v, bool) or not isinstance(v, (int, float)):
        return None
    try:
        x = float(v)
    except OverflowError:
        return None
    return x if math.isfinite(x) else None


def _number(cfg: dict, field: str, default: float, lo: float, hi: float, lo_open: bool = False) -> float:
    v = finite_number(cfg.get(field, default))
    if v is None:
        raise _err(field, f"must be a finite number, got {type(cfg.get(field)).__name__}")
    if v < lo or v > hi or (lo_open and v == lo):
        left = "(" if lo_open else "["
        raise _err(field, f"must be in {left}{lo}, {hi}], got {v}")
    return float(v)


def _int(cfg: dict, field: str, default: int, lo: int, hi: int) -> int:
    v = cfg.get(field, default)
    if isinstance(v, bool) or not isinstance(v, int):
        raise _err(field, f"must be an integer, got {type(v).__name__}")
    if v < lo or v > hi:
        raise _err(field, f"must be between {lo} and {hi}, got {v}")
    return v


def _price(v: Any) -> dict[str, float] | None:
    if v is None:
        return None
    if not isinstance(v, dict):
        raise _err("price", 'must be an object like {"input_per_1m": 0.27, "output_per_1m": 0.85}')
    unknown = set(v) - {"input_per_1m", "output_per_1m"}
    if unknown:
        raise _err("price", f"unknown field(s) {sorted(unknown)}; expected input_per_1m and output_per_1m")
    out = {}
    for k in ("input_per_1m", "output_per_1m"):
        if k not in v:
            raise _err(f"price.{k}", "is required (USD per million tokens)")
        x = finite_number(v[k])
        if x is None or x < 0:
            raise _err(f"price.{k}", "must be a non-negative number (USD per million tokens)")
        out[k] = x
    return out


def validate_client_config(cfg: Any) -> dict[str, Any]:
    """Check a client config and return it normalised (a new dict).

    Raises ``ValueError`` with a message naming the field, e.g.
    ``client.model: is required for kind 'openai'``.
    """
    if not isinstance(cfg, dict):
        raise ValueError("client: must be an object with a 'kind' field")
    if "api_key" in cfg or "key" in cfg:
        # Deliberately do not echo the value: it is probably a secret.
        raise _err(
            "api_key",
            "keys are not accepted in the config; put the key in an environment "
            "variable and name that variable in 'api_key_env'",
        )
    kind = cfg.get("kind")
    if kind not in KINDS:
        raise _err("kind", f"must be one of {list(KINDS)}, got {kind!r}")
    unknown = set(cfg) - _ALLOWED[kind]
    if unknown:
        raise _err(
            sorted(unknown)[0],
            f"unknown field for kind {kind!r} (allowed: {sorted(_ALLOWED[kind])})",
        )

    if kind == "simulated":
        seed = cfg.get("seed", 0)
        if isinstance(seed, bool) or not isinstance(seed, int):
            raise _err("seed", f"must be an integer, got {type(seed).__name__}")
        return {
            "kind": "simulated",
            "seed": seed,
            "failure_rate": _number(cfg, "failure_rate", 0.0, 0.0, 1.0),
            "latency_s": _number(cfg, "latency_s", 0.0, 0.0, 60.0),
        }

    out: dict[str, Any] = {"kind": kind}
    base_url = cfg.get("base_url", DEFAULT_BASE_URLS[kind])
    if not isinstance(base_url, str) or not re.match(r"^https?://[^\s/]+", base_url):
        raise _err("base_url", "must be an http:// or https:// URL")
    out["base_url"] = base_url.rstrip("/")

    model = cfg.get("model")
    if not isinstance(model, str) or not model.strip():
        raise _err("model", f"is required for kind {kind!r} (the provider's model id)")
    out["model"] = model

    env = cfg.get("api_key_env", DEFAULT_API_KEY_ENVS[kind])
    if env is not None:
        if not isinstance(env, str) or not _ENV_NAME.match(env):
            # Not echoed: people paste the key itself here by mistake.
            raise _err(
                "api_key_env",
                "must be the NAME of an environment variable (letters, digits, underscore), not the key itself",
            )
    out["api_key_env"] = env

    params = cfg.get("params", {})
    if params is None:
        params = {}
    if not isinstance(params, dict):
        raise _err("params", "must be an object of extra request parameters")
    reserved = set(params) & _RESERVED_PARAMS[kind]
    if reserved:
        raise _err(f"params.{sorted(reserved)[0]}", "is set by the client and cannot be overridden")
    out["params"] = dict(params)

    out["price"] = _price(cfg.get("price"))
    if cfg.get("max_cost_per_query") is not None:
        cap = finite_number(cfg.get("max_cost_per_query"))
        if cap is None or cap < 0:
            raise _err("max_cost_per_query", "must be a non-negative number (USD; the most one call can cost)")
        out["max_cost_per_query"] = cap

    system = cfg.get("system")
    if system is not None and not isinstance(system, str):
        raise _err("system", "must be a string (a system prompt)")
    out["system"] = system

    out["timeout_s"] = _number(cfg, "timeout_s", 60.0, 0.0, 3600.0, lo_open=True)
    out["max_attempts"] = _int(cfg, "max_attempts", 4, 1, 10)
    out["backoff_base_s"] = _number(cfg, "backoff_base_s", 0.5, 0.0, 60.0)
    out["backoff_max_s"] = _number(cfg, "backoff_max_s", 20.0, 0.0, 600.0)
    out["max_retry_after_s"] = _number(cfg, "max_retry_after_s", 60.0, 0.0, 3600.0)

    if kind == "anthropic":
        ver = cfg.get("anthropic_version", DEFAULT_ANTHROPIC_VERSION)
        if not isinstance(ver, str) or not ver:
            raise _err("anthropic_version", "must be a non-empty string like '2023-06-01'")
        out["anthropic_version"] = ver
    return out


# ---------------------------------------------------------------- cost upper bound
# Tokens a chat template adds around the messages (role markers, separators).
TEMPLATE_OVERHEAD_TOKENS = 256


def output_token_limit(cfg: dict[str, Any]) -> int | None:
    """The configured maximum of output tokens of one call, or ``None`` when unset."""
    params = cfg.get("params") or {}
    kind = cfg.get("kind")
    if kind == "anthropic":
        v = params.get("max_tokens", DEFAULT_ANTHROPIC_MAX_TOKENS)
    elif kind == "gemini":
        gen = params.get("generationConfig") or params.get("generation_config") or {}
        v = params.get("maxOutputTokens", gen.get("maxOutputTokens") if isinstance(gen, dict) else None)
    else:
        v = params.get("max_completion_tokens", params.get("max_tokens"))
    if isinstance(v, bool) or not isinstance(v, int) or v < 0:
        return None
    return v


def call_cost_bound(
    cfg: dict[str, Any], fixed_cost: float, input_bytes: int, max_output_tokens: int | None = None
) -> float | None:
    """An upper bound (USD) of what one call of a validated client config can be charged.

    A call is charged its per-token cost when the config has ``price`` and the
    provider reports usage, else ``fixed_cost``. Without ``price`` the bound is
    ``fixed_cost``. With ``price``: ``max_cost_per_query`` when set, else
    ``(I * input_per_1m + max_tokens * output_per_1m) / 1e6`` where the input
    token count is bounded by ``I = input_bytes + bytes(system) +
    TEMPLATE_OVERHEAD_TOKENS`` (a token of a byte-level tokenizer covers at least
    one UTF-8 byte). The output-token limit is the config's (``params.max_tokens``
    and the like), else ``max_output_tokens`` (the provider's limit from the price
    map, :mod:`service.pricing`). ``None`` when neither a cap nor a limit is known.
    """
    fixed = max(0.0, float(fixed_cost))
    price = cfg.get("price")
    if cfg.get("kind") == "simulated" or price is None:
        return fixed
    cap = cfg.get("max_cost_per_query")
    if cap is not None:
        return max(fixed, float(cap))
    max_tokens = output_token_limit(cfg)
    if max_tokens is None:
        max_tokens = max_output_tokens
    if max_tokens is None:
        return None
    system = cfg.get("system") or ""
    in_tokens = int(input_bytes) + len(system.encode("utf-8")) + TEMPLATE_OVERHEAD_TOKENS
    bound = (in_tokens * float(price["input_per_1m"]) + max_tokens * float(price["output_per_1m"])) / 1e6
    return max(fixed, bound)
