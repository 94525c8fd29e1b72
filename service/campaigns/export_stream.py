"""The judged duels of a campaign read in pages, and the export's JSON written as it is read.

``GET /v1/campaigns/{id}/export`` is one JSON object ``{"campaign_id", "files": {name: text},
"images": {name: base64}}`` (:mod:`.results`). Its long files (``battles.jsonl``,
``judgments.jsonl``) are written line by line from pages of :data:`PAGE` duels
(:func:`judged_duels`, keyset on the duel id), so an export of 50,000 duels never holds the
log, its dicts or its text in memory at once: each file is one JSON string, written as
``"`` + the escaped text of each page + ``"`` (JSON escapes character by character, so the
pieces join to the escaped whole). What the other files need from the log (the matrix's
counts, the style fit's features, each model's distinct answers, the images the answers name)
is gathered on the same pass. The duel dicts are the ones :mod:`.audit_files` and
:mod:`.style` read.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator
from typing import Any

from sqlalchemy import func, select

from algorithms.vocabulary import DuelStatus

from ..models import Annotator, Duel, Prompt, from_nusd, shown_models
from ..prompts import question_id

#: Duels read per query.
PAGE = 1000

_COLUMNS = (
    Duel.id,
    Duel.number,
    Duel.model_i,
    Duel.model_j,
    Duel.a_is_i,
    Duel.prompt_index,
    Duel.choice,
    Duel.counted,
    Duel.score,
    Duel.judged_by,
    Duel.cost_nusd,
    # the duel's time: its verdict's, else its creation's (one timestamp converted per row, not two)
    func.coalesce(Duel.judged_at, Duel.created_at).label("at"),
    Duel.comment,
)


class LogMeta:
    """What a duel's dict needs besides its row: each prompt's question id, category and user turns,
    and the annotators' labels (read once)."""

    def __init__(self, s, campaign_id: int):
        rows = s.execute(
            select(Prompt.idx, Prompt.qid, Prompt.category, Prompt.turns).where(Prompt.campaign_id == campaign_id)
        ).all()
        self.meta = {r.idx: (question_id(r.qid, r.idx), r.category) for r in rows}
        # user turns of each prompt (a one-turn prompt stores no turns)
        self.turns = {r.idx: len(r.turns) if isinstance(r.turns, list) and r.turns else 1 for r in rows}
        self.labels = {
            f"annotator:{r.id}": r.label or f"annotator {r.id}"
            for r in s.execute(select(Annotator.id, Annotator.label).where(Annotator.campaign_id == campaign_id))
        }


def _tstamp(r: Any) -> float | None:
    return round(r.at.timestamp(), 3) if r.at is not None else None


def window_start(s, campaign_id: int, last: int | None) -> int:
    """The id after which the campaign's last ``last`` judged duels lie (0: all of them)."""
    if last is None:
        return 0
    first = s.execute(
        select(Duel.id)
        .where(Duel.campaign_id == campaign_id, Duel.status == DuelStatus.JUDGED)
        .order_by(Duel.id.desc())
        .offset(last)
        .limit(1)
    ).scalar_one_or_none()
    return int(first or 0)


def judged_duels(
    s, campaign_id: int, lm: LogMeta, answers: bool = True, detail: bool = False, after: int = 0
) -> Iterator[dict]:
    """The campaign's judged duels with an id above ``after``, oldest first, as dicts, read :data:`PAGE` at a
    time (with their answers' text when ``answers``, the judge's detail when ``detail``)."""
    cols: list[Any] = list(_COLUMNS)  # columns of several types
    if answers:  # with the answers' stored style features (the export's style fit counts no text)
        cols += [Duel.answer_a, Duel.answer_b, Duel.answer_style]
    if detail:
        cols.append(Duel.judge_detail)
    for page in _judged_pages(s, campaign_id, cols, after):
        for r in page:
            a, b = shown_models(r.model_i, r.model_j, r.a_is_i)
            yield {
                "id": r.id,
                "number": r.number,
                "a": a,
                "b": b,
                "choice": r.choice,
                "counted": bool(r.counted),
                "score": r.score,
                "model_i": r.model_i,
                "judged_by": r.judged_by,
                "annotator": lm.labels.get(r.judged_by or ""),
                "answer_a": r.answer_a if answers else None,
                "answer_b": r.answer_b if answers else None,
                "style": r.answer_style if answers else None,
                "judge_detail": r.judge_detail if detail else None,
                "cost": from_nusd(r.cost_nusd),
                "tstamp": _tstamp(r),
                "comment": r.comment,
                "meta": lm.meta.get(r.prompt_index, (question_id(None, r.prompt_index), None)),
                "turn": lm.turns.get(r.prompt_index, 1),
            }


