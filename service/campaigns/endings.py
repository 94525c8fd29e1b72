"""How a running campaign ends inside a locked transaction: one set of statements for every
transaction (:data:`FINISH`, :data:`ENDED_EVENT`, :data:`CANCEL_IN_FLIGHT`), run by
:class:`Endings` on an ORM session and by both drivers of the vote cycle
(:mod:`service.cycle.sync_driver`, :mod:`service.cycle.pg_driver`, which compiles them)."""

from __future__ import annotations

import datetime as dt
from types import SimpleNamespace
from typing import Any

from sqlalchemy import and_, bindparam, case, func, insert, literal, null, or_, select, update
from sqlalchemy.ext.compiler import compiles
from sqlalchemy.orm.attributes import set_committed_value
from sqlalchemy.sql.elements import Cast

from algorithms.vocabulary import IN_FLIGHT, CampaignStatus, DuelStatus

from ..models import Campaign, Duel, WebhookEvent
from ..money import ledger
from ..webhook_events import CAMPAIGN_ENDED, CAMPAIGN_SETTLED
from .limits import END_LIMIT_PROVIDER
from .webhooks import new_event_id

#: The error of an in-flight duel cancelled by its campaign's end.
CANCELLED_ERROR = "the campaign ended before this duel was judged"

C = Campaign.__table__.c
D = Duel.__table__.c

# A campaign's end: its status and reason, the run stopped, the
# campaign.ended event in the webhook outbox, the other duels in flight cancelled.
W = WebhookEvent.__table__.c
FINISH = (
    update(Campaign.__table__)
    .where(C.id == bindparam("cid"))
    .values(
        # not "status": executed with the same parameters, CANCEL_IN_FLIGHT's own ``status`` would take it
        status=bindparam("end_status"),
        end_reason=bindparam("reason"),
        end_limit=bindparam("limit", type_=C.end_limit.type),
        ended_at=bindparam("now"),
        # the run plans no more duels; its owner keeps the lease until its task has drained (expiry.run_under_way)
        run_active=False,
        webhook_state=case((func.coalesce(C.webhook_url, "") == "", C.webhook_state), else_=literal("pending")),
        webhook_error=case((func.coalesce(C.webhook_url, "") == "", C.webhook_error), else_=null()),
        # its campaign.settled, once the spend is final (webhooks.Webhooks.settled_events_tx)
        webhook_settle_due=and_(
            func.coalesce(C.webhook_url, "") != "", func.coalesce(C.webhook_events, "").contains(CAMPAIGN_SETTLED)
        ),
        winner=func.coalesce(bindparam("winner", type_=C.winner.type), C.winner),
        leader=func.coalesce(bindparam("winner", type_=C.leader.type), C.leader),
    )
)


class _typed(Cast):
    """A parameter in an ``INSERT ... SELECT`` list: ``CAST(:p AS type)`` where the database needs the
    type (PostgreSQL cannot infer it there), the bare parameter on SQLite, whose ``CAST(... AS
    DATETIME)`` has numeric affinity and would store ``'2026-11-25 03:00:00'`` as the number 2026."""

    inherit_cache = True


@compiles(_typed, "sqlite")
def _typed_on_sqlite(element: _typed, compiler: Any, **kw: Any) -> str:
    return compiler.process(element.clause, **kw)


ENDED_EVENT = insert(WebhookEvent.__table__).from_select(
    ["id", "campaign_id", "event_type", "url", "state", "attempts", "next_attempt_at", "created_at"],
    select(
        _typed(bindparam("event_id", type_=W.id.type), W.id.type),
        C.id,
        literal(CAMPAIGN_ENDED, W.event_type.type),
        C.webhook_url,
        literal("pending", W.state.type),
        literal(0, W.attempts.type),
        _typed(bindparam("now", type_=W.next_attempt_at.type), W.next_attempt_at.type),
        _typed(bindparam("now", type_=W.created_at.type), W.created_at.type),
    ).where(
        C.id == bindparam("cid"),
        func.coalesce(C.webhook_url, "") != "",
        or_(C.webhook_events.is_(None), C.webhook_events.contains(CAMPAIGN_ENDED)),
    ),
)
CANCEL_IN_FLIGHT = (
    update(Duel.__table__)
    .where(
        D.campaign_id == bindparam("cid"),
        D.status.in_([literal(str(s)) for s in IN_FLIGHT]),
        D.id != bindparam("keep", type_=D.id.type),
    )
    .values(status=DuelStatus.CANCELLED, error=CANCELLED_ERROR)
)


