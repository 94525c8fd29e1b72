"""What a planned duel takes from the answer and verdict stores: the inputs of its reservation
(:func:`service.money.reserve.duel_budget`; docs/reuse.md).

:func:`stored_for_duel` is written once for every path: the asynchronous ones pass their own lookups,
a synchronous transaction passes :class:`SessionLookup` and runs it with :func:`run_now`.
:class:`StoredKeys` remembers per process the keys seen ready.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Sequence

from sqlalchemy import bindparam, select

from algorithms.vocabulary import Reuse

from ..models import StoredAnswer, StoredVerdict
from .store_claims import READY
from .store_keys import answer_key, duel_verdict_key, model_key, prompt_hash, text_hash
from .store_settings import pregenerates, stores_verdicts


def duel_answer_keys(answers: str | None, models: Sequence[dict], i: int, j: int, *, prompt: str) -> dict[int, str]:
    """The answer-store keys of a duel on (``i``, ``j``), by model index, for the models that use the store.

    Two models with one generation config share a key; the duel takes the stored
    answer for ``i`` only and calls ``j`` (:meth:`.calls.Calls.acquire`), so only
    ``i`` is listed.
    """
    out: dict[int, str] = {}
    if answers != Reuse.REUSE:
        return out
    phash = None
    for k in (i, j):
        mkey = model_key(models[k])
        if mkey is not None:
            phash = phash or prompt_hash(prompt)
            key = answer_key(mkey, phash)
            if key not in out.values():
                out[k] = key
    return out


#: The readiness lookups of a duel's reservation, as statements every path runs (the asyncpg
#: driver compiles them): the answer keys (with the texts when a verdict key is derived from
#: them), a verdict key, a prompt's reference answer.
READY_ANSWER_KEYS = select(StoredAnswer.key).where(
    StoredAnswer.key.in_([bindparam("k1"), bindparam("k2")]), StoredAnswer.status == READY
)
READY_ANSWER_TEXTS = select(StoredAnswer.key, StoredAnswer.text).where(
    StoredAnswer.key.in_([bindparam("k1"), bindparam("k2")]), StoredAnswer.status == READY
)
READY_VERDICT = select(StoredVerdict.id).where(StoredVerdict.key == bindparam("vk"), StoredVerdict.status == READY)


class StoredKeys:
    """Which store keys are ready, remembered per process.

    A stored (``ready``) answer or verdict is never changed or deleted (only claims
    are), so a key once seen ready stays ready: the cache can only miss, never be
    wrong. A miss costs one indexed lookup. Answers map to their text hash (None
    when the text was not read).
    """

    limit = 200_000

    def __init__(self) -> None:
        self.answers: dict[str, str | None] = {}
        self.verdicts: set[str] = set()

    def answer(self, key: str, text_hash_: str | None) -> None:
        if len(self.answers) >= self.limit:
            self.answers.clear()
        if text_hash_ is not None or key not in self.answers:
            self.answers[key] = text_hash_

    def verdict(self, key: str) -> None:
        if len(self.verdicts) >= self.limit:
            self.verdicts.clear()
        self.verdicts.add(key)


@dataclass(frozen=True)
class DuelStores:
    """What the stores mean for a planned duel (:func:`stored_for_duel`), the inputs of its
    reservation (:func:`service.money.reserve.duel_budget`)."""

    #: the model indices whose answer is stored (each reserves nothing)
    answers: list[int]
    #: the number of judge orders whose verdict is stored
    orders: int
    #: the campaign's answers are pre-generated (:func:`.store_settings.pregenerates`): the only campaigns with
    #: budget holds, so the plan reads the holds of these alone (a new kind of hold widens this)
    pregenerated: bool


async def stored_for_duel(
    known: StoredKeys,
    lookup: Any,
    *,
    answers: str | None,
    verdicts: str | None,
    models: Sequence[dict],
    judge: dict,
    i: int,
    j: int,
    a_is_i: bool,
    prompt: str,
    reference: Any,
) -> DuelStores:
    """What a planned duel will take from the stores, and whether its campaign pre-generates answers.

    An answer counts only when it is stored (``ready``); one being generated (a
    claim) may still fail, so it stays reserved. A verdict can be known only when
    both answers are stored (its key hashes their texts). ``lookup``: awaitable
    ``ready_answers(keys, with_text) -> {key: text or None}`` and
    ``ready_verdict(key) -> bool`` on the plan's transaction; ``reference``: an
    awaitable callable giving the prompt's reference answer. Written once for every
    path (a synchronous caller runs it with :func:`run_now`).
    """
    pregenerated = pregenerates(answers, models, judge)
    keys = duel_answer_keys(answers, models, i, j, prompt=prompt)
    if not keys:
        return DuelStores([], 0, pregenerated)
    need_verdict = len(keys) == 2 and stores_verdicts(verdicts, judge)
    missing = [k for k in keys.values() if k not in known.answers or (need_verdict and known.answers[k] is None)]
    if missing:
        for key, text in (await lookup.ready_answers(missing, need_verdict)).items():
            known.answer(key, text_hash(text or "") if need_verdict else None)
    have = [idx for idx, k in keys.items() if k in known.answers]
    if not (need_verdict and len(have) == 2):
        return DuelStores(have, 0, pregenerated)
    # .get: another thread may clear the cache meanwhile (StoredKeys.limit); unknown counts as not stored
    hi, hj = known.answers.get(keys[i]), known.answers.get(keys[j])
    if hi is None or hj is None:
        return DuelStores(have, 0, pregenerated)
    vkey = duel_verdict_key(judge, prompt, await reference(), hash_a=hi if a_is_i else hj, hash_b=hj if a_is_i else hi)
    if vkey not in known.verdicts:
        if not await lookup.ready_verdict(vkey):
            return DuelStores(have, 0, pregenerated)
        known.verdict(vkey)
    from ..stored_config import judge_orders

    return DuelStores(have, judge_orders(judge), pregenerated)


class SessionLookup:
    """:func:`stored_for_duel`'s lookups on a synchronous session or connection (its awaits never suspend)."""

    def __init__(self, conn) -> None:
        self.conn = conn

    async def ready_answers(self, keys: Sequence[str], with_text: bool) -> dict[str, str | None]:
        stmt = READY_ANSWER_TEXTS if with_text else READY_ANSWER_KEYS
        rows = self.conn.execute(stmt, {"k1": keys[0], "k2": keys[-1]}).all()
        return {r.key: (r.text if with_text else None) for r in rows}

    async def ready_verdict(self, key: str) -> bool:
        return self.conn.execute(READY_VERDICT, {"vk": key}).first() is not None


def run_now(coro: Any) -> Any:
    """Run a coroutine whose awaits never suspend (synchronous lookups) to its end."""
    try:
        coro.send(None)
    except StopIteration as done:
        return done.value
    coro.close()
    raise RuntimeError("a synchronous lookup tried to suspend")