def _judged_pages(s, campaign_id: int, cols: Any, after: int) -> Iterator[list[Any]]:
    """The ``cols`` of the campaign's judged duels with an id above ``after``, oldest first, :data:`PAGE` rows a page."""
    while True:
        page = s.execute(
            select(*cols)
            .where(Duel.campaign_id == campaign_id, Duel.status == DuelStatus.JUDGED, Duel.id > after)
            .order_by(Duel.id)
            .limit(PAGE)
        ).all()
        yield page
        if len(page) < PAGE:
            return
        after = page[-1].id


_STYLE_COLUMNS = (Duel.id, Duel.model_i, Duel.model_j, Duel.a_is_i, Duel.counted, Duel.score, Duel.answer_style)


def style_duels(s, campaign_id: int, after: int = 0) -> Iterator[dict]:
    """What the style fit needs of the campaign's judged duels with an id above ``after``, oldest first
    (:class:`.style.StyleRows`): the counted ones with their stored answer features (``style``), read
    :data:`PAGE` at a time; the answers' text only for a duel stored without them."""
    for page in _judged_pages(s, campaign_id, _STYLE_COLUMNS, after):
        counted = [r for r in page if r.counted and r.score is not None]
        missing = [r.id for r in counted if r.answer_style is None]
        texts = {}
        if missing:
            texts = {
                r.id: (r.answer_a, r.answer_b)
                for r in s.execute(select(Duel.id, Duel.answer_a, Duel.answer_b).where(Duel.id.in_(missing)))
            }
        for r in counted:
            a, b = shown_models(r.model_i, r.model_j, r.a_is_i)
            answer_a, answer_b = texts.get(r.id, (None, None))
            yield {
                "a": a,
                "b": b,
                "model_i": r.model_i,
                "counted": True,
                "score": r.score,
                "style": r.answer_style,
                "answer_a": answer_a,
                "answer_b": answer_b,
            }


def json_string(pieces: Iterable[str]) -> Iterator[str]:
    """The JSON string of the concatenated ``pieces``, in pieces."""
    yield '"'
    for p in pieces:
        if p:
            yield json.dumps(p, ensure_ascii=False)[1:-1]
    yield '"'


def json_file(name: str, text_pieces: Iterable[str], first: bool = False) -> Iterator[str]:
    """``"name": "<text>"`` as a member of the export's ``files`` object (a comma before it unless ``first``)."""
    yield ("" if first else ", ") + json.dumps(name, ensure_ascii=False) + ": "
    yield from json_string(text_pieces)


def lines_in_pages(lines: Iterable[str], size: int = 256) -> Iterator[str]:
    """``lines`` (each without its newline) joined with newlines, ``size`` lines a piece."""
    buf: list[str] = []
    for line in lines:
        buf.append(line)
        if len(buf) >= size:
            yield "\n".join(buf) + "\n"
            buf = []
    if buf:
        yield "\n".join(buf) + "\n"


def buffered(pieces: Iterable[str], size: int = 1 << 16) -> Iterator[str]:
    """``pieces`` regrouped into pieces of about ``size`` characters (fewer, larger writes)."""
    buf: list[str] = []
    n = 0
    for p in pieces:
        buf.append(p)
        n += len(p)
        if n >= size:
            yield "".join(buf)
            buf, n = [], 0
    if buf:
        yield "".join(buf)
