"""The one writer of charge rows and campaign spend.

Every row of the ``charges`` table and every change of ``campaigns.spend_nusd`` and
``campaigns.judge_spend_nusd`` is written here, in the caller's transaction (which holds the
campaign's row lock), so that a campaign's spend is exactly the sum of its charges on every
database (``service/models.py``; :mod:`service.campaigns.replay` checks it). A test
(``tests/test_money_writer.py``) reads every other module of ``service/`` and fails if one
inserts a charge row or changes a spend.

What a call is charged is decided elsewhere: the amounts by :mod:`service.money.ledger` (at
most the call's bound), the reservations by :mod:`service.money.reserve` and
:mod:`service.money.budget`, the holds by :mod:`service.money.holds`. This module only writes.

Three forms, one set of statements:

* Core statements (upper case) that both drivers of the vote cycle execute: the SQLAlchemy
  driver (:mod:`service.cycle.sync_driver`) runs them as they are, the asyncpg driver
  (:mod:`service.cycle.pg_driver`) compiles them, and joins the two INSERT builders
  :func:`vote_fee_after` and :func:`charges_from_json` to its one-statement writes;
* the SET items :func:`spend` and :func:`judge_spend`, which the drivers' campaign updates
  (``PLANNED``, ``VOTED``) spread into their ``.values(...)``;
* functions for the other transactions (the answers, a judge's verdict, a pre-generated
  answer, a hybrid judge's fee), on a session or connection and, where the caller holds them,
  the ORM objects of the campaign and the duel.

Charge kinds (``charges.kind``, at most 8 characters): :data:`MODEL` (a model's answer) and :data:`JUDGE` (an LLM
judge's calls, a human's fee per vote). A new kind of charge (a batch call at batch prices,
an image call) is a new constant in :data:`KINDS` and a row made by :func:`charge_row`
(``kind=...``, its figures in ``detail``), written with :func:`insert_charge` and added to the
spend with :func:`add_spend` (or :data:`SPEND` for a Core-only path). Nothing else needs a new
writer: every kind lands in the same table and the same two counters (a judge's kinds also in
``judge_spend_nusd``: pass ``judge=True``).
"""

from __future__ import annotations

import datetime as dt
from typing import Any

from sqlalchemy import JSON, Integer, bindparam, cast, column, func, insert, literal, null, select, true, update

from ..models import Campaign, Charge, Duel

C = Campaign.__table__.c
D = Duel.__table__.c
CH = Charge.__table__.c

#: A model's answer (``model_index`` names the model).
MODEL = "model"
#: A judge's verdict: an LLM judge's calls, a human judge's fee per vote (``model_index`` NULL).
JUDGE = "judge"
#: Every kind a charge row may have; the kinds in :data:`JUDGE_KINDS` count in ``judge_spend_nusd`` too.
KINDS = (MODEL, JUDGE)
JUDGE_KINDS = (JUDGE,)


def spend(amount: Any) -> dict[str, Any]:
    """The SET items adding ``amount`` (a bound parameter or an expression) to a campaign's spend."""
    return {"spend_nusd": C.spend_nusd + amount}


def judge_spend(amount: Any) -> dict[str, Any]:
    """The SET items adding a judge's ``amount`` to a campaign's spend and its judge spend."""
    return {"spend_nusd": C.spend_nusd + amount, "judge_spend_nusd": C.judge_spend_nusd + amount}


# ---------------------------------------------------------------- statements (both drivers)
#: Charge rows (:func:`charge_row` dicts; executemany).
INSERT_CHARGES = insert(Charge.__table__)
#: A human judge's fee per vote (``fee`` > 0): one judge charge with the vote.
VOTE_FEE_CHARGE = insert(Charge.__table__).values(
    campaign_id=bindparam("cid"),
    duel_id=bindparam("did"),
    kind=JUDGE,
    model_index=None,
    amount_nusd=bindparam("fee"),
    created_at=bindparam("now"),
)
#: A charge added to its duel's cost.
DUEL_COST = update(Duel.__table__).where(D.id == bindparam("did")).values(cost_nusd=D.cost_nusd + bindparam("amount"))
#: A judge charge added to the campaign's spend and judge spend.
JUDGE_SPEND = update(Campaign.__table__).where(C.id == bindparam("cid")).values(**judge_spend(bindparam("amount")))
#: A charge without a duel (a pre-generated answer) added to the spend; the campaign changed (the
#: session's campaign object is left as it is: the transaction reads no spend after it).
SPEND = (
    update(Campaign.__table__)
    .where(C.id == bindparam("cid"))
    .values(**spend(bindparam("amount")), version=C.version + 1, updated_at=bindparam("now"))
)

