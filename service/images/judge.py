"""A judge that sees images: the LLM judge's model client, with the images its prompt names attached.

The LLM judge (judges/llm.py) renders its template as text: the question and both answers,
where a prompt's images and an image model's answers appear as their names
(``[image sha256:<hex>]``, service/prompts.py, service/clients/images.py). :class:`VisionJudgeClient`
wraps the judge's model client: it replaces each name by a label (``[image 1]``, ``[image 2]``,
... in order of first appearance, so the question's images come first, then answer A's, then
answer B's, as the template shows them) and sends the images' *blind copies* (no metadata,
service/images/checks.py) after the text, in the provider's own form (service/clients/content.py),
with one line saying which label is which image. A prompt without image names is sent unchanged.
"""

from __future__ import annotations

import asyncio
import re
from typing import Any, Callable

from ..clients.content import ImagePart, UserTurn
from .slots import NAME as _NAME

#: (hashes) -> {hash: (media type, bytes)} of the blind copies found in the image store
Loader = Callable[[list[str]], dict[str, tuple[str, bytes]]]


def label_images(text: str, found: set[str]) -> tuple[str, list[str]]:
    """``text`` with each stored image's name replaced by ``[image N]``, and the hashes in label order."""
    order: list[str] = []

    def label(m: re.Match) -> str:
        h = m.group(1)
        if h not in found:
            return m.group(0)
        if h not in order:
            order.append(h)
        return f"[image {order.index(h) + 1}]"

    return _NAME.sub(label, text), order


class VisionJudgeClient:
    """The judge's model client with images: ``complete(prompt)`` attaches the images ``prompt`` names."""

    def __init__(self, inner: Any, load: Loader) -> None:
        self.inner = inner
        self.load = load

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)

    async def complete(self, prompt: str, turns: list | None = None) -> Any:
        hashes = list(dict.fromkeys(_NAME.findall(prompt)))
        if not hashes or turns:
            return await self.inner.complete(prompt, turns=turns) if turns else await self.inner.complete(prompt)
        images = await asyncio.to_thread(self.load, hashes)
        text, order = label_images(prompt, set(images))
        if not order:
            return await self.inner.complete(prompt)
        text += "\n\n(" + ", ".join(f"[image {n}]" for n in range(1, len(order) + 1)) + " follow in this order.)"
        parts = tuple(ImagePart(*images[h]) for h in order)
        return await self.inner.complete(text, turns=[UserTurn(text, parts)])

    async def aclose(self) -> None:
        await self.inner.aclose()
