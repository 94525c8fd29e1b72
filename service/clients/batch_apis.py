"""The batch API of a model client config (:func:`build_batch_api`)."""

from __future__ import annotations

from typing import Any

import httpx

from .batch import BatchAPI
from .batch_anthropic import AnthropicBatches
from .batch_gemini import GeminiBatches
from .batch_openai import OpenAIBatches


def build_batch_api(cfg: Any, http: httpx.AsyncClient) -> BatchAPI | None:
    """The batch API of a validated client config, or ``None`` when its kind has none (simulated)."""
    kind = getattr(cfg, "kind", None)
    if kind == "openai":
        return OpenAIBatches(cfg, http)
    if kind == "anthropic":
        return AnthropicBatches(cfg, http)
    if kind == "gemini":
        return GeminiBatches(cfg, http)
    return None
