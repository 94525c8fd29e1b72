"""The judged duels of a campaign read in pages, and the export's JSON written as it is read.

``GET /v1/campaigns/{id}/export`` is one JSON object ``{"campaign_id", "files": {name: text},
"images": {name: base64}}`` (:mod:`.results`). Its long files (``battles.jsonl``,
``judgments.jsonl``) are written line by line from pages of :data:`PAGE` duels
(:func:`judged_duels`, keyset on the duel id), so an export of 50,000 duels never holds the
log, its dicts or its text in memory at once: each file is one JSON string, written as
``"`` + the escaped text of each page + ``"`` (JSON escapes character by character, so the
pieces join to the escaped whole). What the other files need from the log (the matrix's
counts, the style fit's stored features, the judge bias) is gathered on the passes that write
these two; the model answer files read the answers once more, ordered by model and prompt
(:func:`answer_rows`, a server-side cursor on PostgreSQL), and hold one model's answers to one
prompt at a time. The duel dicts are the ones :mod:`.audit_files` and :mod:`.style` read.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Iterator
from typing import Any

from sqlalchemy import Text, case, cast, func, or_, select, union_all

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

    def question(self, idx: int) -> str:
        """The question id of the campaign's prompt ``idx``."""
        return self.meta.get(idx, (question_id(None, idx), None))[0]


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


#: An image answer's whole text is its name, ``[image sha256:<64 hex>]`` (service/clients/images.py): 80 characters.
IMAGE_NAME_CHARS = 80


def _answer_head(answer: Any, style: Any) -> Any:
    """The answer's text when its duel has no stored style features (a duel stored before them: the style fit
    counts them from the text), else its first :data:`IMAGE_NAME_CHARS` + 1 characters (whether it is an
    image's name), read in the database."""
    none = or_(style.is_(None), cast(style, Text) == "null")  # SQL NULL or JSON null
    return case((none, answer), else_=func.substr(answer, 1, IMAGE_NAME_CHARS + 1))


def judged_duels(s, campaign_id: int, lm: LogMeta, after: int = 0) -> Iterator[dict]:
    """The campaign's judged duels with an id above ``after``, oldest first, as dicts, read :data:`PAGE` at a
    time. Their answers are not read whole (the model answer files read them apart, :func:`answer_rows`):
    ``answer_a`` and ``answer_b`` are :func:`_answer_head`'s, ``style`` the stored style features."""
    cols: list[Any] = [
        *_COLUMNS,
        _answer_head(Duel.answer_a, Duel.answer_style).label("answer_a"),
        _answer_head(Duel.answer_b, Duel.answer_style).label("answer_b"),
        Duel.answer_style,
    ]
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
                "answer_a": r.answer_a,
                "answer_b": r.answer_b,
                "style": r.answer_style,
                "cost": from_nusd(r.cost_nusd),
                "tstamp": _tstamp(r),
                "comment": r.comment,
                "meta": lm.meta.get(r.prompt_index, (question_id(None, r.prompt_index), None)),
                "turn": lm.turns.get(r.prompt_index, 1),
            }


_JUDGE_COLUMNS = (
    Duel.id,
    Duel.model_i,
    Duel.model_j,
    Duel.a_is_i,
    Duel.prompt_index,
    Duel.choice,
    Duel.judged_by,
    cast(Duel.judge_detail, Text).label("judge_detail"),  # decoded here, only when needed
)
#: what the judge bias counts besides: the answers' lengths
_LENGTHS = (func.length(Duel.answer_a).label("len_a"), func.length(Duel.answer_b).label("len_b"))


def judge_calls(s, campaign_id: int, lm: LogMeta, count: Callable[..., None] | None = None) -> Iterator[dict]:
    """The campaign's judged duels whose judge detail holds calls, oldest first, as the dicts ``judgments.jsonl``
    is written from (:func:`.audit_files.iter_judgment_lines`: ``id``, ``a``, ``b``, ``judged_by``,
    ``judge_detail``, ``meta``). With ``count``, each duel with a verdict is passed to it on the way (the judge
    bias: :meth:`.judge_bias.BiasTally.count`'s arguments), so one read of the log serves both; without, the
    answers' lengths are not read and a detail that names no calls (a human vote, a simulated judge's) is not
    decoded."""
    cols = _JUDGE_COLUMNS if count is None else (*_JUDGE_COLUMNS, *_LENGTHS)
    for page in _judged_pages(s, campaign_id, cols, 0):
        for r in page:
            text = r.judge_detail
            if not text or (count is None and '"calls"' not in text):
                continue
            detail = json.loads(text)
            a, b = shown_models(r.model_i, r.model_j, r.a_is_i)
            if count is not None and r.choice is not None:
                count(r.choice, detail, lengths=(r.len_a, r.len_b), shown=(a, b))
            if isinstance(detail, dict) and isinstance(detail.get("calls"), list):
                yield {
                    "id": r.id,
                    "a": a,
                    "b": b,
                    "judged_by": r.judged_by,
                    "judge_detail": detail,
                    "meta": lm.meta.get(r.prompt_index, (question_id(None, r.prompt_index), None)),
                }


