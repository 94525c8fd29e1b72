"""Model clients: how a campaign's models are called.

```python
from service.clients import build_client, parse_client_config, Completion, ClientError

cfg = parse_client_config({"kind": "simulated"})   # validated once: a SimulatedClientConfig
client = build_client(cfg, model_name="m1", fixed_cost=0.002, http=None)
completion = await client.complete("prompt")
await client.aclose()
```

Kinds: ``simulated`` (offline), ``openai`` (any OpenAI-compatible chat
completions server), ``anthropic`` (Messages API), ``gemini`` (generateContent);
one pydantic model per kind in :mod:`service.clients.config`. See docs/clients-and-judges.md.
"""

from __future__ import annotations

from typing import Any

from .anthropic import AnthropicClient
from .base import ClientError, Completion, ModelClient, compute_cost
from .config import (
    KINDS,
    AnthropicClientConfig,
    AnyClientConfig,
    ClientConfig,
    GeminiClientConfig,
    OpenAIClientConfig,
    SimulatedClientConfig,
    parse_client_config,
    validate_client_config,
)
from .gemini import GeminiClient
from .openai import OpenAIClient
from .simulated import SimulatedClient

__all__ = [
    "KINDS",
    "AnthropicClientConfig",
    "AnyClientConfig",
    "ClientConfig",
    "GeminiClientConfig",
    "OpenAIClientConfig",
    "SimulatedClientConfig",
    "parse_client_config",
    "ClientError",
    "Completion",
    "ModelClient",
    "SimulatedClient",
    "build_client",
    "compute_cost",
    "validate_client_config",
]


def build_client(
    cfg: AnyClientConfig,
    model_name: str,
    fixed_cost: float = 0.0,
    http: Any = None,
    secret: bytes | None = None,
    output: str = "text",
    **options: Any,
) -> ModelClient:
    """Build the client for one model from its validated config.

    ``cfg`` is a model of :data:`ClientConfig` (:func:`parse_client_config` turns a
    dict into one; it is not validated again here). ``fixed_cost`` is the model's
    configured per-query cost in USD (charged when no per-token price is configured
    or the provider reports no usage); ``http`` an optional shared
    ``httpx.AsyncClient`` (not closed by ``aclose``; when ``None`` an HTTP client
    creates and owns its own). ``secret`` keys a simulated client's texts (a campaign's
    answer secret; other kinds ignore it). ``limiter``: the shared
    :class:`~service.clients.ratelimit.RateLimiter`, used when an HTTP config sets ``rpm`` or ``tpm``.
    ``output``: the model entry's ``output``; ``image`` builds an image client
    (:mod:`service.clients.images`). Other ``options`` are for tests: ``sleep`` (async callable
    used for backoff waits) and ``rng`` (a ``random.Random`` for the jitter).
    """
    if output == "image":
        from .images import GeminiImageClient, OpenAIImageClient

        if isinstance(cfg, OpenAIClientConfig):
            return OpenAIImageClient(cfg, model_name, fixed_cost, http=http, **options)
        if isinstance(cfg, GeminiClientConfig):
            return GeminiImageClient(cfg, model_name, fixed_cost, http=http, **options)
        raise TypeError(f"output image needs an openai or gemini client, got {type(cfg).__name__}")
    if isinstance(cfg, SimulatedClientConfig):
        return SimulatedClient(cfg, model_name, fixed_cost, secret)
    if isinstance(cfg, OpenAIClientConfig):
        return OpenAIClient(cfg, model_name, fixed_cost, http=http, **options)
    if isinstance(cfg, AnthropicClientConfig):
        return AnthropicClient(cfg, model_name, fixed_cost, http=http, **options)
    if isinstance(cfg, GeminiClientConfig):
        return GeminiClient(cfg, model_name, fixed_cost, http=http, **options)
    raise TypeError(f"build_client needs a validated client config (parse_client_config), got {type(cfg).__name__}")