def finish_params(campaign_id: int, end, now, keep_duel: int | None = None) -> dict:
    """The parameters of :data:`FINISH`, :data:`ENDED_EVENT` and :data:`CANCEL_IN_FLIGHT` for an
    ending of :mod:`service.cycle.plan` or :mod:`service.cycle.verdict` (``end``: its ``status``, ``reason``, ``limit`` and ``winner``)."""
    return {
        "cid": campaign_id,
        "end_status": str(end.status),
        "reason": end.reason,
        "limit": end.limit,
        "winner": getattr(end, "winner", None),
        "now": now,
        "event_id": new_event_id(),
        "keep": keep_duel or 0,  # duel ids start at 1
    }


#: An ending's statements, in the order they run (the asyncpg driver compiles the same tuple).
ENDING = (FINISH, ENDED_EVENT, CANCEL_IN_FLIGHT)


def end_campaign(conn, campaign_id: int, end, now, *, keep_duel: int | None = None) -> None:
    """Run :data:`ENDING` for ``end`` on ``conn`` (a session or a connection) in the caller's transaction."""
    params = finish_params(campaign_id, end, now, keep_duel)
    for stmt in ENDING:
        conn.execute(stmt, params)


class Endings:
    """End a campaign (its status and reason, the run stopped, the duels in flight cancelled, the
    ``campaign.ended`` outbox row) in the caller's session with the statements above; no state.

    The ORM object ``c`` the caller holds gets the new values as committed ones
    (``set_committed_value``): it shows the ending without writing it a second time. The
    lifecycle's stop, the answers transaction, the hybrid judge's verdicts and
    :class:`.pregeneration.Pregeneration` (a provider fault) end campaigns through it."""

    def finish(
        self,
        s,
        c: Campaign,
        status: str,
        reason: str,
        *,
        now: dt.datetime,
        keep_duel: int | None = None,
        limit: str | None = None,
        winner: int | None = None,
    ) -> None:
        """End a running campaign: in-flight duels but ``keep_duel`` are cancelled, the run stops.

        ``limit``: the limit that ended it (``limits.END_LIMITS``), so that raising it continues the
        campaign; ``winner``: the certified model.
        """
        end = SimpleNamespace(status=status, reason=reason, limit=limit, winner=winner)
        end_campaign(s, int(c.id), end, now, keep_duel=keep_duel)
        ended: dict[str, Any] = dict(
            status=status, end_reason=reason, end_limit=limit, ended_at=now, run_active=False
        )  # the run's owner keeps its lease until its task has drained (expiry.run_under_way)
        if c.webhook_url:
            ended.update(webhook_state="pending", webhook_error=None)
        ended["webhook_settle_due"] = bool(c.webhook_url) and CAMPAIGN_SETTLED in (c.webhook_events or "")
        if winner is not None:
            ended.update(winner=winner, leader=winner)
        for key, value in ended.items():
            set_committed_value(c, key, value)

    def pause_for_fault(self, s, c: Campaign, fault: str, now: dt.datetime, *, keep_duel: int | None = None) -> None:
        """Pause a running campaign on a provider fault (:mod:`.ledger`): it ends as stopped with
        ``end_limit = 'provider'``, and a PATCH of its limits continues it (limits.continue_refusal)."""
        if c.status == CampaignStatus.RUNNING:
            reason = ledger.fault_reason(fault)
            self.finish(s, c, CampaignStatus.STOPPED, reason, now=now, keep_duel=keep_duel, limit=END_LIMIT_PROVIDER)