#: One charge row of a duel's answers (a model's answer, or a zero-cost reuse naming the charge
#: that paid), its id returned: :func:`charge_answers` runs it per row, the asyncpg driver compiles it.
ANSWER_CHARGE = (
    insert(Charge.__table__)
    .values(
        campaign_id=bindparam("campaign_id", type_=CH.campaign_id.type),
        duel_id=bindparam("duel_id", type_=CH.duel_id.type),
        kind=bindparam("kind", type_=CH.kind.type),
        model_index=bindparam("model_index", type_=CH.model_index.type),
        amount_nusd=bindparam("amount_nusd", type_=CH.amount_nusd.type),
        detail=bindparam("detail", type_=CH.detail.type),
        reuses_charge_id=bindparam("reuses_charge_id", type_=CH.reuses_charge_id.type),
        created_at=bindparam("created_at", type_=CH.created_at.type),
    )
    .returning(CH.id)
)
#: The columns :data:`ANSWER_CHARGE` binds (a row leaves out ``reuses_charge_id`` unless it reuses).
ANSWER_CHARGE_COLUMNS = (
    "campaign_id",
    "duel_id",
    "kind",
    "model_index",
    "amount_nusd",
    "detail",
    "reuses_charge_id",
    "created_at",
)

#: The fields of a charge row that a planned duel's charges carry (the rest: its campaign, duel, time).
CHARGE_FIELDS = ("kind", "model_index", "amount_nusd", "detail")


def vote_fee_after(judged: Any) -> Any:
    """:data:`VOTE_FEE_CHARGE` as a CTE of the asyncpg driver's vote statement: written only when
    the duel was judged (a row of the ``judged`` CTE) and ``fee`` > 0."""
    return (
        insert(Charge.__table__)
        .from_select(
            ["campaign_id", "duel_id", "kind", "model_index", "amount_nusd", "created_at"],
            select(
                cast(bindparam("cid"), CH.campaign_id.type),
                judged.c.id,
                literal(JUDGE, CH.kind.type),
                null(),
                cast(bindparam("fee"), CH.amount_nusd.type),
                cast(bindparam("now"), CH.created_at.type),
            ).where(cast(bindparam("fee"), CH.amount_nusd.type) > 0),
        )
        .cte("f")
    )


def charges_from_json(duel: Any) -> Any:
    """:data:`INSERT_CHARGES` as a CTE of the asyncpg driver's plan statement: the new duel's
    (``duel``, a CTE returning its id) charges, sent as one JSON array ``charges`` of
    :data:`CHARGE_FIELDS` and ``n`` (their order)."""
    x = (
        func.json_to_recordset(cast(bindparam("charges"), JSON))
        .table_valued(*(column(k, CH[k].type) for k in CHARGE_FIELDS), column("n", Integer))
        .render_derived(name="x", with_types=True)
    )
    return (
        insert(Charge.__table__)
        .from_select(
            ["campaign_id", "duel_id", *CHARGE_FIELDS, "created_at"],
            select(
                cast(bindparam("cid"), CH.campaign_id.type),
                duel.c.id,
                *(x.c[k] for k in CHARGE_FIELDS),
                cast(bindparam("now"), CH.created_at.type),
            )
            .select_from(duel)
            .join(x, true())
            .order_by(x.c.n),
        )
        .cte("ch")
    )


# ---------------------------------------------------------------- the other transactions
def charge_row(
    campaign_id: int,
    kind: str,
    amount_nusd: int,
    now: dt.datetime,
    *,
    duel_id: int | None = None,
    model_index: int | None = None,
    detail: dict | None = None,
) -> dict[str, Any]:
    """The columns of one charge row of kind ``kind`` (one of :data:`KINDS`)."""
    if kind not in KINDS:
        raise ValueError(f"unknown charge kind {kind!r}")
    return dict(
        campaign_id=campaign_id,
        duel_id=duel_id,
        kind=kind,
        model_index=model_index,
        amount_nusd=amount_nusd,
        detail=detail,
        created_at=now,
    )


