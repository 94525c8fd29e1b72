"""Text as it is stored: model answers and error messages cleaned and bounded."""

from __future__ import annotations

from typing import Any

MAX_ERROR_CHARS = 2000


MAX_ANSWER_CHARS = 1_000_000


def clean_text(text: Any, limit: int = MAX_ANSWER_CHARS) -> str:
    """Model output as storable text: str, no NUL, no lone surrogates, bounded."""
    if not isinstance(text, str):
        text = "" if text is None else str(text)
    if len(text) > limit:
        text = text[:limit] + "\n[truncated by llmduel]"
    text = text.replace("\x00", "\ufffd")
    return text.encode("utf-8", "replace").decode("utf-8")


ANSWER_MARKER = "\n[truncated by llmduel]"


# UTF-8 bytes of a stored answer: at most 4 bytes per character, plus the truncation marker.
MAX_ANSWER_BYTES = 4 * MAX_ANSWER_CHARS + len(ANSWER_MARKER.encode("utf-8"))