def answer_rows(s, campaign_id: int) -> Iterator[Any]:
    """Every answer of the campaign's judged duels, one row per duel and side (``model``, ``prompt_index``,
    ``answer``, ``id``, ``at``: the duel's time), ordered by model, prompt and duel, streamed from the database
    :data:`PAGE` rows at a time (a server-side cursor on PostgreSQL): the model answer files are written from
    it one model and one prompt at a time (:func:`.audit_files.answer_file_lines`)."""
    judged = (Duel.campaign_id == campaign_id, Duel.status == DuelStatus.JUDGED)
    at = func.coalesce(Duel.judged_at, Duel.created_at)
    sides = [
        select(
            case((Duel.a_is_i == shown_i, Duel.model_i), else_=Duel.model_j).label("model"),
            Duel.prompt_index.label("prompt_index"),
            answer.label("answer"),
            Duel.id.label("id"),
            at.label("at"),
        ).where(*judged, answer.is_not(None))
        for shown_i, answer in ((True, Duel.answer_a), (False, Duel.answer_b))
    ]
    both = union_all(*sides).subquery()
    query = select(both).order_by(both.c.model, both.c.prompt_index, both.c.id)
    # Core, not the session's ORM execution: rows of plain columns, without its per-row loading
    yield from s.connection().execute(query.execution_options(yield_per=PAGE))


def _judged_pages(s, campaign_id: int, cols: Any, after: int) -> Iterator[list[Any]]:
    """The ``cols`` of the campaign's judged duels with an id above ``after``, oldest first, :data:`PAGE` rows a page."""
    while True:
        page = (
            s.connection()
            .execute(  # Core: plain rows, without the ORM loading of each (as answer_rows)
                select(*cols)
                .where(Duel.campaign_id == campaign_id, Duel.status == DuelStatus.JUDGED, Duel.id > after)
                .order_by(Duel.id)
                .limit(PAGE)
            )
            .all()
        )
        yield page
        if len(page) < PAGE:
            return
        after = page[-1].id


#: the stored style features as their JSON text: a page's are decoded in one call (:func:`_decoded`)
_STYLE_COLUMNS = (
    Duel.id,
    Duel.model_i,
    Duel.model_j,
    Duel.a_is_i,
    Duel.counted,
    Duel.score,
    cast(Duel.answer_style, Text).label("answer_style"),
)


def style_duels(s, campaign_id: int, after: int = 0) -> Iterator[dict]:
    """What the style fit needs of the campaign's judged duels with an id above ``after``, oldest first
    (:class:`.style.StyleRows`): the counted ones with their stored answer features (``style``), read
    :data:`PAGE` at a time; the answers' text only for a duel stored without them."""
    for page in _judged_pages(s, campaign_id, _STYLE_COLUMNS, after):
        counted = [r for r in page if r.counted and r.score is not None]
        styles = _decoded([r.answer_style for r in counted])
        missing = [r.id for r, style in zip(counted, styles) if style is None]
        texts = {}
        if missing:
            texts = {
                r.id: (r.answer_a, r.answer_b)
                for r in s.execute(select(Duel.id, Duel.answer_a, Duel.answer_b).where(Duel.id.in_(missing)))
            }
        for r, style in zip(counted, styles):
            a, b = shown_models(r.model_i, r.model_j, r.a_is_i)
            answer_a, answer_b = texts.get(r.id, (None, None))
            yield {
                "a": a,
                "b": b,
                "model_i": r.model_i,
                "counted": True,
                "score": r.score,
                "style": style,
                "answer_a": answer_a,
                "answer_b": answer_b,
            }


def _decoded(texts: list[str | None]) -> list[Any]:
    """JSON ``texts`` decoded in one call (a call per value costs more than the decoding of a short one);
    None (SQL NULL) stays None."""
    if not texts:
        return []
    return json.loads("[" + ",".join("null" if t is None else t for t in texts) + "]")


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
