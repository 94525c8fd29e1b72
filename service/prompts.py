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
"""

from __future__ import annotations

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


def normalize_prompt(item: Any) -> dict[str, Any]:
    """The ``prompts`` table's columns for one validated prompt item (string or object)."""
    if isinstance(item, str):
        return {"text": item, "qid": None, "category": None, "turns": None, "reference": None}
    data = item if isinstance(item, dict) else item.model_dump()
    if data.get("turns") is not None:
        turns = turn_texts(data["turns"])
    else:
        turns = [data["prompt"]]
    return {
        "text": render_turns(turns),
        "qid": None if data.get("id") is None else str(data["id"]),
        "category": data.get("category"),
        "turns": turns if len(turns) > 1 else None,
        "reference": data.get("reference"),
    }


def question_id(qid: str | None, idx: int) -> str:
    """The id a duel log shows for a prompt: its own id, else its position (``p1``, ``p2``, ...)."""
    return qid if qid is not None else f"p{idx + 1}"
