"""A user turn with images, and its content in each provider's own form.

A client's ``turns`` are strings, or :class:`UserTurn` (text and images) for a prompt with
images (service/prompts.py). The shapes follow the providers' published request formats:

* OpenAI-compatible chat completions: ``content`` is a list of parts,
  ``{"type": "text", "text": ...}`` and
  ``{"type": "image_url", "image_url": {"url": "data:<type>;base64,<data>"}}``;
* Anthropic messages: ``content`` blocks, the images first,
  ``{"type": "image", "source": {"type": "base64", "media_type": ..., "data": ...}}``,
  then ``{"type": "text", "text": ...}``;
* Gemini ``generateContent``: ``parts``, ``{"inline_data": {"mime_type": ..., "data": ...}}``
  and ``{"text": ...}``.
"""

from __future__ import annotations

import base64
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class ImagePart:
    media_type: str
    data: bytes

    @property
    def b64(self) -> str:
        return base64.b64encode(self.data).decode("ascii")


@dataclass(frozen=True)
class UserTurn:
    """One user turn: its text and its images (in order)."""

    text: str
    images: tuple[ImagePart, ...] = ()


Turn = str | UserTurn


def openai_content(turn: Turn) -> str | list[dict[str, Any]]:
    if isinstance(turn, str) or not turn.images:
        return turn if isinstance(turn, str) else turn.text
    parts: list[dict[str, Any]] = [{"type": "text", "text": turn.text}]
    parts.extend(
        {"type": "image_url", "image_url": {"url": f"data:{im.media_type};base64,{im.b64}"}} for im in turn.images
    )
    return parts


def anthropic_content(turn: Turn) -> str | list[dict[str, Any]]:
    if isinstance(turn, str) or not turn.images:
        return turn if isinstance(turn, str) else turn.text
    blocks: list[dict[str, Any]] = [
        {"type": "image", "source": {"type": "base64", "media_type": im.media_type, "data": im.b64}}
        for im in turn.images
    ]
    blocks.append({"type": "text", "text": turn.text})
    return blocks


def gemini_parts(turn: Turn) -> list[dict[str, Any]]:
    if isinstance(turn, str):
        return [{"text": turn}]
    parts: list[dict[str, Any]] = [{"text": turn.text}]
    parts.extend({"inline_data": {"mime_type": im.media_type, "data": im.b64}} for im in turn.images)
    return parts
