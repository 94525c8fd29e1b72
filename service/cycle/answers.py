"""Step 3 of every duel: storing its answers, one sequence on a driver, its decisions beside it.

:func:`decide_answers` stores what both model calls returned (a completion, a stored answer,
or the exception that ended the call) and asks a *transaction driver* for each round trip:
:class:`service.cycle.sync_driver.SyncTx` (SQLAlchemy, in a worker thread), or on PostgreSQL, for
an annotator's or the admin's duel of a campaign it covers, :class:`service.cycle.pg_driver.PgTx`
(asyncpg, on the event loop); both run the same statements. The steps, in order:

1. :func:`settle` (before the campaign's lock: cleaning and masking a long answer takes a
   while): :func:`settle_answers` makes the charge rows (capped by
   :func:`service.money.ledger.model_charge`, zero-cost rows for reused answers), the duel's
   answer columns, the failure and the provider faults;
2. the campaign's row locked and the duel read (a campaign or duel deleted meanwhile: nothing); the
   driver covers the campaign (the caller chose it before the transaction);
3. calls that returned after the duel's hard deadline are not charged (:func:`late_error`);
   answered after the campaign ended: charged, marked late (:func:`marked_late`);
4. the charge rows written (:func:`service.money.charges.charge_answers`), the answers paid
   for join the answer store with their charge;
5. the duel's next status (:func:`after_answers`), a provider fault's pause
   (:func:`fault_pause`), and one write of the duel and the campaign's spend and counters.

Instant models (simulated ones) are answered inside the plan transaction instead
(:func:`answer_now`, called by :func:`service.cycle.plan.decide_plan`), with the same
decisions. The pure functions at the end of this module take plain values and are tested
without a database (tests/service/cycle/test_cycle_decisions.py).
"""

from __future__ import annotations

import datetime as dt
import logging
from dataclasses import dataclass
from types import SimpleNamespace
from typing import TYPE_CHECKING, Any

from algorithms.vocabulary import IN_FLIGHT, CampaignStatus, DuelStatus

from ..campaigns import store_claims
from ..campaigns.expiry import is_stale
from ..campaigns.leases import ORPHAN_REQUESTER
from ..campaigns.style import answer_style
from ..campaigns.types import DuelOutcome, DuelPlan
from ..clients import ClientError, Completion
from ..models import from_nusd, utcnow
from ..money import ledger
from ..money.charges import reuse_charge
from ..plain_values import finite_or_none
from ..redaction import redact
from ..stored_text import MAX_ERROR_CHARS, clean_text
from .shared import DuelRow, config_of, not_handled
from .verdict import Ending, paused

if TYPE_CHECKING:  # pragma: no cover
    from .driver import Tx
    from .service_port import HotService

log = logging.getLogger("llmduel.campaigns")

#: The duel's columns the answers write (with ``did``, its id).
ANSWER_COLUMNS = (
    "status",
    "error",
    "cost_nusd",
    "completion_a",
    "completion_b",
    "answer_a",
    "answer_b",
    "answer_style",
    "answered_at",
    "expires_at",
)


@dataclass(frozen=True)
class Settled:
    """Both calls' results as :func:`settle_answers` reads them, at ``now``: worked out before the
    campaign's lock is taken (cleaning and masking a long answer takes a while)."""

    now: dt.datetime
    charges: list[dict]
    total_nusd: int
    fields: dict[str, Any]
    error: str | None
    faults: dict[int, str]


def settle(svc: HotService, plan: DuelPlan, results: dict[int, Any]) -> Settled:
    """Step 1, no lock: :func:`settle_answers` now, with the campaign's secrets to mask."""
    now = utcnow()
    return Settled(now, *settle_answers(plan, results, now, svc.secret_keys(plan.models, plan.judge)))