def reuse_charge(campaign_id: int, kind: str, *, model_index: int | None, stored: Any, now: dt.datetime) -> dict:
    """The ledger row of a reuse: zero cost, a reference to the charge that paid (``stored``: the
    store's result, :class:`service.campaigns.store_claims.Stored`, its ``id`` and ``charge_id``)."""
    return {
        "campaign_id": campaign_id,
        "kind": kind,
        "model_index": model_index,
        "amount_nusd": 0,
        "reuses_charge_id": stored.charge_id,
        "detail": {"reused": "answer" if kind == MODEL else "verdict", "store_id": stored.id},
        "created_at": now,
    }


def insert_charge(conn: Any, row: dict[str, Any]) -> int:
    """Insert one charge row (a :func:`charge_row` or a :func:`reuse_charge` row)
    in the caller's transaction; its id. The spend is the caller's next step (:func:`add_spend`)."""
    return int(conn.execute(insert(Charge).values(**row).returning(Charge.id)).scalar_one())


def add_spend(c: Campaign, amount_nusd: int, *, judge: bool = False) -> None:
    """Add ``amount_nusd`` to the locked campaign ``c``'s spend (ORM object; flushed with the
    transaction), and to its judge spend for a judge's charge."""
    c.spend_nusd += amount_nusd
    if judge:
        c.judge_spend_nusd += amount_nusd


def answer_charge_params(duel_id: int, row: dict[str, Any]) -> dict[str, Any]:
    """The parameters of :data:`ANSWER_CHARGE` for one of duel ``duel_id``'s answer charge rows."""
    unknown = set(row).difference(ANSWER_CHARGE_COLUMNS)
    if unknown:  # a column the statement does not write would be dropped without a word
        raise ValueError(f"answer charge row with unknown columns {sorted(unknown)}")
    params = {k: row.get(k) for k in ANSWER_CHARGE_COLUMNS}
    params["duel_id"] = duel_id
    return params


def charge_answers(conn: Any, duel_id: int, rows: list[dict]) -> dict[int, int]:
    """A duel's answers: its charge rows (``rows``, without ``duel_id``), in order; their ids by
    model index (:data:`ANSWER_CHARGE` per row; the asyncpg driver runs the same statement). Their
    total joins the duel's cost and, through :func:`spend`, the campaign's spend in the answers' own
    updates (``service/cycle/sync_driver.py``: ``ANSWERED_DUEL``, ``ANSWERED``)."""
    return {
        row["model_index"]: int(conn.execute(ANSWER_CHARGE, answer_charge_params(duel_id, row)).scalar_one())
        for row in rows
    }


def charge_judgement(
    s: Any, c: Campaign, d: Duel, *, amount_nusd: int, detail: dict | None, now: dt.datetime
) -> int | None:
    """One ``judge`` charge of ``amount_nusd`` (nothing for 0) added to the duel's cost and the
    campaign's spend and judge spend (ORM objects ``c``, ``d``); the charge row's id."""
    if not amount_nusd:
        return None
    charge_id = insert_charge(s, charge_row(c.id, JUDGE, amount_nusd, now, duel_id=d.id, detail=detail))
    d.cost_nusd += amount_nusd
    add_spend(c, amount_nusd, judge=True)
    return charge_id


def charge_judgement_core(
    conn: Any, campaign_id: int, duel_id: int, *, amount_nusd: int, detail: dict | None, now: dt.datetime
) -> int | None:
    """:func:`charge_judgement` as Core statements (the vote cycle's SQLAlchemy driver)."""
    if not amount_nusd:
        return None
    charge_id = insert_charge(conn, charge_row(campaign_id, JUDGE, amount_nusd, now, duel_id=duel_id, detail=detail))
    conn.execute(DUEL_COST, {"did": duel_id, "amount": amount_nusd})
    conn.execute(JUDGE_SPEND, {"cid": campaign_id, "amount": amount_nusd})
    return charge_id


def charge_without_duel(conn: Any, row: dict[str, Any]) -> int | None:
    """A charge with no duel (a pre-generated answer): its row and its amount added to the spend
    (Core; the campaign's version and time move); its id, None for an amount of 0 (no row)."""
    if not row["amount_nusd"]:
        return None
    charge_id = insert_charge(conn, row)
    conn.execute(SPEND, {"cid": row["campaign_id"], "amount": row["amount_nusd"], "now": row["created_at"]})
    return charge_id
