"""Model clients: how a campaign's models are called.

```python
from service.clients import build_client, validate_client_config, Completion, ClientError

cfg = validate_client_config({"kind": "simulated"})
client = build_client(cfg, model_name="m1", fixed_cost=0.002, http=None)
completion = await client.complete("prompt")
await client.aclose()
```

Kinds: ``simulated`` (offline), ``openai`` (any OpenAI-compatible chat
completions server), ``anthropic`` (Messages API), ``gemini`` (generateContent).
See docs/clients-and-judges.md.
"""

from __future__ import annotations

from typing import Any

from .anthropic import AnthropicClient
from .base import ClientError, Completion, ModelClient, compute_cost
from .config import KINDS, validate_client_config
from .gemini import GeminiClient
from .openai import OpenAIClient
from .simulated import SimulatedClient

__all__ = [
    "KINDS",
    "ClientError",
    "Completion",
    "ModelClient",
    "SimulatedClient",
    "build_client",
    "compute_cost",
    "validate_client_config",
]


def build_client(
    cfg: dict[str, Any],
    model_name: str,
    fixed_cost: float = 0.0,
    http: Any = None,
    **options: Any,
) -> ModelClient:
    """Build the client for one model.

    ``cfg`` is validated (again) with :func:`validate_client_config`;
    ``fixed_cost`` is the model's configured per-query cost in USD (charged when
    no per-token price is configured or the provider reports no usage); ``http``
    an optional shared ``httpx.AsyncClient`` (not closed by ``aclose``; when
    ``None`` an HTTP client creates and owns its own). ``options`` are for tests:
    ``sleep`` (async callable used for backoff waits) and ``rng`` (a
    ``random.Random`` for the jitter).
    """
    cfg = validate_client_config(cfg)
    kind = cfg["kind"]
    if kind == "simulated":
        return SimulatedClient(cfg, model_name, fixed_cost)
    cls: type[ModelClient] = {"openai": OpenAIClient, "anthropic": AnthropicClient}.get(kind, GeminiClient)
    return cls(cfg, model_name, fixed_cost, http=http, **options)