async def decide_answers(
    svc: HotService, tx: Tx, plan: DuelPlan, *, results: dict[int, Any], settled: Settled, run: bool = False
) -> DuelOutcome:
    """Store the answers of duel ``plan.duel_id`` (``results``: both calls' results, ``settled``: them
    settled by :func:`settle`; ``run``: a background run's duel): charges, the answer stores, the duel's
    status, a provider fault's pause."""
    crow, drow = await tx.answer_reads(plan.campaign_id, plan.duel_id)
    if crow is None or drow is None:  # deleted meanwhile
        return DuelOutcome(plan.duel_id, "missing", failed=True, error="campaign or duel deleted")
    if not tx.covers(await config_of(svc, tx, crow.id, max(plan.i, plan.j)), run):  # chosen before the transaction
        raise not_handled(crow.id)
    charges, total, fields, error = settled.charges, settled.total_nusd, settled.fields, settled.error
    faults = settled.faults
    # the time under the lock, not settle's: a store that waited for the lock past the deadline is late too
    # (a reader saw the deadline pass with nothing stored: settlement.py read the spend as final then)
    late = is_stale(drow.expires_at, max(settled.now, utcnow())) and bool(charges or faults)
    if late:
        # Its calls returned after the duel's hard deadline (the process stalled past it): the
        # budget stopped holding the reservation then, so the ledger cannot take the charge
        # (docs/reliability.md, Ledger: the assumption left). Nothing of it is kept.
        lost = sum(ch["amount_nusd"] for ch in charges)
        log.warning("duel %s: calls returned after its hard deadline; %d nUSD not charged", drow.id, lost)
        charges, total, faults, fields = [], 0, {}, {}
        error = late_error(lost)
    if crow.status != CampaignStatus.RUNNING:  # calls sent before the end, answered after it: late
        charges, fields = marked_late(charges, fields)
    charge_ids = await tx.answer_charges(plan.campaign_id, drow.id, charges)
    for idx, claim in plan.claims.items():  # answers paid by this duel join the store with their charge
        res = results.get(idx) if isinstance(idx, int) else None
        if isinstance(res, Completion) and idx not in faults and not late:  # nor a faulty or late one
            text = redact(clean_text(res.text), svc.secret_keys(crow.models, crow.judge))
            amount = next((ch["amount_nusd"] for ch in charges if ch["model_index"] == idx), 0)
            await tx.store_answer(claim, res, text=text, amount_nusd=amount, charge_id=charge_ids.get(idx))
    paid = {i for i, r in results.items() if isinstance(r, Completion) and i not in faults and not late}
    await tx.settle_spares(
        plan, results, charge_ids=charge_ids, paid=paid, failed=error is not None
    )  # images of calls of several
    d = DuelRow(**{**drow._asdict(), **fields})
    status, stored_error, failed = after_answers(d.status, d.requested_by, error)
    if stored_error is not None:
        d.error = stored_error
    if status == DuelStatus.PENDING and d.status == DuelStatus.CALLING:
        d.expires_at = settled.now + svc.pending_expiry  # the wait for its verdict starts
    d.status = status
    d.cost_nusd = int(d.cost_nusd or 0) + total
    end = fault_pause(faults, crow.status)
    duel = {k: getattr(d, k) for k in ANSWER_COLUMNS} | {"did": d.id}
    # A spent budget ends the campaign when this duel's verdict is recorded (or at the next
    # plan), so the answers just paid for can still count.
    await tx.answer_writes(duel, {"cid": crow.id, "spent": total, "failed": int(failed), "now": settled.now}, end)
    c = SimpleNamespace(id=crow.id, models=crow.models, status=end.status if end is not None else crow.status)
    return DuelOutcome(d.id, d.status, failed=error is not None, error=d.error, view=svc.deps.views.duel_view(d, c))


def answer_now(svc: HotService, plan: DuelPlan, now: dt.datetime) -> tuple[list[dict], dict[str, Any]]:
    """Both answers inside the plan transaction, when both models are instant.

    Sets ``plan.results`` and returns (charges, the duel's columns) as :func:`decide_answers`
    would record them; ([], {}) when the models must be called outside the transaction.
    """
    plan.results = svc.deps.calls.instant_results(plan)
    if plan.results is None:
        return [], {}
    # instant models are simulated ones, charged their fixed cost: their bound (no provider fault)
    charges, total, columns, error, _ = settle_answers(
        plan, plan.results, now, svc.secret_keys(plan.models, plan.judge)
    )
    columns["cost_nusd"] = total
    if error is not None:
        columns.update(status=DuelStatus.FAILED, error=error)
    else:
        columns.update(status=DuelStatus.PENDING, expires_at=now + svc.pending_expiry)
    return charges, columns


