"""Several images per call: the further images of an image model's call, kept for later duels.

An image model whose ``params.n`` is K (at most ``MAX_IMAGES_PER_CALL``) gets K images from one
call of its images route, charged once: its price per image times the images returned, within the
call's budget bound (price per image times K, reserved before the call). The duel that paid shows
the first image; the others are *spares*: rows of the answer store (table ``answer_store``) with
status ``spare``, keyed by the model's generation config and the prompt like a stored answer, each
naming its image (content-addressed in the image store) and the charge that paid for it.

A later duel that needs a fresh answer of that model to that prompt (``answers: fresh``, the only
setting with K > 1) takes the oldest spare before it buys a new call: the row becomes ``spent`` in
one conditional UPDATE, so two duels never take the same image (draws without replacement from the
images bought so far), and the duel's ledger row is a zero-cost reuse naming the paying charge.
The row names the duel that took it (``taken_by``) until that duel's answers transaction settles
it: stored answers make it spent for good; a duel that fails after taking a spare gives it back; a
paid call whose duel failed (the other model failed) leaves all its images as spares, since no duel
showed them. A duel that never reaches its answers transaction (its process died between the take
and the store) cannot show the image once its expiry has passed (its answers would be late,
service/cycle/answers.py), so the next take of that model and prompt first gives back the spares of
such duels (:func:`recover`; a deleted duel's too): no paid image is lost. Spares are shared by every
campaign with the same generation config and prompt, like stored answers (docs/guide.md, *Several
images per call*).
"""

from __future__ import annotations

import datetime as dt
import uuid
from typing import Any

from sqlalchemy import bindparam, insert, null, or_, select, update

from algorithms.vocabulary import Reuse

from ..clients.config import images_per_call
from ..models import Duel, StoredAnswer, utcnow
from ..stored_config import stored
from . import store_claims, store_keys

SPARE = "spare"
SPENT = "spent"
#: How long after a taking duel's expiry its spare is given back: the answers transaction reads the
#: clock before it waits for the campaign's lock, so a duel answered just before its expiry still
#: settles its spares first.
RECOVER_GRACE = dt.timedelta(minutes=5)


def several_images_reason(models: list[dict], answers: str | None) -> str | None:
    """Why a campaign's image models may not ask for several images a call (stored JSON), or None."""
    for m in models:
        if m.get("output") == "image" and images_per_call(m.get("client")) > 1 and answers != Reuse.FRESH:
            return (
                f"models[{m.get('name')!r}]: params.n asks for several images a call, which needs answers: fresh "
                "(each image is then shown in one duel; with answers: reuse every duel shows the one stored "
                "answer and the other images would be paid for nothing)"
            )
    return None


def draws_spares(answers: str | None, model: dict) -> bool:
    """Whether a duel's answer of ``model`` may come from the spares (an image model of K > 1, fresh answers)."""
    cfg = stored(model.get("client"))  # a config model as its stored JSON
    return answers == Reuse.FRESH and model.get("output") == "image" and images_per_call(cfg) > 1


def spare_keys(model: dict, prompt: str) -> tuple[str, str] | None:
    """(model key, prompt hash) of ``model``'s spares for ``prompt``, or None when it keeps none."""
    mkey = store_keys.model_key(model)
    return None if mkey is None else (mkey, store_keys.prompt_hash(prompt))


def recover(s: Any, mkey: str, phash: str, now: dt.datetime) -> int:
    """Inside a take: the spares of (``mkey``, ``phash``) taken by duels that can no longer store their
    answers (deleted, or past their expiry by ``RECOVER_GRACE``) are spares again. Returns how many."""
    lost = s.execute(
        select(StoredAnswer.id, StoredAnswer.taken_by)
        .outerjoin(Duel, Duel.id == StoredAnswer.taken_by)
        .where(
            StoredAnswer.model_key == mkey,
            StoredAnswer.prompt_hash == phash,
            StoredAnswer.status == SPENT,
            StoredAnswer.taken_by.is_not(None),
            or_(Duel.id.is_(None), Duel.expires_at <= now - RECOVER_GRACE),
        )
    ).all()
    # each row only if the same dead duel still holds it (a concurrent take may have recovered it first)
    return sum(give_back(s, [int(row.id)], int(row.taken_by)) for row in lost)


