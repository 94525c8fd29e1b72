"""Annotator skips and vote comments (the voting page, docs/web.md).

A **skip** hands a pending duel back to the campaign's pool: its ``requested_by``
becomes :data:`POOL_REQUESTER` and a :class:`~service.models.DuelSkip` row remembers who
skipped it. Nothing is counted and nothing is charged again: the answers are already
paid for, and the next annotator who asks for a duel gets the oldest pooled duel that
they have not skipped before a new one is planned (:func:`claim_pooled`, called by the
planning transaction under the campaign's row lock). A pooled duel that nobody takes
expires like any other duel.

``POOL_REQUESTER`` starts with the annotator prefix on purpose: no annotator owns it
(:func:`service.campaigns.annotator_access.annotator_owns`), so no annotator can read or vote on a
pooled duel by guessing its id until it is handed to them.

Skips are bounded: each one makes this annotator's next request plan (and pay for) a new
duel, so an annotator may have at most ``max_pending_per_annotator`` skipped duels still
waiting in the pool; past that a skip is refused (409) until another annotator takes one
or it expires.

A **comment** is an optional note (at most :data:`MAX_COMMENT_CHARS` characters) stored
on the duel, in the same request as the vote, by the annotator who cast it; the export
writes it beside the vote (``battles.jsonl``).
"""

from __future__ import annotations

from sqlalchemy import Boolean, String, and_, bindparam, cast, func, insert, literal, or_, select, true, update
from sqlalchemy.orm import Session

from algorithms.vocabulary import DuelStatus

from ..auth import Principal
from ..models import Annotator, Campaign, Duel, DuelSkip, utcnow
from ..stored_text import clean_text
from .annotator_access import ANNOTATOR_LABEL_PREFIX
from .types import Conflict, Forbidden, NotFound

#: ``requested_by`` of a duel an annotator skipped, waiting for another annotator.
POOL_REQUESTER = f"{ANNOTATOR_LABEL_PREFIX}pool"

#: The longest comment stored with a vote.
MAX_COMMENT_CHARS = 2000


def skip_duel(db, duel_id: int, principal: Principal, max_skips: int | None = None) -> None:
    """An annotator hands its own pending duel back to the pool (one transaction).

    Raises :class:`NotFound` for a duel that does not exist or that the annotator does
    not own (the same answer for both, so ids are not probed), :class:`Conflict` when
    the duel no longer waits for a vote or when the annotator has already skipped
    ``max_skips`` duels of the campaign (``LLMDUEL_MAX_SKIPS_PER_ANNOTATOR``: skipping
    without bound would let an annotator pick the duels it votes on).
    """
    if principal.admin:
        raise Forbidden("only annotators skip duels; an admin can stop a campaign instead")
    with db.write() as s:
        c = s.execute(
            select(Campaign)
            .where(Campaign.id == select(Duel.campaign_id).where(Duel.id == duel_id).scalar_subquery())
            .with_for_update()
        ).scalar_one_or_none()
        d = s.get(Duel, duel_id) if c is not None else None
        if d is None or not principal.can_access(c.id) or d.requested_by != principal.label:
            raise NotFound(f"duel {duel_id} not found")
        now = utcnow()
        if d.status != DuelStatus.PENDING or d.expires_at <= now:
            raise Conflict(f"duel {duel_id} no longer waits for a vote")
        if max_skips is not None:
            done = s.execute(
                select(func.count(DuelSkip.id)).where(
                    DuelSkip.campaign_id == c.id, DuelSkip.annotator == principal.label
                )
            ).scalar_one()
            if done >= max_skips:
                raise Conflict(
                    f"you have skipped {done} duel{'s' if done != 1 else ''} of this campaign, the most an "
                    f"annotator may (LLMDUEL_MAX_SKIPS_PER_ANNOTATOR={max_skips}); vote on this one"
                )
        waiting = s.execute(
            select(func.count(DuelSkip.id))
            .join(Duel, Duel.id == DuelSkip.duel_id)
            .where(
                DuelSkip.campaign_id == c.id,
                DuelSkip.annotator == principal.label,
                Duel.requested_by == POOL_REQUESTER,
                Duel.status == DuelStatus.PENDING,
                Duel.expires_at > now,
            )
        ).scalar_one()
        limit = max(1, int(c.max_pending_per_annotator))
        if waiting >= limit:
            # each skip makes the next request plan (and pay for) a new duel: bound what one
            # annotator can make the campaign pay for without voting
            raise Conflict(
                f"you have {waiting} skipped duel{'s' if waiting != 1 else ''} still waiting for another annotator "
                f"(at most {limit}); vote on this one, or skip again once another annotator has taken one"
            )
        d.requested_by = POOL_REQUESTER
        s.execute(
            insert(DuelSkip).values(campaign_id=c.id, duel_id=d.id, annotator=principal.label, created_at=utcnow())
        )


