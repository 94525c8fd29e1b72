"""Builtin real-world instances (package data) and their loader.

The JSON files next to this module are derived from ``../shared/data`` by
:mod:`algorithms.research.realworld` (rebuild with
``python -m algorithms.research.realworld``); each carries its ``provenance``.
Format: ``{"names": [...], "costs": [...], "preference": [[...]], "provenance": {...}, ...}``.
"""

from __future__ import annotations

import json
from importlib import resources

__all__ = ["builtin_instance_names", "load_builtin_instance", "BUILTIN_DESCRIPTIONS"]

BUILTIN_DESCRIPTIONS = {
    "search": "Search Arena, empirical, 11 models (gemini-2.5-pro-grounding wins)",
    "search-no-gemini": "Search Arena, empirical, 10 models (sonar-reasoning-pro-high wins)",
    "text": "text-to-text, rating-implied (LMArena 2025-04-24), the paper's 5 models",
    "vision": "vision, rating-implied (LMArena 2025-04-24), the paper's 4 named models",
    "image": "text-to-image, rating-implied (LMArena 2025-04-24), 8 models",
    "genai-image": "GenAI-Arena text-to-image, empirical (2024-02-20), 6 models, unit costs",
    "genai-image-ties": "GenAI-Arena text-to-image with its ties (27% of votes), 6 models, unit costs",
    "genai-image-ties4": "GenAI-Arena text-to-image, the 4 models below the top two, 33% ties, unit costs",
}


def builtin_instance_names() -> list[str]:
    """Names accepted by :func:`load_builtin_instance`, in the paper's order."""
    return list(BUILTIN_DESCRIPTIONS)


def load_builtin_instance(name: str) -> dict:
    """The instance JSON dict for ``name``; ``KeyError`` (one-line message) if unknown."""
    if name not in BUILTIN_DESCRIPTIONS:
        raise KeyError(f"unknown builtin instance {name!r} (known: {', '.join(BUILTIN_DESCRIPTIONS)})")
    text = resources.files(__name__).joinpath(f"{name}.json").read_text(encoding="utf-8")
    return json.loads(text)
