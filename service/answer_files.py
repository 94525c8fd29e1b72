"""Model answer files read for import (``llmduel campaign import-answers``), no HTTP.

Two layouts of arena-hard-auto's ``model_answer/<model>.jsonl`` are read, line by line:

* v0.1: ``{"question_id", "model_id", "choices": [{"turns": [{"content": ...}, ...]}]}``; the
  answer is the last turn's ``content`` (a one-turn question has one);
* v2: ``{"uid", "model", "messages": [..., {"role": "assistant", "content": {"answer": ...}}]}``;
  the answer is the last assistant message's content (a string, or its ``answer``);
* a plain ``{"question_id", "output"}`` line.

The model is the line's ``model_id`` (or ``model``), else the file's name without ``.jsonl``.
Errors are one line naming the file and line (:class:`.campaign_files.CampaignFileError`).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from .campaign_files import CampaignFileError, read_text


def _answer_text(obj: dict[str, Any]) -> Any:
    choices = obj.get("choices")
    if isinstance(choices, list) and choices and isinstance(choices[0], dict):
        turns = choices[0].get("turns")
        if isinstance(turns, list) and turns and isinstance(turns[-1], dict):
            return turns[-1].get("content")
    messages = obj.get("messages")
    if isinstance(messages, list):
        for message in reversed(messages):
            if isinstance(message, dict) and message.get("role") == "assistant":
                content = message.get("content")
                return content.get("answer") if isinstance(content, dict) else content
    return obj.get("output")  # a plain {"question_id", "output"} line


def read_answer_file(path: Path) -> dict[str, list[tuple[str, str]]]:
    """``{model: [(question id, answer text), ...]}`` of one model answer file."""
    out: dict[str, list[tuple[str, str]]] = {}
    for n, line in enumerate(read_text(path).splitlines(), 1):
        if not line.strip():
            continue
        where = f"{path}:{n}"
        try:
            obj = json.loads(line)
        except json.JSONDecodeError as exc:
            raise CampaignFileError(f"{where}: not valid JSON ({exc.msg})") from None
        if not isinstance(obj, dict):
            raise CampaignFileError(f"{where}: an answer line is a JSON object")
        qid = obj.get("question_id", obj.get("uid"))
        if not isinstance(qid, (str, int)) or isinstance(qid, bool) or str(qid) == "":
            raise CampaignFileError(f"{where}: no question_id (or uid)")
        text = _answer_text(obj)
        if not isinstance(text, str):
            raise CampaignFileError(f"{where}: no answer text (choices[0].turns[-1].content, or an assistant message)")
        model = obj.get("model_id", obj.get("model", path.stem))
        if not isinstance(model, str) or not model:
            raise CampaignFileError(f"{where}: model_id must be a non-empty string")
        out.setdefault(model, []).append((str(qid), text))
    return out


def read_answers(path: str | Path) -> dict[str, list[tuple[str, str]]]:
    """The answers of a model answer file, or of every ``*.jsonl`` file of a folder (sorted by name)."""
    p = Path(path)
    if p.is_dir():
        files = sorted(p.glob("*.jsonl"))
        if not files:
            raise CampaignFileError(f"{p}: no .jsonl files in this folder")
    elif p.exists():
        files = [p]
    else:
        raise CampaignFileError(f"{p}: no such file or folder")
    out: dict[str, list[tuple[str, str]]] = {}
    for f in files:
        for model, answers in read_answer_file(f).items():
            out.setdefault(model, []).extend(answers)
    return out