# ---------------------------------------------------------------- the decisions (pure: plain values in, a decision out)
def settle_answers(plan: DuelPlan, results: dict[int, Any], now: dt.datetime, keys: tuple[str, ...]):
    """What both calls' results mean for the duel.

    ``keys``: the secrets the stored text must not contain (service.redaction). Returns
    (charges, total, fields, error, faults): the charge rows (without
    ``duel_id``) for what the answers cost (:func:`ledger.model_charge`: at most
    each call's bound), their sum in nano-USD, the duel's answer columns, the
    failure message (None when both answered) and the provider faults (the
    models whose reported usage exceeded their bound: the duel fails).
    """
    errors: list[str] = []
    faults: dict[int, str] = {}
    charges: list[dict] = []
    info: dict[int, dict] = {}
    for idx in (plan.i, plan.j):
        res = results[idx]
        name = plan.models[idx]["name"]
        if isinstance(res, store_claims.Stored):  # reused: a zero-cost ledger row naming the charge that paid
            info[idx] = {
                "model": name,
                "input_tokens": res.input_tokens,
                "output_tokens": res.output_tokens,
                "cost": 0.0,
                "reused_answer": res.id,
            }
            charges.append(reuse_charge(plan.campaign_id, "model", model_index=idx, stored=res, now=now))
        elif isinstance(res, Completion):
            charge = ledger.model_charge(plan.models[idx], plan.prompt, res)
            amount = charge.amount_nusd
            info[idx] = {
                "model": name,
                "input_tokens": res.input_tokens,
                "output_tokens": res.output_tokens,
                "cost": from_nusd(amount),
                "latency_s": finite_or_none(res.latency_s),
                "attempts": res.attempts,
                **charge.detail(),
            }
            if charge.fault is not None:
                faults[idx] = charge.fault
                errors.append(f"provider fault: {charge.fault}")
            if amount:
                charges.append(
                    {
                        "campaign_id": plan.campaign_id,
                        "kind": "model",
                        "model_index": idx,
                        "amount_nusd": amount,
                        "created_at": now,
                        "detail": {
                            "input_tokens": res.input_tokens,
                            "output_tokens": res.output_tokens,
                            **charge.detail(),
                        },
                    }
                )
        else:
            # a client's error is its message; any other exception only its type (its text might carry request details)
            text = str(res) if isinstance(res, ClientError) else f"unexpected {type(res).__name__} in the model client"
            message = redact(text, keys)
            info[idx] = {"model": name, "error": message}
            errors.append(f"model {name!r}: {message}")
    total = sum(ch["amount_nusd"] for ch in charges)
    fields: dict[str, Any] = {"completion_a": info.get(plan.model_a), "completion_b": info.get(plan.model_b)}
    error = None
    if errors:
        error = clean_text("; ".join(errors), MAX_ERROR_CHARS)
    else:
        text_a, text_b = clean_text(results[plan.model_a].text), clean_text(results[plan.model_b].text)
        answer_a, answer_b = redact(text_a, keys), redact(text_b, keys)
        fields.update(
            answer_a=answer_a, answer_b=answer_b, answer_style=answer_style(answer_a, answer_b), answered_at=now
        )
    return charges, total, fields, error, faults


def after_answers(status: str, requested_by: str | None, error: str | None) -> tuple[str, str | None, bool]:
    """(the duel's status once its answers are stored, the error to store on it (None: leave it),
    whether it failed now: ``duels_failed`` + 1).

    A duel of a run taken over (an orphan) is paid for but never counted: expired. A failure
    is stored on the duel, and fails it if it is still in flight; answers make a calling duel
    pending (its verdict's wait starts). A duel no longer in flight keeps its status.
    """
    if requested_by == ORPHAN_REQUESTER and status in IN_FLIGHT:
        return DuelStatus.EXPIRED, None, False
    if error is not None:
        return (DuelStatus.FAILED, error, True) if status in IN_FLIGHT else (status, error, False)
    if status == DuelStatus.CALLING:
        return DuelStatus.PENDING, None, False
    return status, None, False


def late_error(lost_nusd: int) -> str:
    """The duel's error when its calls returned after its hard deadline (nothing of them is charged)."""
    return f"its calls returned after the duel's hard deadline; {lost_nusd / 1e9:.9g} USD not charged"


def marked_late(charges: list[dict], fields: dict[str, Any]) -> tuple[list[dict], dict[str, Any]]:
    """The charge rows and answer columns of calls sent before the campaign ended and answered
    after it: charged, each marked late (:func:`service.money.ledger.mark_late`)."""
    for ch in charges:
        ch["detail"] = ledger.mark_late(ch.get("detail"), True)
    for key in ("completion_a", "completion_b"):
        if isinstance(fields.get(key), dict) and "cost" in fields[key]:
            fields[key] = ledger.mark_late(fields[key], True)
    return charges, fields


def fault_pause(faults: dict[int, str], campaign_status: str) -> Ending | None:
    """A provider fault (the first model's) pauses a running campaign; else None."""
    if not faults or campaign_status != CampaignStatus.RUNNING:
        return None
    return paused(next(iter(faults.values())))
