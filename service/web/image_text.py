"""What the pages read of a duel's image names (``[image sha256:<hex>]``): pure helpers of
:mod:`service.web.image_routes` and the templates' filters."""

from __future__ import annotations

import re

from ..images.slots import NAME

# An image's name as the page reads it: its hash (the admin's dashboard) or its slot (an annotator's duel,
# service/images/slots.py).
ANY_NAME = re.compile(r"\[image (?:sha256:[0-9a-f]{64}|a|b|p[1-9][0-9]*)\]")
_SLOT = re.compile(r"(a|b|p[1-9][0-9]?)")


def without_images(text: str | None) -> str:
    """A prompt's text with its image names removed (the page shows the images themselves)."""
    return re.sub(r"\n?" + ANY_NAME.pattern, "", text or "")


def image_count(text: str | None) -> int:
    """How many images a prompt's text names (slots ``p1`` ... ``pN``)."""
    return len(ANY_NAME.findall(text or ""))


def is_image(text: str | None) -> bool:
    """Whether an answer is an image model's (its text is exactly an image's name)."""
    return ANY_NAME.fullmatch((text or "").strip()) is not None


def slot_hash(prompt: str | None, answer_a: str | None, answer_b: str | None, slot: str) -> str | None:
    """The sha256 of the image at ``slot`` of a duel, or None."""
    if not _SLOT.fullmatch(slot):
        return None
    if slot in ("a", "b"):
        m = NAME.fullmatch(((answer_a if slot == "a" else answer_b) or "").strip())
        return m.group(1) if m else None
    found = NAME.findall(prompt or "")
    n = int(slot[1:])
    return found[n - 1] if n <= len(found) else None