def take_spare(db: Any, mkey: str, phash: str, duel_id: int) -> store_claims.Stored | None:
    """Take (mark ``spent``, taken by ``duel_id``) the oldest spare image of (``mkey``, ``phash``), or None
    when there is none; spares lost by dead duels are given back first (:func:`recover`)."""
    for _ in range(20):  # another duel may take the same row first: then the next one
        with db.write() as s:
            now = utcnow()
            recover(s, mkey, phash, now)
            row = s.execute(
                select(StoredAnswer.id, StoredAnswer.charge_id, StoredAnswer.text)
                .where(StoredAnswer.model_key == mkey, StoredAnswer.prompt_hash == phash, StoredAnswer.status == SPARE)
                .order_by(StoredAnswer.id)
                .limit(1)
            ).first()
            if row is None:
                return None
            taken = s.execute(
                update(StoredAnswer)
                .where(StoredAnswer.id == row.id, StoredAnswer.status == SPARE)
                .values(status=SPENT, taken_by=duel_id, claimed_at=now)
                .execution_options(synchronize_session=False)
            ).rowcount
            if taken == 1:
                return store_claims.Stored(int(row.id), row.charge_id, text=row.text or "", spare=True)
    return None


SA = StoredAnswer.__table__.c
# The statements of a duel's answers transaction, one row each (both drivers run them: the asyncpg
# driver compiles them, service/cycle/pg_driver.py), in the order :func:`settle_writes` lists them.
#: A spare taken by duel ``did`` is a spare again (a failed duel's).
GIVE_BACK = (
    update(StoredAnswer.__table__)
    .where(SA.id == bindparam("rid"), SA.status == SPENT, SA.taken_by == bindparam("did"))
    .values(status=SPARE, taken_by=null())
)
#: A spare taken by duel ``did`` is spent for good (the duel stored its answers).
SHOWN = (
    update(StoredAnswer.__table__)
    .where(SA.id == bindparam("rid"), SA.taken_by == bindparam("did"))
    .values(taken_by=null())
)
#: An unshown image of a paid call becomes a spare.
KEEP = insert(StoredAnswer.__table__).values(
    {
        k: bindparam(k, type_=SA[k].type)
        for k in (
            "key",
            "model_key",
            "prompt_hash",
            "status",
            "text",
            "cost_nusd",
            "charge_id",
            "claimed_at",
            "created_at",
        )
    }
)
#: Every statement :func:`settle_writes` may list.
SETTLE_STATEMENTS = (GIVE_BACK, SHOWN, KEEP)


def give_back(s: Any, row_ids: list[int], duel_id: int) -> int:
    """The spares ``row_ids`` are spares again if duel ``duel_id`` still holds them; inside a failed
    duel's answers transaction, or a take (:func:`recover`). Returns how many."""
    return sum(int(s.execute(GIVE_BACK, {"rid": rid, "did": duel_id}).rowcount) for rid in row_ids)


def keep_rows(model: dict, prompt: str, texts: list[str], charge_id: int | None) -> list[dict]:
    """The :data:`KEEP` rows of a charged call's unshown images (their names, ``[image sha256:<hex>]``):
    spares of ``model`` for ``prompt``; none when the model keeps none."""
    keys = spare_keys(model, prompt)
    if keys is None:
        return []
    mkey, phash = keys
    now = utcnow()
    return [
        dict(
            key=uuid.uuid4().hex + uuid.uuid4().hex,  # unique; the row is found by (model key, prompt hash)
            model_key=mkey,
            prompt_hash=phash,
            status=SPARE,
            text=text,
            cost_nusd=0,
            charge_id=charge_id,
            claimed_at=now,
            created_at=now,
        )
        for text in texts
    ]


def keep(s: Any, model: dict, prompt: str, texts: list[str], *, charge_id: int | None) -> int:
    """Inside the answers transaction that charged a call: its unshown images become spares of
    ``model`` for ``prompt`` (:func:`keep_rows`). Returns how many."""
    rows = keep_rows(model, prompt, texts, charge_id)
    for row in rows:
        s.execute(KEEP, row)
    return len(rows)


def settle_writes(
    plan: Any, results: dict, *, charge_ids: dict, paid: set[int], failed: bool
) -> list[tuple[Any, dict]]:
    """The spares of a duel's answers transaction, as (statement of :data:`SETTLE_STATEMENTS`, parameters)
    in order: a failed duel gives back the spares it took, a duel that stored its answers keeps them spent
    for good; each call it ``paid`` for (charged, no fault, not late) keeps its unshown images, and, when
    the duel failed, its first image too."""
    taken = [r.id for r in results.values() if isinstance(r, store_claims.Stored) and r.spare]
    writes: list[tuple[Any, dict]] = [
        (GIVE_BACK if failed else SHOWN, {"rid": rid, "did": plan.duel_id}) for rid in taken
    ]
    for idx in sorted(paid):
        res = results[idx]
        if not draws_spares(plan.answers, plan.models[idx]):
            continue
        texts = list(getattr(res, "spares", ()) or ())
        if failed:
            texts = [res.text, *texts]
        writes += [(KEEP, row) for row in keep_rows(plan.models[idx], plan.prompt, texts, charge_ids.get(idx))]
    return writes