_D = Duel.__table__.c
_S = DuelSkip.__table__.c
_A = Annotator.__table__.c
_SKIPPED_BY_ME = select(_S.duel_id).where(_S.campaign_id == bindparam("cid"), _S.annotator == bindparam("label"))
#: Another live annotator of the campaign who has not skipped the pooled duel: it could take it.
_SOMEONE_ELSE = (
    select(literal(1))
    .where(
        _A.campaign_id == bindparam("cid"),
        _A.revoked_at.is_(None),
        literal(ANNOTATOR_LABEL_PREFIX) + cast(_A.id, String) != bindparam("label"),
        ~select(literal(1))
        .where(_S.duel_id == _D.id, _S.annotator == literal(ANNOTATOR_LABEL_PREFIX) + cast(_A.id, String))
        .exists(),
    )
    .exists()
)
#: The live pooled duel of campaign ``cid`` to hand annotator ``label`` (``now``: the time): the oldest
#: it has not skipped; with ``back`` (a hybrid campaign, whose pool holds the duels selected for
#: humans in draw order) then one it skipped that no other live annotator can take, so a campaign
#: with one annotator never stalls on a skip (a skip only puts the duel behind the others).
POOLED = (
    select(_D.id)
    .where(
        _D.campaign_id == bindparam("cid"),
        _D.requested_by == literal(POOL_REQUESTER),
        _D.status == literal(str(DuelStatus.PENDING)),
        _D.expires_at > bindparam("now"),
        or_(_D.id.not_in(_SKIPPED_BY_ME), and_(bindparam("back", type_=Boolean) == true(), ~_SOMEONE_ELSE)),
    )
    .order_by(_D.id.in_(_SKIPPED_BY_ME), _D.id)
    .limit(1)
)
#: Hand pooled duel ``did`` to annotator ``label``.
HAND_OVER = update(Duel.__table__).where(_D.id == bindparam("did")).values(requested_by=bindparam("label"))


def claim_pooled(s: Session, campaign_id: int, label: str) -> int | None:
    """Inside the planning transaction (campaign row locked): hand the oldest live pooled
    duel that ``label`` has not skipped to ``label``; its id, or None when there is none."""
    duel_id = s.execute(
        POOLED, {"cid": campaign_id, "label": label, "now": utcnow(), "back": False}
    ).scalar_one_or_none()
    if duel_id is None:
        return None
    s.execute(HAND_OVER, {"did": duel_id, "label": label})
    return int(duel_id)


def clean_comment(comment: str | None) -> str | None:
    """The comment as stored: control characters dropped, trimmed, None when empty;
    :class:`ValueError` past :data:`MAX_COMMENT_CHARS`."""
    if comment is None:
        return None
    if len(comment) > MAX_COMMENT_CHARS:
        raise ValueError(f"a comment has at most {MAX_COMMENT_CHARS} characters (got {len(comment)})")
    text = clean_text(comment).strip()
    return text or None


def save_comment(db, duel_id: int, principal: Principal, comment: str) -> None:
    """Store ``comment`` on the duel this caller just voted on (its ``judged_by``)."""
    with db.write() as s:
        s.execute(
            update(Duel)
            .where(Duel.id == duel_id, Duel.judged_by == principal.label, Duel.choice.is_not(None))
            .values(comment=comment)
        )


def skips_by_annotator(s: Session, campaign_id: int) -> dict[str, int]:
    """``{annotator label: skips}`` of a campaign."""
    rows = s.execute(
        select(DuelSkip.annotator, func.count(DuelSkip.id))
        .where(DuelSkip.campaign_id == campaign_id)
        .group_by(DuelSkip.annotator)
    ).all()
    return {str(label): int(n) for label, n in rows}
