"""The audit trail's files of an export: every answer and every judge call behind the verdicts.

Pure functions over the judged duels that :class:`.results.Results` reads once:

* ``model_answer/<model>.jsonl``: the answers, in arena-hard-auto's ``model_answer`` layout (one
  file per model, lines ``{"question_id", "answer_id", "model_id", "choices": [{"index": 0,
  "turns": [{"content": ...}]}], "tstamp"}``), so arena-hard's own scripts and
  ``llmduel campaign import-answers`` read them. One line per distinct answer of a model to a
  question: with ``answers: reuse`` (the default) that is one per question; a campaign with
  fresh answers may have several, each line then names its duels (``duel_ids``). The file name
  is the model's name with every character outside ``[A-Za-z0-9._-]`` replaced by ``_``
  (``model_id`` keeps the name as it is).
* ``judgments.jsonl``: one line per call of an automatic judge (each order of each duel, each
  juror of a jury): ``question_id``, ``duel_id``, ``model_a`` and ``model_b`` (the duel's answers
  a and b), ``order`` (``ab``: a shown first), ``first`` and ``second`` (the models as the judge
  saw them), ``juror`` (a jury), ``reply`` (the judge's reply as stored: credentials were masked
  before it was stored, and it is cut at the stored length), ``label`` (the verdict label parsed
  from it), ``verdict`` (in terms of the duel's a and b), ``score_a``, ``cost``, ``error`` for a
  failed call, and ``reused_verdict`` (the stored verdict's duel) when the duel reused a verdict
  instead of calling the judge. Human votes are in ``battles.jsonl``.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Callable, Iterable, Iterator
from itertools import groupby
from typing import Any

_UNSAFE = re.compile(r"[^A-Za-z0-9._-]")


def answer_file_names(names: list[str]) -> dict[str, str]:
    """``model_answer/<safe name>.jsonl`` per model name, each distinct (a clash gets ``-2``, ``-3``...)."""
    out: dict[str, str] = {}
    taken: set[str] = set()
    for name in names:
        base = _UNSAFE.sub("_", name).lstrip(".") or "model"
        safe, n = base, 1
        while safe.lower() in taken:
            n += 1
            safe = f"{base}-{n}"
        taken.add(safe.lower())
        out[name] = f"model_answer/{safe}.jsonl"
    return out


def answer_files(
    names: list[str], rows: Iterable[Any], question: Callable[[int], str]
) -> Iterator[tuple[str, Iterator[str]]]:
    """``(model_answer/<model>.jsonl, its lines)`` per model with answers, from ``rows`` (``model``,
    ``prompt_index``, ``answer``, ``id``, ``at``) ordered by model, prompt and duel
    (:func:`.export_stream.answer_rows`); ``question``: a prompt's question id. Each file's lines are to be
    taken before the next file: what is held is the distinct answers of one model to one prompt."""
    paths = answer_file_names(names)
    for model, by_model in groupby(rows, key=lambda r: r.model):
        name = names[model]
        yield paths[name], _model_lines(name, by_model, question)


def _model_lines(name: str, rows: Iterable[Any], question: Callable[[int], str]) -> Iterator[str]:
    """One line per distinct answer of the model to each question (its duels in ``duel_ids``), question by question."""
    for prompt, group in groupby(rows, key=lambda r: r.prompt_index):
        qid = question(prompt)
        lines: dict[str, dict[str, Any]] = {}
        for r in group:
            digest = hashlib.sha256(f"{name}\x00{qid}\x00{r.answer}".encode("utf-8", "surrogatepass")).hexdigest()
            if digest in lines:
                lines[digest]["duel_ids"].append(r.id)
                continue
            lines[digest] = {
                "question_id": qid,
                "answer_id": digest[:22],
                "model_id": name,
                "choices": [{"index": 0, "turns": [{"content": r.answer}]}],
                "tstamp": round(r.at.timestamp(), 3) if r.at is not None else None,
                "duel_ids": [r.id],
            }
        for line in lines.values():
            yield json.dumps(line)


def judgment_lines(names: list[str], duels: Iterable[dict[str, Any]]) -> str:
    """``judgments.jsonl``: every automatic judge call of the judged duels."""
    return "".join(line + "\n" for line in iter_judgment_lines(names, duels))


def iter_judgment_lines(names: list[str], duels: Iterable[dict[str, Any]]) -> Iterator[str]:
    """The lines of ``judgments.jsonl`` (without their newlines), duel by duel."""
    for d in duels:
        detail = d.get("judge_detail") or {}
        calls = detail.get("calls")
        if not isinstance(calls, list):
            continue
        a, b = names[d["a"]], names[d["b"]]
        for call in calls:
            if not isinstance(call, dict):
                continue
            order = call.get("order")
            first, second = (a, b) if order != "ba" else (b, a)
            row: dict[str, Any] = {
                "question_id": d["meta"][0],
                "duel_id": d["id"],
                "model_a": a,
                "model_b": b,
                "order": order,
                "first": first,
                "second": second,
                "judge": d["judged_by"],
                "reply": call.get("raw"),
                "label": call.get("parsed"),
                "verdict": call.get("verdict"),
                "score_a": call.get("score_a"),
                "cost": call.get("cost"),
            }
            for extra in ("juror", "error"):
                if call.get(extra) is not None:
                    row[extra] = call[extra]
            if "reused_verdict" in detail:
                row["reused_verdict"] = detail["reused_verdict"]
            yield json.dumps(row)
