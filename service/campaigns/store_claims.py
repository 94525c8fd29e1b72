"""A store row claimed before a paid call, and what a duel gets from a store (docs/reuse.md).

A missing answer or verdict is claimed (a row with status ``generating``, taken by
:meth:`.stores.Stores.claim_tx`) before the call; the transaction that stores the result and its
charge turns the claimed row into the stored one (``ready``) with :func:`finalize_answer` or
:func:`finalize_verdict`, so the two commit together.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from sqlalchemy import bindparam, update

from ..models import StoredAnswer, StoredVerdict, utcnow

GENERATING = "generating"
READY = "ready"


@dataclass
class Stored:
    """A result taken from a store instead of a new call (charged 0, refers to its paying charge)."""

    id: int
    charge_id: int | None
    text: str = ""
    input_tokens: int | None = None
    output_tokens: int | None = None
    choice: str | None = None
    detail: dict | None = None
    cost: float = 0.0
    spare: bool = False  # an unshown image of a call of several (service/campaigns/spares.py)


@dataclass
class Claim:
    """A store row this process claimed (status generating) before paying for the call."""

    table: str  # "answer" or "verdict"
    row_id: int
    key: str
    finalized: Stored | None = None
    extra: dict = field(default_factory=dict)


_SA = StoredAnswer.__table__.c
#: The claimed row becomes the stored answer with its charge (both drivers of the answers transaction
#: run it; a ready row is never changed: when this call outlived its claim and another caller took it
#: over and stored its answer first, that stored answer stays).
FINALIZE_ANSWER = (
    update(StoredAnswer.__table__)
    .where(_SA.id == bindparam("rid"), _SA.status != READY)
    .values(
        status=READY,
        text=bindparam("text"),
        input_tokens=bindparam("input_tokens"),
        output_tokens=bindparam("output_tokens"),
        cost_nusd=bindparam("cost_nusd"),
        charge_id=bindparam("charge_id"),
        claimed_at=bindparam("now", type_=_SA.claimed_at.type),
    )
)


def finalized_answer(claim: Claim, completion: Any, *, text: str, amount_nusd: int, charge_id: int | None) -> dict:
    """The parameters of :data:`FINALIZE_ANSWER` for ``claim``, which is marked finalized with them."""
    tin, tout = getattr(completion, "input_tokens", None), getattr(completion, "output_tokens", None)
    claim.finalized = Stored(claim.row_id, charge_id, text=text, input_tokens=tin, output_tokens=tout)
    params = dict(rid=claim.row_id, text=text, cost_nusd=amount_nusd, charge_id=charge_id, now=utcnow())
    return params | {"input_tokens": tin, "output_tokens": tout}


def finalize_answer(s, claim: Claim, completion: Any, *, text: str, amount_nusd: int, charge_id: int | None) -> None:
    """Inside the answers transaction: the claimed row becomes the stored answer (with its charge)."""
    s.execute(
        FINALIZE_ANSWER, finalized_answer(claim, completion, text=text, amount_nusd=amount_nusd, charge_id=charge_id)
    )


def finalize_verdict(
    s, claim: Claim, *, choice: str, detail: dict | None, amount_nusd: int, charge_id: int | None
) -> None:
    """Inside the verdict transaction: the claimed row becomes the stored verdict (stored order)."""
    s.execute(
        update(StoredVerdict)
        .where(StoredVerdict.id == claim.row_id, StoredVerdict.status != READY)  # see finalize_answer
        .values(status=READY, choice=choice, detail=detail, cost_nusd=amount_nusd, charge_id=charge_id)
        .execution_options(synchronize_session=False)
    )
    claim.finalized = Stored(claim.row_id, charge_id, choice=choice, detail=detail)
