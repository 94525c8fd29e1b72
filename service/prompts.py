"""Prompt objects: what one campaign prompt is, whatever form it arrived in.

A campaign's ``prompts`` are strings or objects (the REST body and campaign files,
``service/campaign_files.py``, use the same shapes)::

    "Write a haiku about tea."
    {"id": "q1", "prompt": "Write a haiku.", "category": "poetry", "reference": "..."}
    {"id": "q2", "turns": ["Name a prime.", {"content": "Now a larger one."}]}

:func:`normalize_prompt` turns each into the columns of the ``prompts`` table:
``text`` (what the judge and the duel log show), ``qid``, ``category``, ``turns``
(the user turns of a multi-turn prompt, else None) and ``reference``.

**choice** (multi-turn): a prompt with several user turns is sent to each model as
ONE call whose messages are the user turns in order (consecutive user messages);
the model answers the conversation as a whole. Answering turn by turn, as
arena-hard-auto's generator does, needs one call per turn whose input grows with
the earlier answers, and its cost could not be bounded before the duel starts, so
the budget could be overrun. The judge sees the conversation rendered as text by
:func:`render_turns`. A prompt with one turn is exactly a plain string prompt.

**images** (vision): a prompt object's ``images`` (``data:`` URLs) belong to its first
user turn; a turn object ``{"content": ..., "images": [...]}`` carries its own. The
``images`` column holds the sha256 of each turn's images (a list per turn), the bytes
live once in the image store (service/images/). The stored ``text`` names every image by
its hash (``[image sha256:<hex>]`` after its turn's text), so the answer and verdict
stores' prompt hash, the duel log and the exports tell two prompts with the same words
and different images apart; the models receive the turn texts and the images as their
provider's image parts (service/clients/content.py), never the markers.
"""

from __future__ import annotations

import base64
import hashlib
from typing import Any


def render_turns(turns: list[str]) -> str:
    """The text of a conversation of user turns (what the judge and the duel log show)."""
    if len(turns) == 1:
        return turns[0]
    return "\n\n".join(f"[User turn {n}]\n{t}" for n, t in enumerate(turns, 1))


def turn_texts(turns: list[Any]) -> list[str]:
    """``["...", {"content": "..."}, ...]`` -> the list of turn texts."""
    out = []
    for t in turns:
        out.append(t["content"] if isinstance(t, dict) else t)
    return out


def image_hash(url: str) -> str:
    """The sha256 of a (checked) ``data:`` URL's bytes: the image's name in the store and the log."""
    return hashlib.sha256(base64.b64decode(url.partition(",")[2])).hexdigest()


def turn_image_urls(data: dict[str, Any]) -> list[list[str]]:
    """The ``data:`` URLs of each user turn of a prompt object (the object's own ``images`` go with turn 1)."""
    raw = data["turns"] if data.get("turns") is not None else [data["prompt"]]
    out = [list(t.get("images") or []) if isinstance(t, dict) else [] for t in raw]
    out[0] = list(data.get("images") or []) + out[0]
    return out


def with_markers(text: str, hashes: list[str]) -> str:
    """A turn's text followed by the names of its images."""
    return "\n".join([text, *(f"[image sha256:{h}]" for h in hashes)])


def normalize_prompt(item: Any) -> dict[str, Any]:
    """The ``prompts`` table's columns for one validated prompt item (string or object)."""
    if isinstance(item, str):
        return {"text": item, "qid": None, "category": None, "turns": None, "reference": None, "images": None}
    data = item if isinstance(item, dict) else item.model_dump()
    if data.get("turns") is not None:
        turns = turn_texts(data["turns"])
    else:
        turns = [data["prompt"]]
    hashes = [[image_hash(u) for u in urls] for urls in turn_image_urls(data)]
    images = hashes if any(hashes) else None
    shown = [with_markers(t, h) for t, h in zip(turns, hashes)] if images else turns
    return {
        "text": render_turns(shown),
        "qid": None if data.get("id") is None else str(data["id"]),
        "category": data.get("category"),
        "turns": turns if len(turns) > 1 or images else None,
        "reference": data.get("reference"),
        "images": images,
    }


def question_id(qid: str | None, idx: int) -> str:
    """The id a duel log shows for a prompt: its own id, else its position (``p1``, ``p2``, ...)."""
    return qid if qid is not None else f"p{idx + 1}"
