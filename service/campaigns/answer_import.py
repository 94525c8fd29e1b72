"""Answers a team already has, brought into the answer store (``POST /v1/campaigns/{id}/answers``).

arena-hard-auto and AlpacaEval keep every model's answers to a question set in files
(arena-hard's ``model_answer/<model>.jsonl``). A campaign on the same questions need not buy
them again: each imported answer becomes a ``ready`` row of the answer store under the key the
campaign itself would use (the model's generation config and the prompt's text,
:mod:`.store_keys`), so the duel that needs it takes it at zero cost, as it takes any stored answer,
and the policy sees that model's marginal cost fall (docs/reuse.md).

Rules:

* only a model that uses the answer store takes imports (``answers: reuse``, a provider client:
  simulated models answer per duel); another is a 422;
* an answer is matched to a prompt by its question id (the prompt's own ``question_id``, else its
  position ``p1``, ``p2``, ...), once; ids the campaign does not have are counted and named
  (the first 20), never guessed;
* a stored answer is never replaced (a stored answer is never changed: :class:`.store_lookup.StoredKeys`
  relies on it), nor a claim of a call under way; such answers count as ``already_stored``;
* nothing is charged: the team paid for these answers elsewhere. An imported row has no charge and
  cost 0, and its ``input_tokens``/``output_tokens`` are unknown (None).
"""

from __future__ import annotations

from typing import Any

from sqlalchemy import select
from sqlalchemy.dialects.postgresql import insert as pg_insert
from sqlalchemy.dialects.sqlite import insert as sqlite_insert

from ..db import Database
from ..models import Campaign, Prompt, StoredAnswer, utcnow
from ..prompts import question_id
from .store_claims import READY
from .store_keys import answer_key, model_key, prompt_hash
from .store_settings import stores_answers
from .types import NotFound, Unprocessable

#: Ids of unknown questions named in the answer (the rest are counted).
MAX_NAMED_UNKNOWN = 20


def import_answers(db: Database, campaign_id: int, model: str, answers: list[tuple[str, str]]) -> dict[str, Any]:
    """Store ``answers`` ((question id, text) pairs) as ``model``'s answers for this campaign's prompts.

    Returns ``{"model", "imported", "already_stored", "duplicates", "unknown_question_ids",
    "unknown"}``. Raises NotFound (no campaign) or Unprocessable (no such model, or a model that
    does not use the answer store).
    """
    with db.read() as s:
        c = s.get(Campaign, campaign_id)
        if c is None:
            raise NotFound(f"campaign {campaign_id} not found")
        names = [m["name"] for m in c.models]
        if model not in names:
            raise Unprocessable(f"model {model!r} is not in campaign {campaign_id} (its models: {', '.join(names)})")
        spec = c.models[names.index(model)]
        if not stores_answers(c.answers, spec):
            raise Unprocessable(
                f"model {model!r} does not use the answer store (it needs answers: reuse and a provider client, "
                f"not a simulated one): imported answers would never be read"
            )
        mkey = model_key(spec)
        texts = {
            question_id(r.qid, r.idx): r.text
            for r in s.execute(select(Prompt.idx, Prompt.qid, Prompt.text).where(Prompt.campaign_id == campaign_id))
        }
    assert mkey is not None  # stores_answers holds
    unknown: list[str] = []
    rows: dict[str, dict[str, Any]] = {}
    duplicates = 0
    for qid, text in answers:
        prompt = texts.get(qid)
        if prompt is None:
            unknown.append(qid)
            continue
        phash = prompt_hash(prompt)
        key = answer_key(mkey, phash)
        if key in rows:
            duplicates += 1
            continue
        rows[key] = {"model_key": mkey, "prompt_hash": phash, "text": text}
    imported = _insert_new(db, rows)
    return {
        "model": model,
        "imported": imported,
        "already_stored": len(rows) - imported,
        "duplicates": duplicates,
        "unknown_question_ids": unknown[:MAX_NAMED_UNKNOWN],
        "unknown": len(unknown),
    }


def _insert_new(db: Database, rows: dict[str, dict[str, Any]]) -> int:
    """Insert the rows whose key the store does not have (ready, no charge; a key already there, a
    claim of a live call included, is left as it is); the number inserted."""
    ins = pg_insert if db.engine.dialect.name == "postgresql" else sqlite_insert
    inserted = 0
    keys = sorted(rows)
    for start in range(0, len(keys), 500):
        now = utcnow()
        values = [
            {"key": k, "status": READY, "cost_nusd": 0, "claimed_at": now, "created_at": now, **rows[k]}
            for k in keys[start : start + 500]
        ]
        with db.write() as s:
            result = s.execute(
                ins(StoredAnswer)
                .values(values)
                .on_conflict_do_nothing(index_elements=["key"])
                .returning(StoredAnswer.key)
            )
            inserted += len(result.all())
    return inserted
